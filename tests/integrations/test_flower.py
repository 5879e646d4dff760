"""Flower's runtime with flamingo-sim's round rules: the ``flower`` engine against the native one, and
FlamingoStrategy around Flower's own FedAvg in a small Flower app.

The slow tests run real Flower simulations (Ray backend); they need ``pip install
'flamingo-sim[flower]'`` and are skipped, saying so, without it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.metrics.summary import COLUMNS
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.integrations import flower as fli
from tests.cli_runs import assert_identical, cli_run

ROOT = Path(__file__).resolve().parents[2]
EXP = ROOT / "experiments/openimage_mobilenet.yaml"
TINY = ["data.proxy.n_clients=40", "fl.participants_per_round=4", "fl.rounds=3", "fl.local_steps=3", "fl.eval_every=1", "policies=[flamingo]"]
#: Columns decided by the shared round rules: must be equal, not close.
EXACT = [
    "round", "time_s", "duration_s", "n_online", "n_selected", "n_kept", "energy_j", "energy_cum_j",
    "interference_s", "clients_lost", "clients_lost_cum", "dropped_declined", "dropped_unavailable",
    "dropped_battery_exhausted", "dropped_interrupted", "dropped_too_slow", "n_exploring", "energy_exploring_j",
    "jain_participation", "jain_energy",
]
RAY = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 2}}

needs_flower = pytest.mark.skipif(not fli.flower_available(), reason=f"Flower's extra is not installed: {fli.INSTALL_HINT}")


#: Float32 units in the last place a mean training loss may differ by where the native cohort trains under vmap
#: (batched products against one client's: measured 3 under MKL's COMPATIBLE branch, the pinned kernels since
#: issue 50; 2 under its AVX-512 path before).
LOSS_ULPS = 4


@pytest.fixture(scope="module")
def engine_runs(tmp_path_factory):
    """The native engine (its default training mode, and one client at a time as Flower's client
    trains) and the Flower engine, each run as a user runs them: the command line in a subprocess."""
    out = tmp_path_factory.mktemp("flower")
    return (cli_run(out / "native", TINY), cli_run(out / "native-threads", [*TINY, "fl.train_mode=threads"]),
            cli_run(out / "flower", TINY, "--engine", "flower"), out)


@needs_flower
@pytest.mark.slow
def test_flower_engine_matches_the_native_engine(engine_runs):
    native, threads, flower, out = engine_runs
    assert list(native.columns) == list(flower.columns) and set(COLUMNS) <= set(flower.columns)
    assert len(flower) == 4 and flower["n_kept"].iloc[1:].sum() > 0  # round 0 and three rounds that trained someone
    # trained one client at a time as Flower's client trains, the native table is Flower's, bit for bit
    assert_identical(flower, threads)
    # against the native default (the cohort under vmap): every column equal but the mean training
    # loss, which is close: within LOSS_ULPS float32 units in the last place (float32 rounding)
    rest = [c for c in native.columns if c != "train_loss"]
    assert_identical(flower[rest], native[rest])
    a, b = native["train_loss"].to_numpy(), flower["train_loss"].to_numpy()
    assert np.array_equal(np.isnan(a), np.isnan(b))
    ulp = np.spacing(np.abs(a[1:]).astype(np.float32)).astype(np.float64)
    assert (np.abs(a[1:] - b[1:]) <= LOSS_ULPS * ulp).all(), (a, b)
    summaries = {name: json.loads((out / name / "summary.json").read_text()) for name in ("native", "flower")}
    assert summaries["flower"]["engine"] == "flower" and summaries["native"]["engine"] == "native"
    assert summaries["flower"]["policies"]["flamingo"]["total_energy_j"] == summaries["native"]["policies"]["flamingo"]["total_energy_j"]


def _user_app_run(out: Path, n_nodes: int, rounds: int, logs: list[str], client_app: str = "app", config: dict | None = None):
    from flwr.app import ArrayRecord, ConfigRecord
    from flwr.serverapp import ServerApp
    from flwr.serverapp.strategy import FedAvg
    from flwr.simulation import run_simulation

    from tests.integrations import flower_app

    strategy = fli.FlamingoStrategy(FedAvg(fraction_evaluate=0.0), experiment=EXP, overrides=["fl.participants_per_round=3"],
                                    policy="flamingo", out_dir=out, log=logs.append)
    results = []
    app = ServerApp()

    @app.main()
    def main(grid, context):
        results.append(strategy.start(grid, ArrayRecord(flower_app.make_model().state_dict()), num_rounds=rounds,
                                      train_config=ConfigRecord({"lr": 0.5, **(config or {})}), evaluate_fn=flower_app.central_evaluate))

    run_simulation(app, getattr(flower_app, client_app), num_supernodes=n_nodes, backend_config=RAY)
    return strategy, results[0]


@needs_flower
@pytest.mark.slow
def test_flamingo_strategy_around_flowers_fedavg_in_a_flower_app(tmp_path):
    from flamingo_sim.report import write_report
    from tests.integrations import flower_app

    logs: list[str] = []
    strategy, result = _user_app_run(tmp_path / "run", n_nodes=12, rounds=3, logs=logs)
    assert not [line for line in logs if "failed" in line], logs  # every task reached the node of its partition
    rows = pd.read_parquet(tmp_path / "run" / "metrics.parquet")
    assert list(rows["round"]) == [0, 1, 2, 3] and set(COLUMNS) <= set(rows.columns)
    assert rows["n_kept"].iloc[1:].sum() > 0 and (rows["n_kept"] <= 3).all()
    # the rounds are flamingo-sim's: the same population stepped by hand gives the same rows
    sim = strategy._build_simulation(12)
    by_hand = [sim.initial_record().to_row()]
    for _ in range(3):
        by_hand.append(sim.finish_round(sim.plan_round(), float("nan")).to_row())
    assert_identical(rows[EXACT], pd.DataFrame(by_hand)[EXACT])
    # accuracy is what Flower measured: the evaluate_fn on the final global model
    final = flower_app.central_evaluate(3, result.arrays)
    assert rows["accuracy"].iloc[-1] == pytest.approx(final["accuracy"]) and not math.isnan(rows["train_loss"].iloc[-1])
    # the run directory is flamingo-sim's: `report` reads it
    report = write_report([tmp_path / "run"])
    assert report.markdown.is_file() and all(p.is_file() for paths in report.figures.values() for p in paths)


@needs_flower
@pytest.mark.slow
def test_a_client_failing_mid_round_in_a_flower_app_is_counted_as_the_native_engine_counts_a_lost_client(tmp_path):
    """A user's ClientApp raising in round 2: one WARNING line, and the row counts that client as
    dropped (interrupted), not kept: its energy was drawn, its update never counted."""
    probe = fli.FlamingoStrategy(fli_fedavg(), experiment=EXP, overrides=["fl.participants_per_round=3"], policy="flamingo",
                                 out_dir=tmp_path / "unused", log=lambda line: None)
    planned = probe._build_simulation(12)
    planned.finish_round(planned.plan_round(), float("nan"))
    round2 = planned.plan_round()
    assert len(round2.kept) >= 2  # one fails, the others are kept
    failing = int(round2.kept[0])

    logs: list[str] = []
    strategy, _ = _user_app_run(tmp_path / "run", n_nodes=12, rounds=3, logs=logs, config={"fail-round": 2, "fail-clients": [failing]})
    warned = [line for line in logs if "failed" in line]
    assert len(warned) == 1 and warned[0].startswith(f"WARNING: Flower client {failing} (node ") and "failed in round 2" in warned[0], logs
    assert "counted as interrupted" in warned[0]
    rows = pd.read_parquet(tmp_path / "run" / "metrics.parquet")
    # stepped by hand without the failure: round 2 kept one more, interrupted one fewer; energy, time and
    # the rest as planned (the client ran its task)
    sim = strategy._build_simulation(12)
    plain = [sim.initial_record().to_row()] + [sim.finish_round(sim.plan_round(), float("nan")).to_row() for _ in range(3)]
    plain_rows = pd.DataFrame(plain)
    assert rows["n_kept"].tolist() == [v - (r == 2) for r, v in zip(plain_rows["round"], plain_rows["n_kept"])]
    assert rows["dropped_interrupted"].tolist() == [v + (r == 2) for r, v in zip(plain_rows["round"], plain_rows["dropped_interrupted"])]
    same = [c for c in EXACT if c not in ("n_kept", "dropped_interrupted", "jain_participation")]
    assert_identical(rows[same], plain_rows[same])
    np.testing.assert_array_equal(rows["jain_participation"].iloc[:2], plain_rows["jain_participation"].iloc[:2])  # exact; NaN in round 0
    assert rows["jain_participation"].iloc[2] != plain_rows["jain_participation"].iloc[2]  # one client fewer took part
    # and stepped by hand with the same loss (Simulation.lose_updates), every column of the rules is identical
    sim = strategy._build_simulation(12)
    lost = [sim.initial_record().to_row()]
    for r in (1, 2, 3):
        plan = sim.plan_round()
        lost.append(sim.finish_round(sim.lose_updates(plan, np.array([failing])) if r == 2 else plan, float("nan")).to_row())
    assert_identical(rows[EXACT], pd.DataFrame(lost)[EXACT])


def fli_fedavg():
    from flwr.serverapp.strategy import FedAvg

    return FedAvg(fraction_evaluate=0.0)


@needs_flower
@pytest.mark.slow
def test_a_plain_flower_app_runs_without_the_partition_query_line(tmp_path):
    logs: list[str] = []
    strategy, result = _user_app_run(tmp_path / "run", n_nodes=6, rounds=2, logs=logs, client_app="plain_app")
    assert any("stand for flamingo-sim's clients in node-id order" in line for line in logs), logs
    assert not [line for line in logs if "failed" in line], logs
    rows = pd.read_parquet(tmp_path / "run" / "metrics.parquet")
    assert list(rows["round"]) == [0, 1, 2] and rows["n_kept"].iloc[1:].sum() > 0
    assert list(strategy.node_of) == sorted(strategy.node_of)


@needs_flower
def test_flower_engine_refuses_what_it_cannot_run(tmp_path):
    with pytest.raises(ConfigError, match=r"^executors: 2 executor processes need engine 'fedscale', not 'flower'"):
        run_experiment(EXP, out_dir=tmp_path / "a", overrides=TINY, engine="flower", executors=2)
    with pytest.raises(ConfigError, match=r"^resume: engine 'flower' writes no checkpoints"):
        run_experiment(EXP, out_dir=tmp_path / "b", overrides=TINY, engine="flower", resume=True)
    with pytest.raises(ConfigError, match=r"fl\.mode: 'fedbuff' runs natively \(not on FedScale or Flower\)"):
        run_experiment(EXP, out_dir=tmp_path / "c", overrides=[*TINY, "fl.mode=fedbuff"], engine="flower")
    assert not any((tmp_path / d).exists() for d in "abc")


@needs_flower
def test_flamingo_strategy_checks_its_arguments_before_any_work(tmp_path):
    from flwr.serverapp.strategy import FedAvg

    with pytest.raises(TypeError, match="wraps a flwr.serverapp.strategy.Strategy, got dict"):
        fli.FlamingoStrategy({}, experiment=EXP)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="policies: unknown policy 'nope'; expected one of 'baseline'"):
        fli.FlamingoStrategy(FedAvg(fraction_evaluate=0.0), experiment=EXP, policy="nope")
    with pytest.raises(ConfigError, match=r"fl\.mode: 'fedbuff' is not offered under Flower"):
        fli.FlamingoStrategy(FedAvg(fraction_evaluate=0.0), experiment=EXP, overrides=["fl.mode=fedbuff"])
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="run directory exists and is not empty"):
        fli.FlamingoStrategy(FedAvg(fraction_evaluate=0.0), experiment=EXP, out_dir=tmp_path / "used")
    assert (tmp_path / "used" / "notes.txt").read_text() == "mine"
    strategy = fli.FlamingoStrategy(FedAvg(fraction_evaluate=0.0), experiment=EXP)
    with pytest.raises(FlamingoError, match=r"run it with strategy.start\(grid, ...\)"):
        strategy._ensure_ready()


@needs_flower
def test_federated_evaluation_is_refused_in_one_line_before_any_work(tmp_path):
    from flwr.serverapp.strategy import FedAvg

    with pytest.raises(ConfigError, match=r"^FlamingoStrategy: FedAvg\(fraction_evaluate=0.2\): federated evaluation is not offered: "
                                          r"flamingo-sim prices training on the phones .* give start\(\) an evaluate_fn"):
        fli.FlamingoStrategy(FedAvg(fraction_evaluate=0.2), experiment=EXP, out_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()

    class AsksAnyway(FedAvg):  # no fraction_evaluate to read up front: refused when it asks
        def configure_evaluate(self, server_round, arrays, config, grid):
            return ["a message"]

    strategy = fli.FlamingoStrategy(AsksAnyway(fraction_evaluate=0.0), experiment=EXP)
    with pytest.raises(FlamingoError, match=r"AsksAnyway asked 1 nodes to evaluate in round 2: federated evaluation is not offered"):
        strategy.configure_evaluate(2, None, None, None)  # type: ignore[arg-type]


class _Grid:
    """Nodes whose ClientApp answers the partition query with ``answer(node)`` (None: Flower's reply for an app without it)."""

    def __init__(self, nodes, answer):
        self.nodes, self.answer = nodes, answer

    def get_node_ids(self):
        return list(self.nodes)

    def send_and_receive(self, messages, timeout=None):
        from flwr.app import ConfigRecord, Error, Message, RecordDict

        out = []
        for m in messages:
            pid = self.answer(m.metadata.dst_node_id)
            if pid is None:
                reply = Message(Error(code=3, reason=f"<class 'ClientAppException'>:<'{fli.strategy.NO_QUERY}'>"), reply_to=m)
            else:
                reply = Message(RecordDict({"flamingo": ConfigRecord({"partition-id": pid})}), reply_to=m)
            reply.metadata.__dict__["_src_node_id"] = m.metadata.dst_node_id
            out.append(reply)
        return out


@needs_flower
@pytest.mark.slow
def test_a_clientapp_without_the_partition_query_needs_no_extra_line(monkeypatch):
    from flwr.serverapp.strategy import FedAvg
    from flwr.supercore.task_identity import TaskIdentity

    for key in ("_run_id", "_node_id", "_task_id"):  # what a Flower run sets before messages are made
        monkeypatch.setattr(TaskIdentity, key, 1)
    nodes = [905, 17, 4242, 3]
    logs: list[str] = []
    strategy = fli.FlamingoStrategy(FedAvg(fraction_evaluate=0.0), experiment=EXP, overrides=["fl.participants_per_round=3"], num_nodes=4,
                                    log=logs.append)
    strategy._grid, strategy._timeout = _Grid(nodes, lambda node: None), 5.0
    strategy._ensure_ready()
    assert list(strategy.node_of) == [3, 17, 905, 4242]  # no answer: node-id order
    assert any("does not say its nodes' partition-id" in line and "register_partition_query(app) or partitions=" in line for line in logs)
    # an app that answers is mapped by its partition ids
    answered = fli.FlamingoStrategy(FedAvg(fraction_evaluate=0.0), experiment=EXP, overrides=["fl.participants_per_round=3"], num_nodes=4,
                                    log=logs.append)
    answered._grid, answered._timeout = _Grid(nodes, lambda node: nodes.index(node)), 5.0
    answered._ensure_ready()
    assert list(answered.node_of) == nodes
    # a mix (some answer, some fail) is an error, not a guess
    mixed = fli.FlamingoStrategy(FedAvg(fraction_evaluate=0.0), experiment=EXP, num_nodes=4, log=logs.append)
    mixed._grid, mixed._timeout = _Grid(nodes, lambda node: 0 if node == 905 else None), 5.0
    with pytest.raises(FlamingoError, match="did not say its partition-id"):
        mixed._ensure_ready()


def test_missing_flower_names_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setitem(fli.REQUIRED, "no_such_module_xyz", "flwr[simulation]")
    with pytest.raises(fli.FlowerUnavailable, match=r"^the Flower engine needs flwr\[simulation\], which is not installed: "
                                                  r"pip install 'flamingo-sim\[flower\]'$"):
        fli.load_flower()
    assert not fli.flower_available()
    with pytest.raises(FlamingoError, match=r"pip install 'flamingo-sim\[flower\]'"):
        run_experiment(EXP, out_dir=tmp_path / "run", overrides=TINY, engine="flower")
    assert not (tmp_path / "run").exists()


@needs_flower
@pytest.mark.slow
def test_benchmark_smoke_runs_both_engines_alike():
    import importlib.util

    spec = importlib.util.spec_from_file_location("flower_vs_native", ROOT / "benchmarks/flower_vs_native.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = bench.main(["--smoke", "--cpus", "1"])
    assert out["same_clock_energy_kept"] and out["max_abs_accuracy_diff"] == 0.0  # docs/flower.md: accuracy difference 0.0
    assert len(out["flower_s_per_round"]) == 1 and out["flower_s_per_round"][0] > 0 and out["flower_timings"][0]["ray_init_s"] > 0


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _tree(pid: int) -> set[int]:
    """``pid`` and every live process below it (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        found.add(p)
        todo += children.get(p, [])
    return found


@needs_flower
@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to find Ray's processes")
def test_sigterm_on_the_cli_ends_the_run_and_every_ray_process(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "flamingo_sim", "run", str(EXP), "--engine", "flower", "--out", str(out),
           *[a for s in [*TINY, "fl.rounds=100000", "checkpoint_every=1"] for a in ("--set", s)]]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 180
        while not (out / "metrics.parquet").exists():  # written after round 1 (checkpoint_every=1)
            assert proc.poll() is None and time.monotonic() < deadline, "the run did not get to round 1"
            time.sleep(0.5)
        ray = _tree(proc.pid) - {proc.pid}
        assert ray, "no Ray processes below the run"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err[-2000:]
    assert err.strip().splitlines()[-1] == ("flamingo-sim run: interrupted (SIGTERM); this run keeps no checkpoints (Flower): "
                                            "start it again with another --out")
    until = time.monotonic() + 10
    while any(_alive(p) for p in ray) and time.monotonic() < until:
        time.sleep(0.2)
    assert not [p for p in ray if _alive(p)], "Ray processes outlived the run"
