"""Optional experiment tracking: each round's metrics row to TensorBoard and/or MLflow.

Configured by the experiment's ``tracking:`` section (:class:`~flamingo_sim.fl.config.TrackingConfig`);
:class:`TrackingCallback` is a run-loop callback (:mod:`flamingo_sim.fl.runner.callbacks`).
Both are extras, imported only when switched on (``pip install 'flamingo-sim[tracking]'``;
TensorBoard also comes with the ``fedscale`` extra); a missing package is a one-line error
before the run directory is created (:func:`check_tracking`).

- TensorBoard: ``RUN/tensorboard/<policy>-seed<k>/`` event files, one scalar per numeric
  column of the row (``accuracy``, ``loss``, ``energy_cum_j``, ``jain_participation``, ...),
  step = round, the event's wall time = the round's *virtual* end time, so TensorBoard's
  "relative" axis reads virtual hours. Not-evaluated rounds (NaN accuracy) log nothing there.
- MLflow: one MLflow run per (policy, seed) named ``<policy>-seed<k>`` in the experiment
  ``mlflow_experiment`` (default: the experiment's name), with the resolved config as
  parameters (dotted keys) and the same metrics, step = round. The tracking URI defaults to an
  SQLite store, ``RUN/mlflow.db`` (MLflow 3 retired the file store), with artifacts in
  ``RUN/mlartifacts``: nothing is written outside the run directory.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner.callbacks import Callback
from flamingo_sim.fl.sim.records import RoundRecord

if TYPE_CHECKING:
    from flamingo_sim.fl.config import ExperimentConfig
    from flamingo_sim.fl.sim.simulation import Simulation

__all__ = ["Tracker", "TrackingCallback", "open_trackers", "check_tracking", "numeric_metrics"]

INSTALL = "pip install 'flamingo-sim[tracking]'"
#: Row entries that identify the run rather than measure it.
_NOT_METRICS = ("policy", "seed", "round")


class Tracker(Protocol):
    def log(self, row: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def numeric_metrics(row: dict[str, Any]) -> dict[str, float]:
    """The finite numeric entries of a metrics row, except the run's identifiers."""
    out = {}
    for key, value in row.items():
        if key in _NOT_METRICS or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(float(value)):
            out[key] = float(value)
    return out


def check_tracking(cfg: ExperimentConfig, source: str) -> None:
    """Fail now, with the install command, if a switched-on tracker's package is missing."""
    if cfg.tracking.tensorboard:
        try:
            import torch.utils.tensorboard  # noqa: F401
        except ImportError:
            raise ConfigError(f"{source}: tracking.tensorboard: the tensorboard package is not installed ({INSTALL})") from None
    if cfg.tracking.mlflow:
        try:
            import mlflow  # noqa: F401
        except ImportError:
            raise ConfigError(f"{source}: tracking.mlflow: the mlflow package is not installed ({INSTALL})") from None


class _TensorBoard:
    def __init__(self, log_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir))

    def log(self, row: dict[str, Any]) -> None:
        step, t = int(row["round"]), float(row.get("time_s", 0.0))
        for key, value in numeric_metrics(row).items():
            self.writer.add_scalar(key, value, global_step=step, walltime=t)

    def close(self) -> None:
        self.writer.close()


class _MLflow:
    def __init__(self, uri: str, experiment: str, run_name: str, params: dict[str, Any], artifacts: str | None = None) -> None:
        import mlflow

        self.client = mlflow.tracking.MlflowClient(tracking_uri=uri)
        found = self.client.get_experiment_by_name(experiment)
        exp_id = found.experiment_id if found is not None else self.client.create_experiment(experiment, artifact_location=artifacts)
        self.run_id = self.client.create_run(exp_id, run_name=run_name).info.run_id
        for key, value in params.items():
            self.client.log_param(self.run_id, key, str(value)[:500])

    def log(self, row: dict[str, Any]) -> None:
        step = int(row["round"])
        for key, value in numeric_metrics(row).items():
            self.client.log_metric(self.run_id, key, value, step=step)

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def _flatten(mapping: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


class _All:
    def __init__(self, trackers: list[Any]) -> None:
        self.trackers = trackers

    def log(self, row: dict[str, Any]) -> None:
        for t in self.trackers:
            t.log(row)

    def close(self) -> None:
        for t in self.trackers:
            t.close()


def open_trackers(cfg: ExperimentConfig, out: Path, policy: str, seed: int, run_name: str) -> Tracker | None:
    """The trackers the experiment switches on for one (policy, seed), or None."""
    from flamingo_sim.config import to_mapping

    tc = cfg.tracking
    trackers: list[Any] = []
    if tc.tensorboard:
        trackers.append(_TensorBoard(out / "tensorboard" / run_name))
    if tc.mlflow:
        uri = tc.mlflow_tracking_uri or f"sqlite:///{(out / 'mlflow.db').resolve()}"
        artifacts = None if tc.mlflow_tracking_uri else (out / "mlartifacts").resolve().as_uri()
        trackers.append(_MLflow(uri, tc.mlflow_experiment or cfg.name, f"{policy}-seed{seed}", _flatten(to_mapping(cfg)), artifacts))
    return _All(trackers) if trackers else None


class TrackingCallback(Callback):
    """Logs every round of one (policy, seed) run to the trackers the experiment switches on."""

    def __init__(self, cfg: ExperimentConfig, out: Path, run_name: str) -> None:
        self.cfg, self.out, self.run_name = cfg, out, run_name
        self.tracker: Tracker | None = None

    def on_run_begin(self, sim: "Simulation", records: Sequence[RoundRecord]) -> None:
        self.tracker = open_trackers(self.cfg, self.out, sim.policy_name, sim.seed, self.run_name)

    def on_round_end(self, sim: "Simulation", record: RoundRecord) -> bool:
        if self.tracker is not None:
            self.tracker.log(record.to_row())
        return False

    def on_run_end(self, sim: "Simulation", records: Sequence[RoundRecord]) -> None:
        if self.tracker is not None:
            self.tracker.close()
            self.tracker = None
