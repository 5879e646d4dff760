"""A run's results: its finished units gathered into ``metrics.parquet`` and ``summary.json``, and read back.

Last on a run's path, once every unit has finished: :func:`finish_run` takes the units' results in
the config's order, each read back once as it finished (:class:`~flamingo_sim.fl.runner.unit_files.RunResults`,
which wrote ``metrics.parquet`` as the last one finished), summarises them
(:func:`~flamingo_sim.fl.metrics.summary.summarize`), names the plug-ins that ran with their parameters,
and writes ``summary.json``; :func:`load_run` reads both files back for reports and notebooks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pandas as pd

from flamingo_sim.errors import FlamingoError
from flamingo_sim.fl.metrics.summary import format_summary, summarize
from flamingo_sim.fl.runner.unit_files import write_metrics
from flamingo_sim.io import write_json

if TYPE_CHECKING:
    from flamingo_sim.fl.config import ExperimentConfig
    from flamingo_sim.fl.runner.plan import PreparedRun

__all__ = ["RunResult", "run_summary", "untrained_seeds", "finish_run", "load_run"]


@dataclass(frozen=True)
class RunResult:
    """A finished run: its directory, ``metrics.parquet`` and ``summary.json``."""

    out_dir: Path
    metrics: pd.DataFrame
    summary: dict[str, Any]


def run_summary(cfg: ExperimentConfig, metrics: pd.DataFrame, results: list[dict[str, Any]], engine: str, cpu_kernels: str,
                plugins: dict[str, Any] | None = None) -> dict[str, Any]:
    """The summary of a run whose units all finished (``metrics`` and ``results`` as
    :func:`~flamingo_sim.fl.runner.unit_files.gather` returns them): what ``summary.json`` holds;
    ``plugins``: the plug-ins that ran, with their parameters (:func:`~flamingo_sim.fl.compose.plugin_record`), last."""
    shown = [res["rows"][0]["policy"] for res in results]  # each policy's display name, as its rows have it
    summary = summarize(metrics, cfg.target_accuracy, baseline=shown[0], rule=cfg.target)
    for res, name in zip(results, shown):
        summary["policies"][name]["per_seed"][str(res["seed"])]["participation_histogram"] = res["participation_histogram"]
    first, last = results[0], results[-1]
    summary = {"experiment": cfg.name, "data": last["data"], "model": cfg.model, "seeds": cfg.seeds, "engine": engine,
               "cpu_kernels": cpu_kernels,
               "model_size_mb": first["model_size_mb"], "model_size_source": first["model_size_source"], **summary}
    if first.get("phones_from_traces") is not None:  # phones.mix: from_traces
        summary["phones_from_traces"] = first["phones_from_traces"]
    untrained = untrained_seeds(metrics, shown)
    if untrained:  # a run in which some policy never trained: said in the summary, the printed table and the exit code
        summary["untrained"] = untrained
    chosen = {f"{res['policy']} seed {res['seed']}": res["train_mode"] for res in results if res.get("train_mode") is not None}
    if chosen:  # train_mode auto on a GPU: the first unit's choice, and every unit's where they differ
        summary["train_mode"] = next(iter(chosen.values()))
        if len({json.dumps(c, sort_keys=True) for c in chosen.values()}) > 1:
            summary["train_mode_per_unit"] = chosen
    if cfg.policy.interference.owner_loss == "paper":  # Table 3 as input: every report says so
        from flamingo_sim.devices.pricing import OWNER_LOSS_PAPER_NOTE

        summary["owner_loss_input"] = OWNER_LOSS_PAPER_NOTE
    if plugins:
        summary["plugins"] = plugins
    return summary


def untrained_seeds(metrics: pd.DataFrame, policies: list[str]) -> dict[str, list[int]]:
    """Per policy, the seeds in which no round after round 0 kept a client: nothing was trained, so every
    figure of that policy describes the untrained model (only the policies with such seeds)."""
    out: dict[str, list[int]] = {}
    for name in policies:
        rows = metrics[(metrics["policy"] == name) & (metrics["round"] > 0)]
        seeds = sorted(int(seed) for seed, r in rows.groupby("seed") if int(r["n_kept"].sum()) == 0)
        seeds += sorted(int(s) for s in set(metrics.loc[metrics["policy"] == name, "seed"]) - set(rows["seed"]))  # no round at all
        if seeds:
            out[name] = sorted(seeds)
    return out


def finish_run(run: PreparedRun, say: Callable[[str], None], *, print_summary: bool = True) -> RunResult:
    """A run's finished units in ``summary.json`` (and ``metrics.parquet``, unless the last unit to finish wrote it whole)."""
    cfg, out = run.cfg, run.out
    metrics, results = run.results.gather()
    summary = run_summary(cfg, metrics, results, run.engine, run.kernels[0], run.plugins)
    if not run.results.complete:
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
