"""A run's results: the units' result files gathered into ``metrics.parquet`` and ``summary.json``, and read back.

:func:`gather` reads the units (:mod:`flamingo_sim.fl.runner.units`) in the config's order
(seeds, then policies), so the files do not depend on which unit finished first;
:func:`write_partial_metrics` writes what an interrupted run has done so far; :func:`finish_run`
writes both files of a finished run; :func:`load_run` reads them back for reports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pandas as pd

from flamingo_sim.errors import FlamingoError
from flamingo_sim.fl.config import ExperimentConfig
from flamingo_sim.fl.metrics.summary import format_summary, summarize
from flamingo_sim.fl.runner.units import UNITS_DIR, safe_name, unit_result
from flamingo_sim.io import atomic_path, write_json

if TYPE_CHECKING:
    from flamingo_sim.fl.runner.prepare import PreparedRun

__all__ = ["RunResult", "gather", "run_summary", "write_metrics", "write_partial_metrics", "finish_run", "load_run"]


@dataclass(frozen=True)
class RunResult:
    """A finished run: its directory, ``metrics.parquet`` and ``summary.json``."""

    out_dir: Path
    metrics: pd.DataFrame
    summary: dict[str, Any]


def gather(run_dir: Path, cfg: ExperimentConfig, *, partial: bool = False) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Every unit's rows in the config's order (seeds, then policies) and their results.

    ``partial``: take what each unit has written so far (finished or not, absent ones left
    out); otherwise every unit must have finished (a :class:`FlamingoError` names the first that has not).
    """
    rows: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for seed in cfg.seeds:
        for policy in cfg.policies:
            res = unit_result(run_dir / UNITS_DIR, policy, seed, done_only=not partial)
            if res is None:
                if partial:
                    continue
                raise FlamingoError(f"{run_dir}: unit {safe_name(policy)}-seed{seed} has not finished")
            rows += res["rows"]
            results.append(res)
    return pd.DataFrame(rows), results


def write_metrics(out: Path, metrics: pd.DataFrame) -> None:
    with atomic_path(out / "metrics.parquet") as tmp:
        metrics.to_parquet(tmp, index=False)


def write_partial_metrics(run_dir: Path, cfg: ExperimentConfig) -> None:
    """``metrics.parquet`` of the rounds the units have written so far (nothing if none has)."""
    metrics, _ = gather(run_dir, cfg, partial=True)
    if len(metrics):
        write_metrics(run_dir, metrics)


def run_summary(cfg: ExperimentConfig, metrics: pd.DataFrame, results: list[dict[str, Any]], engine: str, cpu_kernels: str) -> dict[str, Any]:
    """The summary of a run whose units all finished (``metrics`` and ``results`` as :func:`gather` returns them): what
    ``summary.json`` holds."""
    summary = summarize(metrics, cfg.target_accuracy, baseline=cfg.policies[0], rule=cfg.target)
    for res in results:
        summary["policies"][res["policy"]]["per_seed"][str(res["seed"])]["participation_histogram"] = res["participation_histogram"]
    first, last = results[0], results[-1]
    summary = {"experiment": cfg.name, "data": last["data"], "model": cfg.model, "seeds": cfg.seeds, "engine": engine,
               "cpu_kernels": cpu_kernels,
               "model_size_mb": first["model_size_mb"], "model_size_source": first["model_size_source"], **summary}
    if first.get("phones_from_traces") is not None:  # phones.mix: from_traces
        summary["phones_from_traces"] = first["phones_from_traces"]
    chosen = {f"{res['policy']} seed {res['seed']}": res["train_mode"] for res in results if res.get("train_mode") is not None}
    if chosen:  # train_mode auto on a GPU: the first unit's choice, and every unit's where they differ
        summary["train_mode"] = next(iter(chosen.values()))
        if len({json.dumps(c, sort_keys=True) for c in chosen.values()}) > 1:
            summary["train_mode_per_unit"] = chosen
    return summary


def finish_run(run: PreparedRun, say: Callable[[str], None], *, print_summary: bool = True) -> RunResult:
    """Gather a run's finished units into ``metrics.parquet`` and ``summary.json``."""
    cfg, out = run.cfg, run.out
    metrics, results = gather(out, cfg)
    summary = run_summary(cfg, metrics, results, run.engine, run.kernels[0])
    write_metrics(out, metrics)
    write_json(out / "summary.json", summary)
    if print_summary:
        print(format_summary(summary))
    say(f"run directory: {out}")
    return RunResult(out, metrics, summary)


def load_run(run_dir: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a run directory's metrics table and summary (for reports and notebooks)."""
    run_dir = Path(run_dir)
    metrics_path, summary_path = run_dir / "metrics.parquet", run_dir / "summary.json"
    if not metrics_path.is_file():
        raise FlamingoError(f"{run_dir}: no metrics.parquet - not a flamingo-sim run directory")
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    return pd.read_parquet(metrics_path), summary
