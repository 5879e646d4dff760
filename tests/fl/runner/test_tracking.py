"""Experiment tracking: TensorBoard event files hold the metrics table; MLflow where installed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from flamingo_sim.cli import main
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.runner.tracking import numeric_metrics

ROOT = Path(__file__).resolve().parents[3]
SMALL = ["fl.rounds=3", "fl.participants_per_round=8", "fl.local_steps=2", "fl.eval_every=2", "data.proxy.n_clients=100", "policies=[baseline]"]
HAS_MLFLOW = importlib.util.find_spec("mlflow") is not None


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")


def test_numeric_metrics_skips_identifiers_and_nan():
    row = {"policy": "baseline", "seed": 0, "round": 3, "accuracy": float("nan"), "n_kept": 8, "energy_j": 1.5, "flag": True}
    assert numeric_metrics(row) == {"n_kept": 8.0, "energy_j": 1.5}


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None, reason="tensorboard is not installed (pip install 'flamingo-sim[tracking]')")
@pytest.mark.slow
def test_tensorboard_events_equal_the_metrics(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    res = run_experiment(ROOT / "experiments/toolkit_tracking.yaml", out_dir=tmp_path / "r", overrides=SMALL, log=lambda m: None)
    acc = EventAccumulator(str(tmp_path / "r" / "tensorboard" / "baseline-seed0"))
    acc.Reload()
    m = res.metrics[res.metrics["round"] >= 1]  # round 0 (the initial model) is a metrics row, not a logged step
    energy = acc.Scalars("energy_cum_j")
    assert [e.step for e in energy] == [1, 2, 3]
    assert [e.value for e in energy] == pytest.approx(m["energy_cum_j"].tolist(), rel=1e-6)
    assert [e.wall_time for e in energy] == pytest.approx(m["time_s"].tolist())  # virtual time
    assert [e.step for e in acc.Scalars("accuracy")] == [1, 2, 3]  # evaluated at 1, 2 and the last round
    assert "jain_participation" in acc.Tags()["scalars"]


@pytest.mark.skipif(not HAS_MLFLOW, reason="mlflow is not installed (optional: pip install 'flamingo-sim[tracking]')")
def test_mlflow_run_holds_the_metrics(tmp_path):
    import mlflow

    res = run_experiment(ROOT / "experiments/toolkit_tracking.yaml", out_dir=tmp_path / "r", overrides=SMALL + ["tracking.mlflow=true"], log=lambda m: None)
    client = mlflow.tracking.MlflowClient(tracking_uri=f"sqlite:///{(tmp_path / 'r' / 'mlflow.db').resolve()}")
    exp = client.get_experiment_by_name("toolkit_tracking")
    (run,) = client.search_runs([exp.experiment_id])
    hist = client.get_metric_history(run.info.run_id, "energy_cum_j")
    m = res.metrics[res.metrics["round"] >= 1]  # round 0 (the initial model) is a metrics row, not a logged step
    assert [h.step for h in sorted(hist, key=lambda h: h.step)] == [1, 2, 3]
    assert [h.value for h in sorted(hist, key=lambda h: h.step)] == pytest.approx(m["energy_cum_j"].tolist())
    assert run.data.params["fl.rounds"] == "3"
    assert not (tmp_path / "mlruns").exists() and not Path("mlruns").exists()  # nothing outside the run directory


def test_missing_mlflow_is_one_line_before_the_run_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # `import mlflow` raises ImportError, as where it is not installed
    out = tmp_path / "o"
    assert main(["run", str(ROOT / "experiments/toolkit_tracking.yaml"), "--out", str(out), "--set", "tracking.mlflow=true",
                 "--set", "tracking.tensorboard=false"]) == 2  # only mlflow asked for: the line is about it, whatever else is installed
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("toolkit_tracking.yaml: tracking.mlflow: the mlflow package is not installed (pip install 'flamingo-sim[tracking]')")
    assert not out.exists()
