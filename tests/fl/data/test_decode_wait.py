"""Real data's long silent wait (issue 32): decoding the test set, which the first evaluation waits
for, is said before it starts and timed after, once."""

from __future__ import annotations

import re

import torch

from flamingo_sim.fl.data.openimage import FedScaleImageDataset
from flamingo_sim.fl.data.pipeline import DecodedCache
from tests.fl.data.test_data import _write_fedscale


def test_decoding_the_test_set_is_said_once(tmp_path):
    _write_fedscale(tmp_path, {"c1": 3, "c2": 4}, n_test=5)
    lines: list[str] = []
    ds = DecodedCache(FedScaleImageDataset(tmp_path, "train", image_size=8, min_samples_per_client=1), 2, 1 << 20, log=lines.append)
    x, y = ds.test_data()
    again = ds.test_data()
    assert x.shape == (5, 3, 8, 8) and torch.equal(again[0], x)
    assert lines[0] == "decoding the test set (5 samples), once: the first evaluation waits for it"
    assert re.fullmatch(r"test set decoded in \d+\.\d s", lines[1]) and len(lines) == 2
