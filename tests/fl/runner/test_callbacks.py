"""The run loop's callbacks and engines: hook order, early stop, the registry, and run_experiment."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from flamingo_sim.devices.policies import DECLINE_REASONS
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.compose import build_components
from flamingo_sim.fl.config import load_experiment
from flamingo_sim.fl.metrics.summary import COLUMNS
from flamingo_sim.fl.plugins import experiment_policy
from flamingo_sim.fl.runner.callbacks import Callback, CallbackList
from flamingo_sim.fl.runner.engines import ENGINES, EngineOptions, NativeEngine, make_engine, register_engine
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.fl.strategy.selection import UniformSelector, make_selector
from tests.cli_runs import assert_identical
from tests.fl.runner.test_run import SMALL, quiet  # noqa: F401  (quiet: autouse, no progress bars)
from tests.fl.sim.test_simulation import scripted_parts

ROOT = Path(__file__).resolve().parents[3]
EXP = ROOT / "experiments/openimage_mobilenet.yaml"


class Recorder(Callback):
    """Logs every hook it sees; asks to stop after round ``stop_at`` (if given)."""

    def __init__(self, log: list, name: str = "", stop_at: int | None = None) -> None:
        self.log, self.name, self.stop_at = log, name, stop_at

    def on_run_begin(self, sim, records):
        self.log.append((self.name, "run_begin", sim.policy_name, sim.seed, sim.round, len(records)))

    def on_round_begin(self, sim):
        self.log.append((self.name, "round_begin", sim.round))

    def on_round_end(self, sim, record):
        self.log.append((self.name, "round_end", record.round))
        return self.stop_at is not None and record.round >= self.stop_at

    def on_run_end(self, sim, records):
        self.log.append((self.name, "run_end", [r.round for r in records]))


def _sim(parts):
    return Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())


def test_hooks_are_called_in_order_once_each():
    parts = scripted_parts(rounds=2)
    log: list = []
    records = NativeEngine(EngineOptions()).run(_sim(parts), CallbackList([Recorder(log, "a"), Recorder(log, "b")]), [], Path("unused"))
    assert [r.round for r in records] == [1, 2]
    assert log == [
        ("a", "run_begin", "baseline", 0, 0, 0), ("b", "run_begin", "baseline", 0, 0, 0),
        ("a", "round_begin", 0), ("b", "round_begin", 0), ("a", "round_end", 1), ("b", "round_end", 1),
        ("a", "round_begin", 1), ("b", "round_begin", 1), ("a", "round_end", 2), ("b", "round_end", 2),
        ("a", "run_end", [1, 2]), ("b", "run_end", [1, 2]),
    ]


def test_a_callback_stops_the_run_and_every_callback_still_sees_the_round():
    parts = scripted_parts(rounds=5)
    log: list = []
    sim = _sim(parts)
    records = NativeEngine(EngineOptions()).run(sim, CallbackList([Recorder(log, "stop", stop_at=1), Recorder(log, "next")]), [], Path("unused"))
    assert [r.round for r in records] == [1] and sim.round == 1 and not sim.is_done()
    assert ("next", "round_end", 1) in log and ("next", "run_end", [1]) in log
    assert sum(1 for e in log if e[1] == "round_begin") == 2  # one per callback, one round


def test_not_a_callback_is_a_type_error():
    with pytest.raises(TypeError, match="is not a callback"):
        CallbackList([object()])


def test_engine_registry():
    with pytest.raises(ConfigError, match=r"^engine: unknown engine 'spark'; expected one of 'native', 'fedscale', 'flower' \(built-in or installed "
                                          r"in entry-point group 'flamingo_sim.engines'\) or an import path 'package.module:ClassName'$"):
        make_engine("spark")
    assert isinstance(make_engine("native"), NativeEngine)

    class Counting(NativeEngine):
        made = 0

        def __init__(self, options):
            super().__init__(options)
            Counting.made += 1

    register_engine("counting", Counting)
    try:
        assert isinstance(make_engine("counting"), Counting) and Counting.made == 1
    finally:
        del ENGINES.builtin["counting"]


def test_run_experiment_calls_user_callbacks_and_stops_early(tmp_path):
    log: list = []
    out = tmp_path / "run"
    result = run_experiment(EXP, out_dir=out, overrides=SMALL, log=lambda _m: None, callbacks=[Recorder(log, stop_at=2)])
    # every (policy, seed) stops after round 2 of 4
    assert result.metrics.groupby("policy")["round"].max().to_dict() == {"baseline": 2, "flamingo": 2}
    assert [e[2] for e in log if e[1] == "run_begin"] == ["baseline", "flamingo"]
    assert [e[2] for e in log if e[1] == "run_end"] == [[0, 1, 2], [0, 1, 2]]  # round 0: the initial model
    assert_identical(pd.read_parquet(out / "metrics.parquet"), result.metrics)
    # the checkpoint holds what the stopped run did (written by the checkpoint callback at run end)
    from flamingo_sim.fl.runner.checkpoint import load_checkpoint

    state = load_checkpoint(out / "checkpoints" / "flamingo-seed0.pt", log=print)
    assert state["simulation"]["round"] == 2 and [r["round"] for r in state["rows"]] == [0, 1, 2]


def test_run_loop_writes_the_table_of_the_plain_round_loop(tmp_path):
    # the callbacks (progress, metrics writer, checkpoints) change nothing in what a run records:
    # the table equals stepping each simulation by hand, columns in their documented order
    result = run_experiment(EXP, out_dir=tmp_path / "run", overrides=SMALL, log=lambda _m: None)
    cfg = load_experiment(EXP, SMALL)
    parts = build_components(cfg, EXP, cfg.seeds[0], log=lambda _m: None)
    rows = []
    for name in cfg.policies:
        sim = Simulation(parts, experiment_policy(cfg, None, name), name, cfg.seeds[0], make_selector(cfg.fl.selection))
        rows.append(sim.initial_record().to_row())  # round 0: the initial model at t = 0
        while not sim.is_done():
            rows.append(sim.step().to_row())
    assert_identical(result.metrics, pd.DataFrame(rows))
    labels, phones = parts.choice_labels, parts.population.phone_names
    limits = [*(c for c in ("dropped_out_of_memory",) if cfg.devices.memory != "none"),
              *(c for p in phones for c in (f"out_of_memory_{p}", f"batch_shrunk_{p}") if cfg.devices.memory != "none"),
              *(c for p in phones for c in (f"throttled_{p}", f"throttled_s_{p}") if cfg.devices.thermal != "none")]
    head = list(COLUMNS)
    at = head.index("dropped_too_slow") + 1  # each decline reason's count after the drops (issue 42)
    head[at:at] = [f"declined_{r}" for r in DECLINE_REASONS]
    assert list(result.metrics.columns) == [*head, *(f"steps_{c}" for c in labels), *(f"interference_s_{p}" for p in phones),
                                            *(f"foreground_s_{p}" for p in phones), *(f"training_foreground_s_{p}" for p in phones),
                                            *(f"foreground_lost_s_{p}" for p in phones), *limits]
