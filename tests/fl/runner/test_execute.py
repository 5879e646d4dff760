"""The executors' pieces that need no run: ``--jobs``, thread budgets, the pool's choice of unit, the
registry (built-in names, import paths, entry points), progress and ETA, error lines."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.cli import _jobs
from flamingo_sim.fl.runner.execute import Progress, auto_jobs, unit_threads
from flamingo_sim.fl.runner.executors import Dispatch, Executor, make_executor
from flamingo_sim.fl.runner.executors import progress as progress_module
from flamingo_sim.fl.runner.executors.local import LocalExecutor
from flamingo_sim.fl.runner.executors.pool import _order, error_of, pick
from flamingo_sim.fl.runner.unit_files import Unit, unit_result
from flamingo_sim.fl.runner.units import InProcess


def _unit(tmp_path: Path, run: str = "r", policy: str = "flamingo", seed: int = 0, cost: float = 1.0) -> Unit:
    return Unit("exp.yaml", (), None, str(tmp_path / run), policy, seed, f"{run} {policy} seed {seed}", cost=cost)


def _cfg(threads=None, root=None):
    return SimpleNamespace(fl=SimpleNamespace(threads=threads), data=SimpleNamespace(root=root))


def test_jobs_argument():
    assert _jobs("3") == 3 and _jobs("auto") is None
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"expected a count >= 1 or auto"):
            _jobs(bad)


def test_thread_budget_and_auto_jobs(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("flamingo_sim.fl.training.device.usable_cores", lambda: 16)
    assert unit_threads(_cfg(threads=4), jobs=8) == 4  # fl.threads wins
    assert unit_threads(_cfg(), jobs=8) == 1  # the proxy task: one thread
    assert unit_threads(_cfg(root="/data"), jobs=4) == 4  # real data: the cores shared out
    assert auto_jobs([_cfg(), _cfg(threads=3)]) == 5  # 16 cores // the largest run's 3 threads
    assert auto_jobs([_cfg(root="/data")]) == 1  # a real-data run takes every core by default
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert unit_threads(_cfg(root="/data"), jobs=4) == 2 and auto_jobs([_cfg()]) == 8


def test_the_pool_starts_the_costliest_seed_first_and_keeps_a_workers_seed(tmp_path):
    units = [_unit(tmp_path, run, policy, seed, cost={"a": 1.0, "b": 3.0, "c": 2.0}[run])
             for run in "abc" for seed in (0, 1) for policy in ("baseline", "flamingo")]
    queue = _order(units)  # a seed's policies together, the costliest run first, else the config's order
    assert [(Path(u.run_dir).name, u.seed, u.policy) for u in queue[:4]] == [
        ("b", 0, "baseline"), ("b", 0, "flamingo"), ("b", 1, "baseline"), ("b", 1, "flamingo")]
    b0, b1 = (str(tmp_path / "b"), 0), (str(tmp_path / "b"), 1)
    assert pick(queue, [], set()) == 0  # a fresh worker: the first unit
    assert pick(queue, [], {b0}) == 2  # not the seed another worker is building: the next seed
    assert pick(queue, [b1], {b0}) == 2  # a seed it holds first (its components are cached)
    assert pick(queue, [(str(tmp_path / "c"), 1), b1], {b0}) == 2  # it holds two: the first in the queue's order
    assert pick(queue[4:], [b1], {b0}) == 0  # its seed is done: the first of a seed nobody holds
    assert pick(queue[:2], [], {b0}) == 0  # only the busy seed is left: take it


class Recorder(Executor):
    """A plug-in executor: runs every unit in this process and records their names."""

    name = "recorder"
    ran: list[str] = []

    def run(self, pending, dispatch):
        for unit in pending:
            dispatch.progress.start(unit)
            self.ran.append(unit.name)
            dispatch.progress.finish(unit)


def test_executors_by_name_import_path_and_entry_point(tmp_path, monkeypatch):
    assert isinstance(make_executor("local"), LocalExecutor)
    plug = make_executor(f"{__name__}:Recorder")
    said: list[str] = []
    units = [_unit(tmp_path, policy=p) for p in ("baseline", "flamingo")]
    plug.run(units, Dispatch(1, Progress(2, 0, 1, said.append), InProcess(said.append)))
    assert Recorder.ran == ["baseline-seed0", "flamingo-seed0"] and said[-1].startswith("r flamingo seed 0: done (units: 2/2 done")
    assert plug.describe(units, 2) == "2 units, 2 at a time (workers, 1 CPU thread(s) each)"  # the contract's default
    # an installed package's entry point (flamingo_sim.executors), found through its metadata
    dist = tmp_path / "site" / "recorder_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: recorder-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[flamingo_sim.executors]\nrecorder = {__name__}:Recorder\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert isinstance(make_executor("recorder"), Recorder)
    with pytest.raises(ConfigError) as err:
        make_executor("slurm")
    assert str(err.value) == ("--executor: unknown executor 'slurm'; expected one of 'local', 'ray', 'recorder' (built-in or installed in "
                              "entry-point group 'flamingo_sim.executors') or an import path 'package.module:ClassName'")
    with pytest.raises(ConfigError) as err:
        make_executor("collections:OrderedDict")
    assert str(err.value) == ("--executor: executor 'collections:OrderedDict' lacks run, which the contract flamingo_sim.fl.runner.executors.base.Executor "
                              "requires (an executor needs run; check, warm_up, validate, close, describe are optional)")


class Bare:
    """A plug-in executor that is no subclass: it gets the contract's defaults for the optional parts."""

    def run(self, pending, dispatch):
        return None


def test_an_executor_without_the_optional_parts_gets_their_defaults(tmp_path):
    bare = make_executor(f"{__name__}:Bare")
    assert bare.validate([], 2) is None and bare.warm_up(2) is None and bare.close() is None
    assert bare.describe([_unit(tmp_path)], 2) == "1 units, 2 at a time (workers, 1 CPU thread(s) each)"


def test_progress_eta_from_the_finished_units(tmp_path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: clock[0])
    said: list[str] = []
    units = [_unit(tmp_path, policy=f"p{i}") for i in range(4)]
    progress = Progress(total=5, done=1, jobs=2, say=said.append)  # one unit was already done
    assert progress.eta_s() is None
    progress.start(units[0])
    progress.start(units[1])
    clock[0] = 110.0
    progress.finish(units[0])  # 10 s
    progress.start(units[2])
    clock[0] = 130.0
    progress.finish(units[1])  # 30 s: mean 20 s
    units[2].path(".status").parent.mkdir(parents=True)
    units[2].path(".status").write_text(json.dumps({"round": 5, "rounds": 20, "pid": 1}))  # a quarter done
    # left: one queued (20 s) + three quarters of the running one (15 s), over min(2 jobs, 2 units)
    assert progress.eta_s() == pytest.approx((20 + 15) / 2)
    assert progress.summary() == "units: 3/5 done, 1 running, 0 failed, about 0:18 left"
    progress.fail(units[2], "killed by SIGKILL")
    assert said[-1] == f"r p2 seed 0 failed: killed by SIGKILL (run directory {tmp_path / 'r'}, log {tmp_path / 'r' / 'units' / 'p2-seed0.log'})"
    # the second unit of five (one was done before); at its end: two queued (2 x 10 s) and one running (10 s), over 2 jobs
    assert said[0] == "[2/5] r p0 seed 0: started" and said[2] == "r p0 seed 0: done (units: 2/5 done, 1 running, 0 failed, about 0:15 left)"


def test_a_workers_error_line_or_its_signal(tmp_path):
    unit = _unit(tmp_path)
    unit.path(".log").parent.mkdir(parents=True)
    unit.path(".log").write_text("data: ...\nerror: exp.yaml: traces.path: trace set '/x' not found\n")
    assert error_of(unit, 2) == "exp.yaml: traces.path: trace set '/x' not found"
    unit.path(".log").write_text("training...\n")
    assert error_of(unit, -9) == "killed by SIGKILL before it started"
    unit.path(".status").write_text(json.dumps({"round": 3, "rounds": 6, "pid": os.getpid()}))
    assert error_of(unit, -9) == "killed by SIGKILL"
    assert error_of(unit, 1) == "exited with code 1: training..."
    assert error_of(unit, 0) == "ended without writing its result"


def test_a_unit_result_is_checked_before_it_is_trusted(tmp_path):
    units = tmp_path / "units"
    units.mkdir()
    good = {"format": 1, "policy": "flamingo", "seed": 0, "done": True, "rows": [{"round": 0}]}
    (units / "flamingo-seed0.json").write_text(json.dumps(good))
    assert unit_result(units, "flamingo", 0) == good
    assert unit_result(units, "flamingo", 1) is None  # absent
    for bad in ({**good, "done": False}, {**good, "seed": 1}, {**good, "format": 2}, {**good, "rows": [1]}):
        (units / "flamingo-seed0.json").write_text(json.dumps(bad))
        assert unit_result(units, "flamingo", 0) is None
    (units / "flamingo-seed0.json").write_text('{"format": 1, "pol')  # cut short
    assert unit_result(units, "flamingo", 0) is None


def test_the_pools_preloaded_modules_exist():
    """multiprocessing's forkserver skips a preload module it cannot import: a renamed module would
    silently make every worker import it itself."""
    import importlib

    from flamingo_sim.fl.runner.worker import PRELOAD

    for name in PRELOAD:
        importlib.import_module(name)
