"""Atomic writes keep old outputs on failure; derived randomness is reproducible and independent."""

from __future__ import annotations

import json

import numpy as np
import pytest

from flamingo_sim.io import MANIFEST, atomic_dir, atomic_path, write_json
from flamingo_sim.rng import derive_seed, rng


def test_atomic_path_keeps_old_file_on_failure(tmp_path):
    target = tmp_path / "out.json"
    write_json(target, {"a": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert json.loads(target.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_atomic_dir_replaces_whole_or_nothing(tmp_path):
    out = tmp_path / "traces"
    with atomic_dir(out, "test") as stage:
        (stage / "a.txt").write_text("1")
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(out, "test") as stage:
            (stage / "b.txt").write_text("2")
            raise KeyboardInterrupt
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "a.txt"]
    with atomic_dir(out, "test") as stage:
        (stage / "c.txt").write_text("3")
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "c.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["traces"]


def test_write_json_handles_numpy(tmp_path):
    write_json(tmp_path / "x.json", {"n": np.int64(3), "v": np.arange(2)})
    assert json.loads((tmp_path / "x.json").read_text()) == {"n": 3, "v": [0, 1]}


def test_rng_streams_are_reproducible_and_purpose_specific():
    a = rng(7, "selection", 3).integers(0, 1 << 30, 5)
    assert np.array_equal(a, rng(7, "selection", 3).integers(0, 1 << 30, 5))
    assert not np.array_equal(a, rng(7, "selection", 4).integers(0, 1 << 30, 5))
    assert not np.array_equal(a, rng(7, "data", 3).integers(0, 1 << 30, 5))
    assert not np.array_equal(a, rng(8, "selection", 3).integers(0, 1 << 30, 5))
    s = derive_seed(1, "train", 2, 5)
    assert s == derive_seed(1, "train", 2, 5) and 0 <= s < 2**63
    with pytest.raises(ValueError):
        rng(-1)


def test_atomic_dir_gets_the_usual_permissions(tmp_path):
    import os
    import stat

    umask = os.umask(0o022)
    try:
        with atomic_dir(tmp_path / "out", "test") as stage:
            (stage / "a").write_text("1")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755
