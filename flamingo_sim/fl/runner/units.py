"""A run's units of work: one (policy, seed) of a run directory, run by one function wherever it runs.

A run directory (:mod:`flamingo_sim.fl.runner.run`) holds every (policy, seed) of one
experiment; each is a :class:`Unit`. :func:`run_unit` runs one unit, in this process, in a
subprocess of the command line (:mod:`flamingo_sim.fl.runner.worker`) or in a Ray task: the
same function and the same output path whatever the executor, so a study run with one worker
and one run with many write the same files. A unit writes only its own files, so units of one
run directory can run at the same time:

- ``units/<policy>-seed<k>.json``   the unit's metrics rows and what the summary needs from its
  run (participation histogram, data description, model size); ``"done": false`` while it runs
  (rewritten every ``checkpoint_every`` rounds), ``true`` once it has finished;
- ``units/<policy>-seed<k>.status`` its progress (round, rounds, process id), for the study's progress lines;
- ``units/<policy>-seed<k>.log``    its log, when it runs in another process;
- ``checkpoints/<policy>-seed<k>.pt`` its checkpoint (native engine, ``fl.mode: sync``).

:func:`~flamingo_sim.fl.runner.results.gather` reads the units back in the config's order (seeds, then policies), so
``metrics.parquet`` and ``summary.json`` do not depend on which unit finished first. A unit whose
result says done is not run again; one with a checkpoint continues from it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import ExperimentConfig
from flamingo_sim.fl.runner.callbacks import Callback, CallbackList, ProgressBar
from flamingo_sim.fl.runner.checkpoint import Checkpointer, resume_simulation
from flamingo_sim.fl.runner.compose import compose, resolve_config
from flamingo_sim.fl.runner.engines import EngineOptions, make_engine
from flamingo_sim.fl.runner.kernels import pin_run_kernels
from flamingo_sim.fl.runner.tracking import TrackingCallback
from flamingo_sim.fl.sim.fairness import participation_histogram
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.io import atomic_path, write_json
from flamingo_sim.resources import find_experiment

__all__ = ["Unit", "PartsCache", "run_unit", "unit_parts", "unit_result", "log_rates", "read_status", "safe_name", "call_after"]

UNITS_DIR = "units"
#: The result file's format (a file of another format is not trusted: the unit runs again).
FORMAT = 1
#: Seconds between two writes of a unit's progress file.
STATUS_EVERY_S = 0.5


@dataclass(frozen=True)
class Unit:
    """One (policy, seed) of a run directory, and how to build its config again in any process.

    ``experiment``: a shipped experiment's name or an absolute path (the same on every node).
    ``threads``: the CPU threads the unit may use (its share of the cores: torch's thread
    budget in a worker process, the CPUs a Ray task asks for); ``gpu``: it trains on a CUDA GPU;
    ``cost``: its relative work, for the order in which units start (not their results);
    ``device``: its ``fl.device`` as configured (``auto`` and ``cuda`` train on the GPU a ``--jobs N``
    pool gives the worker); ``after``: ``package.module:function`` called with ``(unit, say)`` once the unit has
    finished, in the process that ran it (a study's per-run work done where the run ends:
    ``reproduce`` draws a task's figures when its last unit is done); its errors are said, not raised.
    """

    experiment: str
    overrides: tuple[str, ...]
    n_seeds: int | None
    run_dir: str
    policy: str
    seed: int
    label: str
    engine: str = "native"
    executors: int = 0
    threads: int = 1
    gpu: bool = False
    cost: float = 1.0  # relative work (rounds x clients x steps): the costliest units start first
    after: str = ""
    device: str = "cpu"  # fl.device as configured: a pool gives each worker its own GPU for "auto" and "cuda"

    @property
    def name(self) -> str:
        return f"{safe_name(self.policy)}-seed{self.seed}"

    def path(self, suffix: str) -> Path:
        """``RUN_DIR/units/<policy>-seed<k><suffix>``."""
        return Path(self.run_dir) / UNITS_DIR / f"{self.name}{suffix}"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Unit":
        raw = json.loads(text)
        raw["overrides"] = tuple(raw["overrides"])
        return cls(**raw)


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


class PartsCache:
    """The components of the last ``capacity`` (run directory, seed) pairs built in this process:
    the policies of one seed share them, as they would in one run."""

    def __init__(self, capacity: int = 1) -> None:
        self.capacity = max(1, capacity)
        self.entries: dict[tuple[str, int], Any] = {}  # oldest first
        #: Seconds the last build took (what a unit of the same seed saves).
        self.built_s = 0.0

    @property
    def key(self) -> tuple[str, int] | None:
        """The (run directory, seed) put last (None when empty)."""
        return next(reversed(self.entries), None)

    def put(self, run_dir: str, seed: int, parts: Any) -> None:
        """Keep ``parts`` for (``run_dir``, ``seed``), dropping the oldest beyond the capacity; None empties the cache."""
        if parts is None:
            self.entries.clear()
            return
        self.entries.pop((run_dir, seed), None)
        self.entries[(run_dir, seed)] = parts
        while len(self.entries) > self.capacity:
            self.entries.pop(next(iter(self.entries)))

    def get(self, run_dir: str, seed: int) -> Any:
        return self.entries.get((run_dir, seed))


def unit_result(unit_dir: Path, policy: str, seed: int, *, done_only: bool = True) -> dict[str, Any] | None:
    """The unit's result file read back and checked (None if absent, unfinished or not trustworthy)."""
    path = unit_dir / f"{safe_name(policy)}-seed{seed}.json"
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = (isinstance(raw, dict) and raw.get("format") == FORMAT and raw.get("policy") == policy and raw.get("seed") == seed
          and isinstance(raw.get("rows"), list) and all(isinstance(r, dict) for r in raw["rows"]))
    if not ok or (done_only and raw.get("done") is not True):
        return None
    return raw


def run_unit(
    unit: Unit,
    *,
    say: Callable[[str], None],
    cache: PartsCache | None = None,
    callbacks: Sequence[Callback] = (),
    progress_bar: bool = True,
    after_write: Callable[[], None] | None = None,
    split: Callable[[Simulation], None] | None = None,
) -> None:
    """Run (or continue) one unit into its run directory; a finished one is left as it is.

    The run directory must exist with its ``config.yaml`` (the caller holds its lock). ``say``
    gets the log lines; ``cache`` shares the components of one seed between its policies;
    ``after_write`` is called after each write of the unit's result (the run's own process
    refreshes ``metrics.parquet`` with it, so that a killed run leaves what it had done).
    """
    out = Path(unit.run_dir)
    if unit_result(out / UNITS_DIR, unit.policy, unit.seed) is not None:
        return
    experiment, cfg, parts = unit_parts(unit, cache)
    runner = make_engine(unit.engine, EngineOptions(executors=unit.executors, experiment=experiment, overrides=unit.overrides, log=say))
    sim = compose(cfg, experiment, unit.seed, unit.policy, parts=parts, log=say)
    if split is not None:  # rank 0 of a distributed run: step 5 over the group (flamingo_sim.fl.runner.ranks.distribute)
        split(sim)
    done: list[RoundRecord] = [sim.initial_record()]  # round 0: every curve starts at t = 0
    writer = _UnitWriter(unit, cfg.checkpoint_every, parts, after_write)
    hooks: list[Callback] = [writer, _Status(unit.path(".status"))]
    bar = ProgressBar() if progress_bar else None
    if bar is not None:
        hooks.insert(0, bar)
    if cfg.tracking.tensorboard or cfg.tracking.mlflow:
        hooks.append(TrackingCallback(cfg, out, unit.name))
    if runner.resumable and cfg.fl.mode == "sync":
        ckpt = out / "checkpoints" / f"{unit.name}.pt"
        resumed = resume_simulation(sim, ckpt, say)
        if resumed:
            say(f"{unit.label}: resuming from round {sim.round + 1}")
        done = resumed or done
        hooks.append(Checkpointer(ckpt, cfg.checkpoint_every))
    try:
        records = runner.run(sim, CallbackList(hooks + list(callbacks)), done, out / unit.engine / unit.name)
    finally:  # also on Ctrl-C or an error: the bar ends before the line that says how to continue, never redrawn after it
        if bar is not None:
            bar.close()
    if split is not None:
        sim.seam.close()  # type: ignore[attr-defined]  # a DistributedSeam: the other ranks move on to the next unit
    writer.write(records, histogram=participation_histogram(sim.times_kept))
    log_rates(sim, say)
    if unit.after:
        call_after(unit, say)


def call_after(unit: Unit, say: Callable[[str], None]) -> None:
    """``unit.after(unit, say)`` (see :class:`Unit`); an error in it is one line said, the unit stays done."""
    import importlib

    module, _, name = unit.after.partition(":")
    try:
        getattr(importlib.import_module(module), name)(unit, say)
    except Exception as exc:  # noqa: BLE001 - the unit finished; what comes after it is redone where it is needed
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        say(f"{unit.label}: {unit.after} failed: {type(exc).__name__}{': ' + first if first else ''}")


def unit_parts(unit: Unit, cache: PartsCache | None) -> tuple[Path, ExperimentConfig, Any]:
    """The unit's experiment file, config and components (from ``cache`` when it holds its seed's,
    else built and put there), with this process's CPU kernels and threads set for it: what
    :func:`run_unit` starts from, and what a study's worker builds to validate a run before any
    output is written."""
    from flamingo_sim.fl.runner.compose import build_components
    from flamingo_sim.fl.training.device import set_threads

    experiment = find_experiment(unit.experiment)
    cfg = resolve_config(experiment, unit.overrides, unit.n_seeds)
    if unit.seed not in cfg.seeds or unit.policy not in cfg.policies:
        raise ConfigError(f"{unit.run_dir}: unit {unit.name}: not a (policy, seed) of this run")
    # a worker started by the run inherits the run's kernels (ATEN_CPU_CAPABILITY, set by prepare_run); one that
    # did not (a Ray task on another node) pins them itself, before its first kernel
    if "ATEN_CPU_CAPABILITY" not in os.environ:
        pin_run_kernels(cfg)
    set_threads(cfg.fl.threads, small_model=cfg.data.root is None)
    parts = cache.get(unit.run_dir, unit.seed) if cache is not None else None
    if parts is None:
        began = time.perf_counter()
        parts = build_components(cfg, experiment, unit.seed, log=lambda _m: None)
        if cache is not None:
            cache.put(unit.run_dir, unit.seed, parts)
            cache.built_s = time.perf_counter() - began
    return experiment, cfg, parts


class _UnitWriter(Callback):
    """Writes the unit's result file every ``every`` rounds and at its last round (``done`` false),
    so an interrupted run leaves the rounds it had checkpointed; :meth:`write` with the histogram
    marks it done."""

    def __init__(self, unit: Unit, every: int, parts: Any, after: Callable[[], None] | None) -> None:
        self.unit, self.every, self.after = unit, every, after
        self.about = {
            "data": parts.dataset.description,
            "model_size_mb": parts.cfg.network.model_size_mb,
            "model_size_source": parts.model_size_source,
            "phones_from_traces": parts.population.phone_report,
        }

    def on_run_begin(self, sim: Any, records: Sequence[RoundRecord]) -> None:
        self.records = list(records)
        self.sim = sim

    def on_round_end(self, sim: Any, record: RoundRecord) -> bool:
        self.records.append(record)
        if sim.round % self.every == 0 or sim.is_done():
            self.write(self.records)
        return False

    def write(self, records: Sequence[RoundRecord], histogram: dict[str, int] | None = None) -> None:
        body = {"format": FORMAT, "policy": self.unit.policy, "seed": self.unit.seed, "done": histogram is not None,
                "rows": [r.to_row() for r in records], "participation_histogram": histogram, **self.about}
        choice = getattr(getattr(getattr(self, "sim", None), "trainer", None), "choice", None)
        if choice is not None:  # train_mode auto on a GPU: what it chose, why, and the bound it checked
            body["train_mode"] = choice.record()
        write_json(self.unit.path(".json"), body)
        if self.after is not None:
            self.after()


class _Status(Callback):
    """The unit's progress (``{"round": r, "rounds": R, "pid": its process}``) in a small file, at most every
    :data:`STATUS_EVERY_S`: what a study's progress lines show, wherever the unit runs."""

    def __init__(self, path: Path) -> None:
        self.path, self.last = path, 0.0

    def _write(self, sim: Any) -> None:
        self.last = time.monotonic()
        with atomic_path(self.path) as tmp:
            tmp.write_text(json.dumps({"round": sim.round, "rounds": sim.rules.fl.rounds, "pid": os.getpid()}))

    def on_run_begin(self, sim: Any, records: Sequence[RoundRecord]) -> None:
        self._write(sim)

    def on_round_end(self, sim: Any, record: RoundRecord) -> bool:
        if time.monotonic() - self.last >= STATUS_EVERY_S or sim.is_done():
            self._write(sim)
        return False


def log_rates(sim: Simulation, log: Any) -> None:
    """Samples/s trained, and beside it samples/s decoded where the data is decoded from files."""
    if not sim.samples_trained or sim.train_wall_s <= 0:
        return
    line = f"{sim.policy_name} seed {sim.seed}: {sim.samples_trained / sim.train_wall_s:,.0f} samples/s trained on {sim.device}"
    decoded = getattr(sim.parts.dataset, "images_per_s", None)
    if decoded is not None and decoded == decoded:
        line += f", {decoded:,.0f} samples/s decoded ({getattr(sim.parts.dataset, 'workers', '?')} threads)"
    log(line)


def read_status(unit: Unit) -> tuple[int, int | None] | None:
    """``(round, rounds)`` of a running unit (None before its first write)."""
    try:
        raw = json.loads(unit.path(".status").read_text())
        return int(raw["round"]), (None if raw["rounds"] is None else int(raw["rounds"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None

