"""A unit's saves written behind its rounds (issue 52): in order, one in flight, each a snapshot of its round, and an
error raised in the run's thread (flamingo_sim.io.WriteBehind, flamingo_sim.fl.runner.units.UnitSaver)."""

from __future__ import annotations

import errno
import threading
import time
from pathlib import Path

import pytest

from flamingo_sim.fl.runner import units
from flamingo_sim.fl.runner.checkpoint import load_checkpoint
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.runner.unit_files import unit_result
from flamingo_sim.io import WriteBehind

ROOT = Path(__file__).resolve().parents[3]
EXP = ROOT / "experiments" / "openimage_mobilenet.yaml"
TINY = ["fl.rounds=6", "checkpoint_every=2", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=2",
        "data.proxy.n_clients=100", "policies=[baseline]", "seeds=[0]"]


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")


def test_writes_land_in_order_one_at_a_time_and_the_caller_goes_on_meanwhile():
    behind, events = WriteBehind(), []
    release = threading.Event()

    def slow() -> None:
        release.wait(5)
        events.append("first")

    behind.submit(slow)
    assert behind.busy and events == []  # submit returned while the write waits: the caller is not held
    events.append("caller")
    release.set()
    behind.submit(lambda: events.append("second"))  # waits for the first before it starts
    behind.wait()
    assert events == ["caller", "first", "second"] and not behind.busy


def test_an_error_in_a_write_is_raised_in_the_callers_thread_once_and_stops_the_next_write():
    behind, ran = WriteBehind(), []

    def full() -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "/run/units/x.json")

    behind.submit(full)
    with pytest.raises(OSError) as info:
        behind.submit(lambda: ran.append("next"))
    assert info.value.errno == errno.ENOSPC and info.value.filename == "/run/units/x.json"
    assert ran == []  # the next write did not start after a failed one
    behind.wait()  # raised once: nothing left to raise
    behind.submit(full)
    behind.wait(quiet=True)  # a caller already failing drops it
    behind.wait()


def test_the_writer_thread_is_not_a_daemon_so_an_exiting_interpreter_finishes_the_write():
    behind = WriteBehind("probe")
    seen: list[bool] = []
    behind.submit(lambda: seen.append(threading.current_thread().daemon))
    behind.wait()
    assert seen == [False]


def test_each_save_holds_the_round_it_was_made_at_though_the_run_moved_on_while_it_was_written(tmp_path, monkeypatch):
    """The checkpoint and the result file of round 2 are written while rounds 3 and 4 run (the write held until round 4
    has ended): they hold round 2, not what the simulation became; the run ends as an unheld run does."""
    held = threading.Event()
    real = units.write_checkpoint
    rounds_when_written: list[int] = []
    progress = {"round": 0}

    def slow_write(path, data):  # type: ignore[no-untyped-def]
        if not held.is_set():  # the first save only: held until the run is two rounds further
            deadline = time.monotonic() + 10
            while progress["round"] < 4 and time.monotonic() < deadline:
                time.sleep(0.005)
            held.set()
            rounds_when_written.append(progress["round"])
            real(path, data)
            state = load_checkpoint(path, lambda m: None)
            assert state is not None
            rounds_when_written.append(int(state["simulation"]["round"]))
            return
        real(path, data)

    real_end = units.UnitSaver.on_round_end

    def on_round_end(self, sim, record):  # type: ignore[no-untyped-def]
        progress["round"] = sim.round
        return real_end(self, sim, record)

    monkeypatch.setattr(units, "write_checkpoint", slow_write)
    monkeypatch.setattr(units.UnitSaver, "on_round_end", on_round_end)
    held_run = run_experiment(EXP, out_dir=tmp_path / "held", overrides=TINY, log=lambda m: None)
    monkeypatch.undo()
    plain = run_experiment(EXP, out_dir=tmp_path / "plain", overrides=TINY, log=lambda m: None)
    assert rounds_when_written == [4, 2]  # written when round 4 had ended, holding round 2
    assert held_run.summary == plain.summary
    assert held_run.metrics.equals(plain.metrics)
    for name in ("held", "plain"):
        res = unit_result(tmp_path / name / "units", "baseline", 0)
        assert res is not None and res["done"] and [r["round"] for r in res["rows"]] == list(range(7))
    assert (tmp_path / "held" / "metrics.parquet").read_bytes() == (tmp_path / "plain" / "metrics.parquet").read_bytes()
    assert (tmp_path / "held" / "checkpoints" / "baseline-seed0.pt").read_bytes() == \
        (tmp_path / "plain" / "checkpoints" / "baseline-seed0.pt").read_bytes()
