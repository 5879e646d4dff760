"""Running an experiment: build the parts, run every (policy, seed), checkpoint, summarise.

The run directory holds:

- ``config.yaml``     the resolved experiment config (every default filled in);
- ``metrics.parquet`` one row per (policy, seed, round), see :data:`flamingo_sim.fl.metrics.summary.COLUMNS`;
- ``summary.json``    time to target, energy to target, speedup, energy efficiency, clients lost;
- ``inputs.json``     SHA-256 of every input file (traces, profiles, dataset mapping): a resume
  refuses to continue on changed inputs;
- ``checkpoints/``    one ``<policy>-seed<k>.pt`` per run (checksummed, the previous one kept as
  ``.prev`` until the new one is verified; :mod:`flamingo_sim.fl.runner.checkpoint`), written every
  ``checkpoint_every`` rounds and at the end, so that ``resume=True`` continues a killed run and
  produces exactly what an uninterrupted run would (native engine only);
- ``.lock``           held by the one process writing the directory (:mod:`flamingo_sim.fl.runner.rundir`);
- ``fedscale/``       with ``engine="fedscale"``: FedScale's logs and the executors' output,
  one ``<policy>-seed<k>/`` per run.

Engines (:mod:`flamingo_sim.fl.runner.engines`, a registry): ``"native"`` trains in this process
(:meth:`Simulation.step`); ``"fedscale"`` runs each (policy, seed) on FedScale's aggregator and
executors (:mod:`flamingo_sim.integrations.fedscale`): in-process with ``executors=0``, else
with that many executor processes over gRPC on 127.0.0.1. Both write the same metrics and
summary. The progress bar, checkpoints and the metrics file are callbacks of the run loop
(:mod:`flamingo_sim.fl.runner.callbacks`), beside any the caller passes.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.config import AggregationConfig, ExperimentConfig, load_experiment
from flamingo_sim.fl.metrics.summary import format_summary, summarize
from flamingo_sim.fl.runner.callbacks import Callback, CallbackList, ProgressBar
from flamingo_sim.fl.runner.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from flamingo_sim.fl.runner.engines import EngineOptions, make_engine
from flamingo_sim.fl.runner.rundir import check_run_dir, run_guard
from flamingo_sim.fl.runner.tracking import TrackingCallback, check_tracking
from flamingo_sim.fl.sim.engine import Simulation
from flamingo_sim.fl.sim.fairness import participation_histogram
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.fl.strategy.aggregators import make_aggregator
from flamingo_sim.fl.strategy.selection import make_selector
from flamingo_sim.io import atomic_path, write_json
from flamingo_sim.resources import find_experiment


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
    log: Callable[[str], None] | None = None,
    engine: str = "native",
    executors: int = 0,
    callbacks: Sequence[Callback] = (),
    device: str | None = None,
    threads: int | None = None,
    collective_timeout_s: float | None = None,
) -> RunResult:
    """Run (or resume) the experiment in ``experiment`` and return its metrics and summary.

    ``callbacks`` (:mod:`flamingo_sim.fl.runner.callbacks`) are called for every (policy, seed) run
    after the built-in ones (progress bar, checkpoints, metrics file); one whose
    ``on_round_end`` returns True ends that run early. ``device`` and ``threads`` (the CLI's
    ``--device``/``--threads``) override ``fl.device`` and ``fl.threads``, like ``--set`` would.

    Started by ``torchrun`` (its environment names a process group), every process calls this
    with the same arguments: they join the group (collectives time out after
    ``collective_timeout_s``), rank 0 runs the experiment and alone writes ``out_dir``, and the
    others train and evaluate their shares of rank 0's rounds (:mod:`flamingo_sim.fl.distributed`).
    """
    from flamingo_sim.fl.distributed.world import world_from_env

    world = world_from_env()
    if world is not None:
        from flamingo_sim.fl.runner.ranks import run_distributed

        return run_distributed(world, _prepare, _run_all, experiment, out_dir=out_dir, overrides=overrides, n_seeds=n_seeds, resume=resume,
                               log=log, engine=engine, executors=executors, callbacks=callbacks, device=device, threads=threads,
                               collective_timeout_s=collective_timeout_s)
    if collective_timeout_s is not None:
        raise ConfigError("--collective-timeout-s: applies to a run over several processes (torchrun, or --nproc N)")
    prep = _prepare(experiment, out_dir=out_dir, overrides=overrides, n_seeds=n_seeds, resume=resume, log=log, engine=engine,
                          executors=executors, callbacks=callbacks, device=device, threads=threads)
    with run_guard(prep.out, prep.cfg, prep.experiment, resume=resume, resumable=prep.runner.resumable):
        return _run_all(prep)


@dataclass
class Prepared:
    """A run checked and built, before its directory is locked."""

    cfg: ExperimentConfig
    experiment: Path
    out: Path
    first_parts: Any
    runner: Any
    callbacks: CallbackList
    engine: str
    say: Callable[[str], None]
    comm: Any = None  # a distributed run's collectives (flamingo_sim.fl.distributed.world.Comm), else None


def _prepare(
    experiment: str | Path, *, out_dir: str | Path | None, overrides: Sequence[str], n_seeds: int | None, resume: bool,
    log: Callable[[str], None] | None, engine: str, executors: int, callbacks: Sequence[Callback], device: str | None,
    threads: int | None, writes: bool = True,
) -> Prepared:
    """Everything a config can get wrong fails here, before the run directory is touched
    (``writes=False``: a rank of a distributed run that will not write it does not check it)."""
    experiment = find_experiment(experiment)
    say: Callable[[str], None] = log or (lambda msg: print(msg, file=sys.stderr))
    overrides = list(overrides)
    if device is not None:
        overrides.append(f"fl.device={device}")
    if threads is not None:
        overrides.append(f"fl.threads={threads}")
    runner = make_engine(engine, EngineOptions(executors=executors, experiment=experiment, overrides=tuple(overrides), log=say))
    if resume and not runner.resumable:
        raise ConfigError(f"resume: engine {engine!r} writes no checkpoints, so its runs cannot be resumed; start a new run")
    user_callbacks = CallbackList(callbacks)
    cfg = load_experiment(experiment, overrides)
    from flamingo_sim.fl.training.device import resolve_device

    where = resolve_device(cfg.fl.device)  # a GPU asked for and absent fails here, before anything is written
    if cfg.fl.train_mode == "threads" and where.type != "cpu":
        raise ConfigError(f"{experiment}: fl.train_mode: 'threads' trains on the CPU's cores, but fl.device is {cfg.fl.device!r} ({where}); "
                          "use streams (or auto) on a GPU, or --device cpu")
    if n_seeds is not None:
        if n_seeds < 1:
            raise ConfigError(f"n_seeds: expected a count >= 1, got {n_seeds}")
        cfg = replace(cfg, seeds=[cfg.seeds[0] + i for i in range(n_seeds)])
    out = Path(out_dir) if out_dir is not None else default_out_dir(cfg)
    if resume and out_dir is None:
        raise ConfigError("resume: needs out_dir, the run directory to continue")
    if writes:
        check_run_dir(out, cfg, resume)
    from flamingo_sim.fl.runner.setup import build_components, make_policy

    for name in cfg.policies:
        make_policy(name, cfg)
    _check_toolkit(cfg, experiment, engine, resume)
    first_parts = build_components(cfg, experiment, cfg.seeds[0], log=say)
    return Prepared(cfg, experiment, out, first_parts, runner, user_callbacks, engine, say)


def training_on(cfg: ExperimentConfig) -> str:
    """Set torch's CPU threads for the run; the line that says where it trains."""
    from flamingo_sim.fl.training.device import resolve_device, set_threads

    where = resolve_device(cfg.fl.device)
    n_threads = set_threads(cfg.fl.threads, small_model=cfg.data.root is None)
    import torch

    hardware = f"({torch.cuda.get_device_name(where)})" if where.type == "cuda" else f"with {n_threads} CPU thread(s)"
    return f"training on {where} {hardware}, precision {cfg.fl.precision}"


def _run_all(prep: Prepared) -> RunResult:
    """Every (policy, seed) run, then the summary; called holding the run directory's lock."""
    from flamingo_sim.fl.runner.setup import build_components

    cfg, experiment, out, first_parts, runner, user_callbacks, engine, say = (
        prep.cfg, prep.experiment, prep.out, prep.first_parts, prep.runner, prep.callbacks, prep.engine, prep.say)
    line = training_on(cfg)
    if prep.comm is not None:
        from flamingo_sim.fl.runner.ranks import describe_world

        line = describe_world(prep.comm, line)
    say(line)

    records: list[RoundRecord] = []
    histograms: dict[tuple[str, int], dict[str, int]] = {}
    data_description = None
    horizon_log = _Once(say)
    for seed in cfg.seeds:
        parts = first_parts if seed == cfg.seeds[0] else build_components(cfg, experiment, seed, log=lambda _m: None)
        data_description = parts.dataset.description
        for name in cfg.policies:
            sim = _simulation(cfg, parts, name, seed, horizon_log)
            if prep.comm is not None:
                from flamingo_sim.fl.runner.ranks import distribute

                distribute(sim, prep.comm, say)
            run_name = f"{_safe(name)}-seed{seed}"
            done: list[RoundRecord] = [sim.initial_record()]  # round 0: every curve starts at t = 0
            hooks: list[Callback] = [ProgressBar(), _MetricsWriter(out, records, cfg.checkpoint_every)]
            if cfg.tracking.tensorboard or cfg.tracking.mlflow:
                hooks.append(TrackingCallback(cfg, out, run_name))
            if runner.resumable and cfg.fl.mode == "sync":
                ckpt = out / "checkpoints" / f"{run_name}.pt"
                done = _resume(sim, ckpt, say) or done
                hooks.append(_Checkpointer(ckpt, cfg.checkpoint_every))
            records.extend(runner.run(sim, CallbackList(hooks + user_callbacks.callbacks), done, out / engine / run_name))
            if prep.comm is not None:
                sim.cohort.close()  # type: ignore[attr-defined]  # the other ranks move on to the next run
            histograms[name, seed] = participation_histogram(sim.times_kept)
            _log_rates(sim, say)

    metrics = _table(records)
    summary = summarize(metrics, cfg.target_accuracy, baseline=cfg.policies[0])
    for (name, seed), hist in histograms.items():
        summary["policies"][name]["per_seed"][str(seed)]["participation_histogram"] = hist
    summary = {"experiment": cfg.name, "data": data_description, "model": cfg.model, "seeds": cfg.seeds, "engine": engine,
               "model_size_mb": first_parts.cfg.network.model_size_mb, "model_size_source": first_parts.model_size_source, **summary}
    if first_parts.population.phone_report is not None:  # phones.mix: from_traces
        summary["phones_from_traces"] = first_parts.population.phone_report
    _write_metrics(out, metrics)
    write_json(out / "summary.json", summary)
    print(format_summary(summary))
    if prep.comm is not None:
        from flamingo_sim.fl.runner.ranks import describe_traffic

        say(describe_traffic(prep.comm))
    say(f"run directory: {out}")
    return RunResult(out, metrics, summary)


def _check_toolkit(cfg: ExperimentConfig, experiment: str | Path, engine: str, resume: bool) -> None:
    """The aggregation, selection, FedBuff and tracking settings: built once, checked against the engine."""
    if engine == "fedscale" and cfg.aggregation != AggregationConfig():
        raise ConfigError(f"{experiment}: aggregation: FedScale runs only the default (fedavg, weighting: samples); run {cfg.aggregation.name!r} natively")
    if cfg.fl.mode == "fedbuff" and (engine != "native" or resume):
        raise ConfigError(f"{experiment}: fl.mode: 'fedbuff' runs natively (not on FedScale) and writes no checkpoints (no resume)")
    if engine == "fedscale" and cfg.fl.selection == "oort":
        raise ConfigError(f"{experiment}: fl.selection: 'oort' learns from the training losses of native runs; FedScale does not report them")
    make_aggregator(cfg.aggregation, source=f"{experiment}: aggregation")
    make_selector(cfg.fl.selection, cfg.selector.parameters(), source=f"{experiment}: fl.selection")
    check_tracking(cfg, str(experiment))


def _simulation(cfg: ExperimentConfig, parts: Any, name: str, seed: int, log: Callable[[str], None]) -> Simulation:
    """A fresh simulation of policy ``name``: synchronous, or FedBuff's (``fl.mode: fedbuff``)."""
    from flamingo_sim.fl.runner.setup import make_policy

    selector = make_selector(cfg.fl.selection, cfg.selector.parameters())
    if cfg.fl.mode == "fedbuff":
        from flamingo_sim.fl.sim.fedbuff import AsyncSimulation

        return AsyncSimulation(parts, make_policy(name, cfg), name, seed, selector, log=log)
    aggregator = make_aggregator(cfg.aggregation, [b for b, _ in parts.model.named_buffers()])
    return Simulation(parts, make_policy(name, cfg), name, seed, selector, log=log, aggregator=aggregator)


def _log_rates(sim: Simulation, log: Any) -> None:
    """Samples/s trained, and beside it samples/s decoded where the data is decoded from files."""
    if not sim.samples_trained or sim.train_wall_s <= 0:
        return
    line = f"{sim.policy_name} seed {sim.seed}: {sim.samples_trained / sim.train_wall_s:,.0f} samples/s trained on {sim.device}"
    decoded = getattr(sim.parts.dataset, "images_per_s", None)
    if decoded is not None and decoded == decoded:
        line += f", {decoded:,.0f} samples/s decoded ({getattr(sim.parts.dataset, 'workers', '?')} threads)"
    log(line)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def _table(records: Sequence[RoundRecord]) -> pd.DataFrame:
    return pd.DataFrame([r.to_row() for r in records])


class _Once:
    """A log that says each distinct line once (the trace-horizon warning of every run)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.said: set[str] = set()

    def __call__(self, msg: str) -> None:
        if msg not in self.said:
            self.said.add(msg)
            self.log(msg)


def _resume(sim: Simulation, ckpt: Path, say: Callable[[str], None]) -> list[RoundRecord]:
    """Load the newest good checkpoint of ``ckpt`` into ``sim``; the rounds it had done (none for a fresh run)."""
    state = load_checkpoint(ckpt, say)
    if state is None:
        return []
    try:
        sim.load_state_dict(state["simulation"])
        return [RoundRecord.from_row(row) for row in state["rows"]]
    except (KeyError, ValueError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"{ckpt}: does not fit this run ({exc})") from None


class _Checkpointer(Callback):
    """Writes the run's checkpoint every ``every`` rounds, at its last round and at its end."""

    def __init__(self, path: Path, every: int) -> None:
        self.path, self.every = path, every

    def on_run_begin(self, sim: Simulation, records: Sequence[RoundRecord]) -> None:
        self.records = list(records)
        self.saved_round = sim.round

    def on_round_end(self, sim: Simulation, record: RoundRecord) -> bool:
        self.records.append(record)
        if sim.round % self.every == 0 or sim.is_done():
            self._save(sim)
        return False

    def on_run_end(self, sim: Simulation, records: Sequence[RoundRecord]) -> None:
        if self.saved_round != sim.round:  # stopped early by a callback
            self._save(sim)

    def _save(self, sim: Simulation) -> None:
        _checkpoint(self.path, sim, [r.to_row() for r in self.records])
        self.saved_round = sim.round


class _MetricsWriter(Callback):
    """Rewrites ``metrics.parquet`` (earlier runs' rows, then this run's) every ``every`` rounds
    and at the run's last round, so a killed run leaves what it had done."""

    def __init__(self, out: Path, earlier: Sequence[RoundRecord], every: int) -> None:
        self.out, self.earlier, self.every = out, list(earlier), every

    def on_run_begin(self, sim: Simulation, records: Sequence[RoundRecord]) -> None:
        self.records = list(records)

    def on_round_end(self, sim: Simulation, record: RoundRecord) -> bool:
        self.records.append(record)
        if sim.round % self.every == 0 or sim.is_done():
            _write_metrics(self.out, _table(self.earlier + self.records))
        return False


def _checkpoint(path: Path, sim: Simulation, rows: list[dict[str, Any]]) -> None:
    save_checkpoint(path, {"simulation": sim.state_dict(), "rows": rows})


def _write_metrics(out: Path, metrics: pd.DataFrame) -> None:
    with atomic_path(out / "metrics.parquet") as tmp:
        metrics.to_parquet(tmp, index=False)


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
