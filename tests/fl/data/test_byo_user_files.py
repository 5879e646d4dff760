"""Your own data files that are not what their names say (issue 32): a text file named ``.npz``, a LEAF
JSON file in another encoding, each one line naming the file and the problem."""

from __future__ import annotations

import json

import numpy as np
import pytest

from flamingo_sim.errors import InputDataError
from flamingo_sim.fl.data.byo import read_arrays, read_leaf


def test_a_text_file_named_npz_is_called_what_it_is(tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "c.npz").write_bytes("x,y\n1,2\nr\xe9sum\xe9\n".encode("latin-1"))
    np.savez(tmp_path / "test.npz", x=np.zeros((2, 3)), y=np.array([0, 1]))
    with pytest.raises(InputDataError) as info:
        read_arrays(tmp_path)
    assert str(info.value) == f"{tmp_path / 'train' / 'c.npz'}: not an .npz archive (np.savez's zip format); expected arrays 'x' and 'y'"


def test_a_latin1_leaf_file_names_its_line_and_byte(tmp_path):
    for split in ("train", "test"):
        (tmp_path / split).mkdir()
        text = json.dumps({"users": ["u"], "num_samples": [1], "user_data": {"u": {"x": [[0.0] * 784], "y": [3]}}}, indent=1)
        (tmp_path / split / "d.json").write_bytes(text.replace('"u"', '"\xe9"').encode("latin-1"))
    with pytest.raises(InputDataError) as info:
        read_leaf(tmp_path)
    assert str(info.value) == f"{tmp_path / 'train' / 'd.json'}: line 3: not UTF-8 text (byte 0xe9); save the file as UTF-8"
