"""The FedScale engine against the native one: same round rules, FedScale's runtime really training.

Needs FedScale's runtime (``pip install 'flamingo-sim[fedscale]'``); skipped, saying so, without it.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.compose import build_components
from flamingo_sim.fl.config import load_experiment
from flamingo_sim.fl.metrics.summary import COLUMNS
from flamingo_sim.fl.plugins import experiment_policy
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.fl.strategy.selection import UniformSelector, make_selector
from flamingo_sim.integrations import fedscale as fsi
from tests.fl.sim.test_simulation import COMM_S, LAT_S, STEPS, scripted_parts

ROOT = Path(__file__).resolve().parents[2]
EXP = ROOT / "experiments/openimage_mobilenet.yaml"
SMALL = ["data.proxy.n_clients=600", "fl.participants_per_round=6", "fl.rounds=3", "fl.local_steps=4", "fl.eval_every=1"]
#: Columns decided by the shared round rules: must be equal, not close.
EXACT = [
    "round", "time_s", "duration_s", "n_online", "n_selected", "n_kept", "energy_j", "energy_cum_j",
    "interference_s", "clients_lost", "clients_lost_cum", "dropped_declined", "dropped_unavailable",
    "dropped_battery_exhausted", "dropped_interrupted", "dropped_too_slow",
]

needs_fedscale = pytest.mark.skipif(
    not fsi.fedscale_available(), reason=f"FedScale's extra is not installed: {fsi.INSTALL_HINT}"
)


@pytest.fixture(scope="module")
def small():
    cfg = load_experiment(EXP, SMALL)
    return cfg, build_components(cfg, EXP, 0, log=lambda _m: None)


def _sim(parts, policy="flamingo", seed=0):
    return Simulation(parts, experiment_policy(parts.cfg, None, policy), policy, seed, make_selector(parts.cfg.fl.selection))


def _native(parts, policy="flamingo"):
    sim = _sim(parts, policy)
    rows = []
    while not sim.is_done():
        rows.append(sim.step().to_row())
    return rows, sim


def _rows(records):
    return [r.to_row() for r in records]


def _assert_same_rounds(native, other, acc_tol=1e-4):
    assert len(native) == len(other)
    for a, b in zip(native, other):
        assert {k: a[k] for k in EXACT} == {k: b[k] for k in EXACT}
        assert set(a) == set(b)
        for col in ("accuracy", "loss", "train_loss"):
            assert (math.isnan(a[col]) and math.isnan(b[col])) or a[col] == pytest.approx(b[col], abs=acc_tol), (col, a["round"])


@needs_fedscale
@pytest.mark.slow
@pytest.mark.parametrize("policy", ["baseline", "flamingo"])
def test_in_process_matches_the_native_engine(small, policy, tmp_path):
    _, parts = small
    native, native_sim = _native(parts, policy)
    sim = _sim(parts, policy)
    rows = _rows(fsi.run_fedscale(sim, work_dir=tmp_path))
    _assert_same_rounds(native, rows)
    # the virtual clock, the online set and the energy drawn, not just the rows
    assert sim.clock_s == native_sim.clock_s
    assert np.array_equal(sim.budget.online, native_sim.budget.online)
    assert np.array_equal(sim.budget.deficit_j, native_sim.budget.deficit_j)
    assert sim.energy_cum_j == native_sim.energy_cum_j
    for k in sim.params:  # same minibatches, plain SGD, FedAvg weighted by samples
        assert torch.allclose(sim.params[k], native_sim.params[k], atol=1e-5)


@needs_fedscale
def test_fedscale_trains_exactly_the_kept_clients_with_its_torch_client(small, tmp_path, monkeypatch):
    _, parts = small
    client_cls = fsi.FlamingoTorchClient
    trained = []
    original = client_cls.train

    def spy(self, client_data, model, conf):
        result = original(self, client_data, model, conf)
        trained.append((conf.flamingo_round, conf.client_id, result["success"], len(client_data)))
        return result

    monkeypatch.setattr(client_cls, "train", spy)
    sim = _sim(parts)
    plans = []
    plan_round = sim.plan_round

    def record():
        plan = plan_round()
        plans.append(plan)
        return plan

    monkeypatch.setattr(sim, "plan_round", record)
    rows = _rows(fsi.run_fedscale(sim, work_dir=tmp_path))
    expected = [(p.round, int(c) + 1) for p in plans for c in p.kept]  # FedScale ids are ours + 1
    assert sorted((r, c) for r, c, _, _ in trained) == sorted(expected)
    assert all(ok and n == parts.cfg.fl.local_steps for _, _, ok, n in trained)
    assert sum(r["n_kept"] for r in rows) == len(trained)


@needs_fedscale
def test_unweighted_fedscale_mean_moves_accuracy_but_not_the_clock(small, tmp_path):
    _, parts = small
    native, _ = _native(parts)
    sim = _sim(parts)
    rows = _rows(fsi.run_in_process(sim, work_dir=tmp_path, weighted=False))
    assert [r["time_s"] for r in rows] == [r["time_s"] for r in native]
    assert [r["energy_cum_j"] for r in rows] == [r["energy_cum_j"] for r in native]
    assert any(abs(a["loss"] - b["loss"]) > 1e-6 for a, b in zip(native, rows))


@needs_fedscale
@pytest.mark.slow
def test_scripted_scenario_by_hand_on_fedscale(tmp_path):
    # tests/fl/test_engine.py's four clients: one kept, one offline, one runs flat, one taken
    # offline by its owner; the FedScale engine must settle them exactly alike
    parts = scripted_parts()
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    rows = _rows(fsi.run_fedscale(sim, work_dir=tmp_path))
    task_s = STEPS * LAT_S + COMM_S  # tests/fl/test_engine.py's numbers
    assert (rows[0]["n_online"], rows[0]["n_selected"], rows[0]["n_kept"]) == (3, 3, 1)
    assert (rows[0]["dropped_battery_exhausted"], rows[0]["dropped_unavailable"]) == (1, 1)
    assert rows[0]["time_s"] == pytest.approx(task_s)
    # client 2 ran flat in round 1 and sat out round 2; at the 10 % floor it is eligible again
    # afterwards (no re-entry hysteresis by default: traces.reentry_pct = min_pct)
    assert (rows[1]["n_online"], rows[1]["n_kept"]) == (1, 1)
    assert sim.budget.online.tolist() == [True, False, True, False]
    native = Simulation(scripted_parts(), experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    _assert_same_rounds([native.step().to_row(), native.step().to_row()], rows)


@needs_fedscale
def test_rounds_where_nobody_is_online_do_not_hang(tmp_path):
    # everyone below the 10 % floor: FedScale's own aggregator would wait forever for uploads
    parts = scripted_parts(rounds=3)
    parts.traces.level_pct[:] = 5.0
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    start = time.monotonic()
    rows = _rows(fsi.run_fedscale(sim, work_dir=tmp_path))
    assert time.monotonic() - start < 30
    assert [r["n_online"] for r in rows] == [0, 0, 0] and [r["n_kept"] for r in rows] == [0, 0, 0]
    assert [r["round"] for r in rows] == [1, 2, 3] and rows[-1]["time_s"] > 0


@needs_fedscale
@pytest.mark.slow
def test_distributed_over_grpc_on_loopback(small, tmp_path):
    cfg, parts = small
    two = SMALL + ["fl.rounds=2"]
    parts2 = build_components(load_experiment(EXP, two), EXP, 0, log=lambda _m: None)
    native, _ = _native(parts2)
    seen = {}

    def on_start(port, procs):
        seen["port"], seen["procs"] = port, procs

    rows = _rows(fsi.run_distributed(
        _sim(parts2), experiment=EXP, overrides=two, work_dir=tmp_path, n_executors=2, on_start=on_start, timeout_s=120
    ))
    _assert_same_rounds(native, rows)
    assert seen["port"] > 0 and len(seen["procs"]) == 2
    assert [p.returncode for p in seen["procs"]] == [0, 0]  # every executor exited by itself
    logs = [(tmp_path / f"executor-{r}.log").read_text() for r in (1, 2)]
    trained = sum(int(log.split("trained ")[1].split()[0]) for log in logs)
    assert trained == sum(r["n_kept"] for r in rows)


@needs_fedscale
def test_distributed_cleans_up_on_interrupt(small, tmp_path):
    cfg, parts = small
    seen = {}

    def on_start(port, procs):
        seen["procs"] = procs
        raise KeyboardInterrupt  # as Ctrl-C would, once the executors are up

    with pytest.raises(KeyboardInterrupt):
        fsi.run_distributed(_sim(parts), experiment=EXP, overrides=SMALL, work_dir=tmp_path, n_executors=2, on_start=on_start)
    assert len(seen["procs"]) == 2 and all(p.poll() is not None for p in seen["procs"])


@needs_fedscale
@pytest.mark.slow
def test_run_experiment_with_the_fedscale_engine_writes_the_native_run_directory(tmp_path):
    over = SMALL + ["fl.rounds=2", "policies=[baseline]"]
    native = run_experiment(EXP, out_dir=tmp_path / "native", overrides=over, log=lambda _m: None)
    fed = run_experiment(EXP, out_dir=tmp_path / "fed", overrides=over, log=lambda _m: None, engine="fedscale")
    for name in ("config.yaml", "metrics.parquet", "summary.json"):
        assert (tmp_path / "fed" / name).is_file()
    assert list(fed.metrics.columns) == list(native.metrics.columns)
    assert set(COLUMNS) <= set(fed.metrics.columns)
    pd.testing.assert_frame_equal(fed.metrics[EXACT], native.metrics[EXACT], check_exact=True)
    assert fed.summary["engine"] == "fedscale" and native.summary["engine"] == "native"
    assert fed.summary["policies"]["baseline"]["total_energy_j"] == native.summary["policies"]["baseline"]["total_energy_j"]


def test_bad_engine_options_are_config_errors(tmp_path):
    # library errors name the parameters, not the CLI's flags
    with pytest.raises(ConfigError, match=r"^engine: unknown engine 'spark'; expected one of 'native', 'fedscale', 'flower' \(built-in or installed in entry-point group 'flamingo_sim\.engines'\) or an import path 'package\.module:ClassName'$"):
        run_experiment(EXP, out_dir=tmp_path / "a", overrides=SMALL, engine="spark")
    with pytest.raises(ConfigError, match=r"^executors: 2 executor processes need engine 'fedscale', not 'native'$"):
        run_experiment(EXP, out_dir=tmp_path / "b", overrides=SMALL, executors=2)
    # without FedScale's extra the engine is refused first, naming the install command (the lowest-versions job has none)
    with pytest.raises(ConfigError if fsi.fedscale_available() else fsi.FedScaleUnavailable,
                       match=r"^resume: engine 'fedscale' writes no checkpoints" if fsi.fedscale_available() else r"pip install 'flamingo-sim\[fedscale\]'"):
        run_experiment(EXP, out_dir=tmp_path / "c", overrides=SMALL, engine="fedscale", resume=True)
    with pytest.raises(ConfigError, match=r"^executors: expected a count >= 0, got -1$"):
        run_experiment(EXP, out_dir=tmp_path / "d", overrides=SMALL, executors=-1)
    assert not any((tmp_path / d).exists() for d in "abcd")


def test_missing_runtime_names_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setattr(fsi.loader, "_FS", None)  # the cache load_fedscale keeps
    monkeypatch.setitem(fsi.REQUIRED, "no_such_module_xyz", "grpcio")
    with pytest.raises(fsi.FedScaleUnavailable, match=r"pip install 'flamingo-sim\[fedscale\]'"):
        fsi.load_fedscale()
    assert not fsi.fedscale_available()
    # the CLI's path: a one-line FlamingoError before any run directory is made
    with pytest.raises(FlamingoError, match=r"needs .*grpcio.*pip install 'flamingo-sim\[fedscale\]'"):
        run_experiment(EXP, out_dir=tmp_path / "run", overrides=SMALL, engine="fedscale")
    assert not (tmp_path / "run").exists()


def test_placeholder_module_imports_but_refuses_use():
    tf = fsi._placeholder_module("tensorflow", "tensorflow-cpu")

    class Metric(tf.keras.metrics.Metric):  # what FedScale's TF model provider does at import
        pass

    assert tf.keras.Model is not None
    with pytest.raises(ModuleNotFoundError, match="tensorflow-cpu"):
        tf.keras.applications.ResNet50()
    with pytest.raises(ModuleNotFoundError, match="tensorflow-cpu"):
        Metric()


@needs_fedscale
@pytest.mark.slow
def test_host_argv_is_hidden_from_fedscale_and_restored():
    code = (
        "import sys; sys.argv = ['host', '--rounds', '7', '--not-a-fedscale-flag'];"
        "from flamingo_sim.integrations.fedscale import load_fedscale; fs = load_fedscale();"
        "print(fs.parser.args.rounds, sys.argv[1:])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "50 ['--rounds', '7', '--not-a-fedscale-flag']"


def _env():
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def _processes_mentioning(text: str) -> list[int]:
    import os

    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if text.encode() in fh.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


@needs_fedscale
@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the executor processes")
def test_ctrl_c_on_the_cli_ends_every_process(tmp_path):
    import signal

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "flamingo_sim", "run", str(EXP), "--engine", "fedscale", "--executors", "2", "--out", str(out)]
    for item in SMALL + ["fl.rounds=100000", "policies=[baseline]"]:
        cmd += ["--set", item]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        logs = [out / "fedscale" / "baseline-seed0" / f"executor-{r}.log" for r in (1, 2)]
        while len(_processes_mentioning(str(out))) < 3 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.2)
        assert all(log.exists() for log in logs) and len(_processes_mentioning(str(out))) == 3  # the CLI + 2 executors
        time.sleep(2.0)  # let the rounds get going
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 10
    while _processes_mentioning(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_mentioning(str(out)) == []


def _children(pid: int) -> list[int]:
    """Live (not zombie) processes whose parent is ``pid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@needs_fedscale
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to find the executor processes")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_executors_die_with_their_parent(tmp_path, sig):
    """SIGTERM (handled: message, exit 143) or SIGKILL (no clean-up runs) to `run --engine fedscale --executors 2`."""
    cmd = [sys.executable, "-m", "flamingo_sim", "run", str(EXP), "--out", str(tmp_path / "run"), "--engine", "fedscale",
           "--executors", "2", *[a for s in [*SMALL, "fl.rounds=50"] for a in ("--set", s)]]
    env = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 180
    kids: list[int] = []
    while len(kids) < 2:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the executors did not start"
        time.sleep(0.1)
        kids = _children(proc.pid)
    time.sleep(1.0)  # the executors are starting up (importing torch): the moment they used to outlive the parent
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    if sig == signal.SIGTERM:
        assert proc.returncode == 143, err
        assert err.strip().splitlines()[-1] == ("flamingo-sim run: interrupted (SIGTERM); this run keeps no checkpoints (FedScale): "
                                                "start it again with another --out")
    else:
        assert proc.returncode == -signal.SIGKILL
    until = time.monotonic() + 5
    while any(_alive(k) for k in kids) and time.monotonic() < until:
        time.sleep(0.1)
    assert not [k for k in kids if _alive(k)], "executor processes survived their parent by 5 s"


def test_executor_device_one_gpu_per_executor():
    from flamingo_sim.errors import ConfigError
    from flamingo_sim.integrations.fedscale.settings import executor_device

    assert [executor_device("cuda", r, 2) for r in (1, 2, 3, 4)] == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]
    assert [executor_device("auto", r, 4) for r in (1, 4)] == ["cuda:0", "cuda:3"]
    assert executor_device("auto", 1, 0) == "cpu" and executor_device("cpu", 2, 8) == "cpu"
    assert executor_device("cuda:1", 3, 2) == "cuda:1"
    with pytest.raises(ConfigError, match="^fl.device: 'cuda' asked for a CUDA GPU but torch sees none; use --device cpu$"):
        executor_device("cuda", 1, 0)
