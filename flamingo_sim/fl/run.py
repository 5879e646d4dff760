"""Running an experiment: build the parts, run every (policy, seed), checkpoint, summarise.

The run directory holds:

- ``config.yaml``     the resolved experiment config (every default filled in);
- ``metrics.parquet`` one row per (policy, seed, round), see :data:`flamingo_sim.fl.metrics.COLUMNS`;
- ``summary.json``    time to target, energy to target, speedup, energy efficiency, clients lost;
- ``checkpoints/``    one ``<policy>-seed<k>.pt`` per run, written atomically every
  ``checkpoint_every`` rounds and at the end, so that ``--resume`` continues a killed run and
  produces exactly what an uninterrupted run would (native engine only);
- ``fedscale/``       with ``engine="fedscale"``: FedScale's logs and the executors' output,
  one ``<policy>-seed<k>/`` per run.

Engines: ``"native"`` trains in this process (:meth:`Simulation.step`); ``"fedscale"`` runs
each (policy, seed) on FedScale's aggregator and executors
(:mod:`flamingo_sim.integrations.fedscale`): in-process with ``executors=0``, else with that
many executor processes over gRPC on 127.0.0.1. Both write the same metrics and summary.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch
import yaml

from flamingo_sim.config import to_mapping
from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.aggregators import make_aggregator
from flamingo_sim.fl.config import AggregationConfig, ExperimentConfig, load_experiment
from flamingo_sim.fl.engine import Simulation
from flamingo_sim.fl.fairness import participation_histogram
from flamingo_sim.fl.metrics import format_summary, summarize
from flamingo_sim.fl.selection import make_selector
from flamingo_sim.fl.tracking import Tracker, check_tracking, open_trackers
from flamingo_sim.io import atomic_path, progress, write_json


@dataclass(frozen=True)
class RunResult:
    out_dir: Path
    metrics: pd.DataFrame
    summary: dict[str, Any]


def default_out_dir(cfg: ExperimentConfig) -> Path:
    return Path("runs") / f"{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_experiment(
    experiment: str | Path,
    *,
    out_dir: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    n_seeds: int | None = None,
    resume: bool = False,
    log: Any = None,
    engine: str = "native",
    executors: int = 0,
) -> RunResult:
    """Run (or resume) the experiment in ``experiment`` and return its metrics and summary."""
    log = log or (lambda msg: print(msg, file=sys.stderr))
    _check_engine(engine, executors, resume)
    cfg = load_experiment(experiment, overrides)
    if n_seeds is not None:
        if n_seeds < 1:
            raise ConfigError(f"--seeds: expected a count >= 1, got {n_seeds}")
        cfg = replace(cfg, seeds=[cfg.seeds[0] + i for i in range(n_seeds)])
    out = Path(out_dir) if out_dir is not None else default_out_dir(cfg)
    if resume:
        if out_dir is None:
            raise ConfigError("--resume needs --out DIR: the run directory to continue")
        _check_resumable(out, cfg)
    elif out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out}: run directory exists and is not empty (use --resume to continue it, or another --out)")
    from flamingo_sim.fl.setup import build_components, make_policy

    # Everything a config can get wrong fails here, before the run directory is touched.
    for name in cfg.policies:
        make_policy(name, cfg)
    if engine == "fedscale" and cfg.aggregation != AggregationConfig():
        raise ConfigError(f"{experiment}: aggregation: only the default (fedavg, weighting: samples) runs with --engine fedscale; use the native engine for {cfg.aggregation.name!r}")
    if cfg.fl.mode == "fedbuff" and (engine != "native" or resume):
        raise ConfigError(f"{experiment}: fl.mode: 'fedbuff' runs on the native engine and writes no checkpoints (no --resume)")
    if engine == "fedscale" and cfg.fl.selection == "oort":
        raise ConfigError(f"{experiment}: fl.selection: 'oort' learns from the native engine's training losses; use the native engine")
    make_aggregator(cfg.aggregation, source=f"{experiment}: aggregation")
    make_selector(cfg.fl.selection, cfg.selector.parameters(), source=f"{experiment}: fl.selection")
    check_tracking(cfg, str(experiment))
    first_parts = build_components(cfg, experiment, cfg.seeds[0], log=log)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "config.yaml") as tmp:
        tmp.write_text(yaml.safe_dump(to_mapping(cfg), sort_keys=False))

    rows: list[dict[str, Any]] = []
    histograms: dict[tuple[str, int], dict[str, int]] = {}
    data_description = None
    for seed in cfg.seeds:
        parts = first_parts if seed == cfg.seeds[0] else build_components(cfg, experiment, seed, log=lambda _m: None)
        data_description = parts.dataset.description
        for name in cfg.policies:
            policy = make_policy(name, cfg)
            buffers = [b for b, _ in parts.model.named_buffers()]
            selector = make_selector(cfg.fl.selection, cfg.selector.parameters())
            if cfg.fl.mode == "fedbuff":
                from flamingo_sim.fl.async_engine import AsyncSimulation

                sim: Simulation = AsyncSimulation(parts, policy, name, seed, selector)
            else:
                sim = Simulation(parts, policy, name, seed, selector, make_aggregator(cfg.aggregation, buffers))
            tracker = open_trackers(cfg, out, name, seed, f"{_safe(name)}-seed{seed}")
            if cfg.fl.mode == "fedbuff":
                rows.extend(_run_async(sim, cfg, out, rows, tracker))
            elif engine == "fedscale":
                from flamingo_sim.integrations.fedscale import run_fedscale

                work = out / "fedscale" / f"{_safe(name)}-seed{seed}"
                log(f"{name} seed {seed}: FedScale engine, " + (f"{executors} executor processes over gRPC" if executors else "in-process"))
                with _RoundProgress(sim, cfg, tracker=tracker) as on_round:
                    rows.extend(run_fedscale(sim, experiment=experiment, work_dir=work, executors=executors, overrides=overrides, on_round=on_round))
                _write_metrics(out, pd.DataFrame(rows))
            else:
                rows.extend(_run_one(sim, out / "checkpoints" / f"{_safe(name)}-seed{seed}.pt", cfg, out, rows, tracker))
            histograms[name, seed] = participation_histogram(sim.times_kept)

    metrics = pd.DataFrame(rows)
    summary = summarize(metrics, cfg.target_accuracy, baseline=cfg.policies[0])
    for (name, seed), hist in histograms.items():
        summary["policies"][name]["per_seed"][str(seed)]["participation_histogram"] = hist
    summary = {"experiment": cfg.name, "data": data_description, "model": cfg.model, "seeds": cfg.seeds, "engine": engine, **summary}
    _write_metrics(out, metrics)
    write_json(out / "summary.json", summary)
    print(format_summary(summary))
    log(f"run directory: {out}")
    return RunResult(out, metrics, summary)


def _check_engine(engine: str, executors: int, resume: bool) -> None:
    if engine not in ("native", "fedscale"):
        raise ConfigError(f"--engine: expected 'native' or 'fedscale', got {engine!r}")
    if executors < 0:
        raise ConfigError(f"--executors: expected a count >= 0, got {executors}")
    if engine == "native" and executors:
        raise ConfigError("--executors: only with --engine fedscale")
    if engine == "fedscale":
        if resume:
            raise ConfigError("--resume: not supported with --engine fedscale (it writes no checkpoints); start a new run")
        from flamingo_sim.integrations.fedscale import load_fedscale

        load_fedscale()  # fail now, with the install command, if FedScale is missing


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def _run_one(sim: Simulation, ckpt: Path, cfg: ExperimentConfig, out: Path, done_rows: list[dict[str, Any]], tracker: Tracker | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        sim.load_state_dict(state["simulation"])
        rows = list(state["rows"])
    every = cfg.checkpoint_every
    with _RoundProgress(sim, cfg, rows, tracker) as on_round:
        while not sim.is_done():
            rows.append(sim.step())
            on_round(rows[-1])
            if sim.round % every == 0 or sim.is_done():
                _checkpoint(ckpt, sim, rows)
                _write_metrics(out, pd.DataFrame(done_rows + rows))
    return rows


def _run_async(sim: Simulation, cfg: ExperimentConfig, out: Path, done_rows: list[dict[str, Any]], tracker: Tracker | None) -> list[dict[str, Any]]:
    """FedBuff (fl.mode: fedbuff): server updates until done; metrics rewritten every checkpoint_every updates."""
    rows: list[dict[str, Any]] = []
    with _RoundProgress(sim, cfg, rows, tracker) as on_round:
        while not sim.is_done():
            rows.append(sim.step())
            on_round(rows[-1])
            if sim.round % cfg.checkpoint_every == 0:
                _write_metrics(out, pd.DataFrame(done_rows + rows))
    return rows


class _RoundProgress:
    """The progress bar of one (policy, seed): rounds, virtual time, latest accuracy, online; feeds the tracker too."""

    def __init__(self, sim: Simulation, cfg: ExperimentConfig, done_rows: Sequence[dict[str, Any]] = (), tracker: Tracker | None = None) -> None:
        self.tracker = tracker
        self.bar = progress(range(cfg.fl.rounds), desc=f"{sim.policy_name} seed {sim.seed}", total=cfg.fl.rounds, unit="round", initial=sim.round)
        evaluated = [r["accuracy"] for r in done_rows if not np.isnan(r["accuracy"])]
        self.accuracy = evaluated[-1] if evaluated else float("nan")

    def __call__(self, row: dict[str, Any]) -> None:
        if not np.isnan(row["accuracy"]):
            self.accuracy = row["accuracy"]
        if self.tracker is not None:
            self.tracker.log(row)
        self.bar.update(1)
        self.bar.set_postfix_str(f"t={row['time_s'] / 3600:.2f} h acc={self.accuracy:.3f} online={row['n_online']}", refresh=False)

    def __enter__(self) -> "_RoundProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.close()
        if self.tracker is not None:
            self.tracker.close()


def _checkpoint(path: Path, sim: Simulation, rows: list[dict[str, Any]]) -> None:
    with atomic_path(path) as tmp:
        torch.save({"simulation": sim.state_dict(), "rows": rows}, tmp)


def _write_metrics(out: Path, metrics: pd.DataFrame) -> None:
    with atomic_path(out / "metrics.parquet") as tmp:
        metrics.to_parquet(tmp, index=False)


def _check_resumable(out: Path, cfg: ExperimentConfig) -> None:
    saved = out / "config.yaml"
    if not saved.is_file():
        raise ConfigError(f"{out}: not a run directory (no config.yaml) - nothing to resume")
    before = yaml.safe_load(saved.read_text())
    if before != to_mapping(cfg):
        raise ConfigError(f"{out}: the experiment config differs from the one this run started with; resume with the same config and --set options")


def load_run(run_dir: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a run directory's metrics table and summary (for reports and notebooks)."""
    run_dir = Path(run_dir)
    metrics_path, summary_path = run_dir / "metrics.parquet", run_dir / "summary.json"
    if not metrics_path.is_file():
        raise FlamingoError(f"{run_dir}: no metrics.parquet - not a flamingo-sim run directory")
    import json

    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    return pd.read_parquet(metrics_path), summary


__all__ = ["run_experiment", "load_run", "RunResult"]
