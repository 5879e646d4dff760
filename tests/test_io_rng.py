"""Atomic writes keep old outputs on failure; derived randomness is reproducible and independent."""

from __future__ import annotations

import json

import numpy as np
import pytest

from flamingo_sim.io import MANIFEST, atomic_dir, atomic_path, json_item_text, write_json, write_json_with_items
from flamingo_sim.rng import derive_seed, rng, rngs


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


@pytest.mark.parametrize("n_rows", [0, 1, 3])
def test_write_json_with_items_writes_write_json_bytes(tmp_path, n_rows):
    """A list given as its items' kept texts is written byte for byte as write_json writes the whole object: nested
    values, NaN and infinities, numpy scalars, strings with line breaks and quotes, the list's place among the keys."""
    rows = [{"round": i, "accuracy": float("nan") if i % 2 else 0.5, "energy_j": np.float64(1e300) * 10 ** i, "n": np.int64(i),
             "phone": 'pixel "3"\nline', "by_phone": {"a": [1.5, None], "b": {}}, "empty": []} for i in range(n_rows)]
    body = {"format": 1, "done": False, "rows": rows, "histogram": None, "about": {"data": "x\ty", "sizes": [3, 4]}}
    write_json(tmp_path / "whole.json", body)
    write_json_with_items(tmp_path / "items.json", body, "rows", [json_item_text(r) for r in rows])
    assert (tmp_path / "items.json").read_bytes() == (tmp_path / "whole.json").read_bytes()
    body["about"]["data"] = "\x00rows\x00"  # a value that holds the slot's text: written right all the same
    write_json(tmp_path / "whole.json", body)
    write_json_with_items(tmp_path / "items.json", body, "rows", [json_item_text(r) for r in rows])
    assert (tmp_path / "items.json").read_bytes() == (tmp_path / "whole.json").read_bytes()


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


@pytest.mark.parametrize("seed, parts", [(0, ("local-shuffle", 61)), (7, ()), (2**32, ("synthetic", "client")), (2**64 + 3, (0, "x", 2**40))])
def test_rngs_are_rng_of_each_key_seeded_at_once(seed, parts):
    """Issue 52: a cohort's streams seeded in one vectorised pass are :func:`rng`'s, bit for bit, whatever the keys'
    widths (ids of one and of two 32-bit words, 0, the largest 64-bit id, mixed in one call)."""
    ids = [0, 1, 5, 2**32 - 1, 2**32, 2**63, 2**64 - 1, *np.random.default_rng(3).integers(0, 2**40, 50).tolist()]
    got = rngs(seed, *parts, last=ids)
    assert len(got) == len(ids)
    for cid, gen in zip(ids, got):
        want = rng(seed, *parts, cid)
        assert gen.bit_generator.state == want.bit_generator.state, cid
        assert np.array_equal(gen.permutation(40), want.permutation(40)) and gen.random() == want.random()
    assert rngs(seed, *parts, last=[]) == []
    with pytest.raises(ValueError):
        rngs(seed, *parts, last=[-1])
    # a cohort's ids, each one 32-bit word (the entropy made as one array), as a list and as a numpy array
    cohort = [0, 2**32 - 1, *np.random.default_rng(4).integers(0, 2400, 30).tolist()]
    for keys in (cohort, np.asarray(cohort, dtype=np.int64), np.asarray(cohort, dtype=np.uint32)):
        states = [g.bit_generator.state for g in rngs(seed, *parts, last=keys)]
        assert states == [rng(seed, *parts, cid).bit_generator.state for cid in cohort]
    # keys no array holds as integers (text, wider than 64 bits) are split one by one, beside ids in the same call
    mixed = [3, "x", 2**70 + 5, 2**33, True]
    assert [g.bit_generator.state for g in rngs(seed, *parts, last=mixed)] == [rng(seed, *parts, k).bit_generator.state for k in mixed]


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


# --- progress ----------------------------------------------------------------------------------


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, []

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> int:
        self.text.append(s)
        return len(s)

    def flush(self) -> None:
        pass


def test_progress_off_a_terminal_prints_a_line_per_tenth(monkeypatch):
    from flamingo_sim.io import LineProgress, progress

    monkeypatch.delenv("FLAMINGO_SIM_QUIET", raising=False)
    stream = _Stream(tty=False)
    bar = progress(range(20), desc="baseline seed 0", total=20, unit="round", stream=stream)
    assert isinstance(bar, LineProgress)
    for i in range(20):
        bar.set_postfix_str(f"acc={i}")
        bar.update(1)
    bar.close()
    lines = "".join(stream.text).splitlines()
    assert len(lines) == 10  # rounds 2, 4, ..., 20: one line per tenth, no carriage returns
    assert lines[0] == "baseline seed 0: 2/20 round (10 %) acc=1"
    assert lines[-1] == "baseline seed 0: 20/20 round (100 %) acc=19"
    assert "\r" not in "".join(stream.text)


def test_a_progress_line_says_the_time_left_at_the_pace_so_far(monkeypatch):
    """Issue 44: ``fl.rounds=1e9`` showed ``951/1000000000 round (0 %)`` and no time estimate."""
    from flamingo_sim.io import LineProgress

    now = [100.0]
    stream = _Stream(tty=False)
    bar = LineProgress(None, desc="baseline seed 0", total=1_000_000_000, unit="round", stream=stream, initial=0)
    bar._clock = lambda: now[0]
    bar._start_at = bar._printed_at = now[0]
    now[0] += 951 * 0.1  # 951 rounds at 0.1 s each
    bar.update(951)  # 30 s since the last line: a line
    assert "".join(stream.text).splitlines() == ["baseline seed 0: 951/1000000000 round (0 %, about 27777:45:05 left)"]  # (1e9 - 951) x 0.1 s


def test_progress_line_at_close_and_iteration(monkeypatch):
    from flamingo_sim.io import progress

    monkeypatch.delenv("FLAMINGO_SIM_QUIET", raising=False)
    stream = _Stream(tty=False)
    assert list(progress(iter("abc"), desc="chunks", unit="chunk", stream=stream)) == ["a", "b", "c"]
    assert "".join(stream.text) == "chunks: 3 chunk\n"  # no total: one line at the end (or every 30 s)


def test_progress_on_a_terminal_is_a_bar(monkeypatch):
    from tqdm import tqdm

    from flamingo_sim.io import progress

    monkeypatch.delenv("FLAMINGO_SIM_QUIET", raising=False)
    bar = progress(range(3), desc="x", total=3, stream=_Stream(tty=True))
    assert isinstance(bar, tqdm)
    bar.close()
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    quiet = _Stream(tty=False)
    assert list(progress(range(3), desc="x", total=3, stream=quiet)) == [0, 1, 2]
    assert all(s.strip() == "" for s in quiet.text)


def test_clean_stale_keeps_a_live_writers_temporaries_but_mine_removes_this_process_own(tmp_path):
    import os

    from flamingo_sim.io import clean_stale

    own = tmp_path / "sub" / f".metrics.parquet.{os.getpid()}.abc123.tmp"
    own.parent.mkdir()
    own.write_bytes(b"half")
    dead = tmp_path / ".summary.json.999999999.xyz.tmp"  # no such process
    dead.write_bytes(b"half")
    assert clean_stale(tmp_path, recursive=True) == [dead]
    assert own.exists()  # this process is alive: its write may be in flight
    assert clean_stale(tmp_path, recursive=True, mine=True) == [own]
    assert not own.exists()
