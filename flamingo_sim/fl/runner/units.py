"""One unit of work, one (policy, seed) of a run directory, run by one function wherever it runs.

On a run's path, an executor (:mod:`flamingo_sim.fl.runner.executors`) calls :func:`run_unit` for
each unit it is given, in this process (:class:`InProcess`, what ``jobs=1`` on this machine does),
in a long-lived worker process (:mod:`flamingo_sim.fl.runner.worker`) or in a Ray task: the same
function and the same output files (:mod:`flamingo_sim.fl.runner.unit_files`) whatever the
executor. :func:`run_unit` builds the unit's simulation (:func:`flamingo_sim.fl.compose.compose`
on its seed's parts, shared by the policies of a seed through a :class:`PartsCache`) from the run's
resolved config (:func:`unit_config`: the record the unit carries, never the experiment file; in the
run's own process, its plan's :class:`RunPlan`, with the plug-ins its check built), resumes it
from its checkpoint where it has one, and has its engine (``flamingo_sim.fl.runner.engines``)
run the rounds with the run loop's callbacks: the progress bar, the unit's saver
(:class:`UnitSaver`: its result file and its checkpoint, every ``checkpoint_every`` rounds), its
status file and tracking. A unit whose result says done is not run again.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import yaml

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.compose import Prebuilt, build_components, compose, config_from_record
from flamingo_sim.fl.config import ExperimentConfig
from flamingo_sim.fl.runner.callbacks import Callback, CallbackList, ProgressBar
from flamingo_sim.fl.runner.checkpoint import ROW_TEXTS, checkpoint_bytes, resume_simulation, write_checkpoint
from flamingo_sim.fl.runner.engines import EngineOptions, make_engine
from flamingo_sim.fl.runner.kernels import pin_run_kernels
from flamingo_sim.fl.runner.tracking import TrackingCallback
from flamingo_sim.fl.runner.unit_files import FORMAT, UNITS_DIR, RunResults, Unit, unit_result
from flamingo_sim.fl.sim.fairness import participation_histogram
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.io import WriteBehind, as_written, atomic_path, json_item_text, write_json_with_items
from flamingo_sim.resources import find_experiment

__all__ = ["RunPlan", "PartsCache", "Once", "InProcess", "UnitSaver", "run_unit", "unit_parts", "unit_config", "recorded_config", "log_rates",
           "call_after"]

#: Seconds between two writes of a unit's progress file.
STATUS_EVERY_S = 0.5


class RunPlan(Protocol):
    """A run as its plan hands it to the units that run in the process holding its directory
    (:class:`flamingo_sim.fl.runner.plan.PreparedRun` is one): the state that flows forward, read by
    :func:`~flamingo_sim.fl.runner.execute.run_units` and :func:`run_unit`, never built again."""

    #: The run directory.
    out: Path
    #: The run's resolved config, as its directory records it.
    cfg: ExperimentConfig
    #: The engine's name.
    engine: str
    #: The CPU kernels this process runs and, where they could not be pinned as asked, a line saying so.
    kernels: tuple[str, str | None]
    #: The first seed's components built by the plan (taken by its first unit here), or None.
    first_parts: Any
    #: The plug-ins the plan's check built (each taken once by a unit here), or None.
    prebuilt: Prebuilt | None
    #: Its finished units, read back once each, and its metrics file written from them.
    results: RunResults


class PartsCache:
    """The components of the last ``capacity`` (run directory, seed) pairs built in this process:
    the policies of one seed share them, as they would in one run. Components built before the
    units start (a run's first seed, built to validate it) are :meth:`offer`-ed, and taken on the
    first :meth:`get` of their seed."""

    def __init__(self, capacity: int = 1) -> None:
        self.capacity = max(1, capacity)
        self.entries: dict[tuple[str, int], Any] = {}  # oldest first
        self.offered: dict[tuple[str, int], Any] = {}
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
            self.offered.clear()
            return
        self.entries.pop((run_dir, seed), None)
        self.entries[(run_dir, seed)] = parts
        while len(self.entries) > self.capacity:
            self.entries.pop(next(iter(self.entries)))

    def offer(self, run_dir: str, seed: int, parts: Any) -> None:
        """``parts`` already built for (``run_dir``, ``seed``): kept aside until a unit of that seed asks (then cached)."""
        if parts is not None:
            self.offered[(run_dir, seed)] = parts

    def get(self, run_dir: str, seed: int) -> Any:
        if (run_dir, seed) not in self.entries and (run_dir, seed) in self.offered:
            self.put(run_dir, seed, self.offered.pop((run_dir, seed)))
        return self.entries.get((run_dir, seed))


class Once:
    """A log that says each distinct line once (the trace-horizon warning of every run)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.said: set[str] = set()

    def __call__(self, msg: str) -> None:
        if msg not in self.said:
            self.said.add(msg)
            self.log(msg)


@dataclass
class InProcess:
    """How the units an executor runs in this process (``jobs=1`` on this machine) are run:
    :meth:`run` is :func:`run_unit` with what they share.

    ``say`` gets the log lines (each distinct line once per run directory); ``cache`` the
    components a seed's policies share (a run's first seed offered to it); ``callbacks`` the
    caller's, after the built-in ones; ``runs``: the runs' plans by run directory (:class:`RunPlan`:
    their configs, the plug-ins their checks built, and their ``metrics.parquet``, refreshed
    as a unit here saves its rounds: a killed run leaves what it had done); ``comm``: rank 0 of a
    distributed run, whose simulations split step 5 over the group."""

    say: Callable[[str], None]
    cache: PartsCache = field(default_factory=PartsCache)
    callbacks: Sequence[Callback] = ()
    runs: dict[str, RunPlan] = field(default_factory=dict)
    comm: Any = None
    logs: dict[str, Once] = field(default_factory=dict)

    def run(self, unit: Unit) -> None:
        """Run ``unit`` here (:func:`run_unit`)."""
        log = self.logs.setdefault(unit.run_dir, Once(self.say))
        run_unit(unit, say=log, cache=self.cache, callbacks=self.callbacks, run=self.runs.get(unit.run_dir), comm=self.comm)

    def close(self) -> None:
        """Free the components kept."""
        self.cache.put("", 0, None)


def run_unit(
    unit: Unit,
    *,
    say: Callable[[str], None],
    cache: PartsCache | None = None,
    callbacks: Sequence[Callback] = (),
    progress_bar: bool = True,
    run: RunPlan | None = None,
    comm: Any = None,
) -> None:
    """Run (or continue) one unit into its run directory; a finished one is left as it is.

    The run directory must exist with its ``config.yaml`` (the caller holds its lock). ``say``
    gets the log lines; ``cache`` shares the components of one seed between its policies;
    ``run``: the unit's run when this process holds its directory (:class:`RunPlan`: its config and the
    plug-ins its check built are taken from it, and its ``metrics.parquet`` is refreshed as the unit
    saves its rounds); ``comm``: rank 0 of a distributed run (:mod:`flamingo_sim.fl.runner.ranks`),
    whose simulation splits step 5 over the group.
    """
    out = Path(unit.run_dir)
    if unit_result(out / UNITS_DIR, unit.policy, unit.seed) is not None:
        return
    experiment, cfg, parts = unit_parts(unit, cache, None if run is None else run.cfg)
    runner = make_engine(unit.engine, EngineOptions(executors=unit.executors, experiment=experiment, overrides=unit.overrides, log=say))
    sim = compose(cfg, experiment, unit.seed, unit.policy, parts=parts, log=say, prebuilt=None if run is None else run.prebuilt)
    if comm is not None:  # rank 0 of a distributed run: step 5 over the group
        from flamingo_sim.fl.distributed.seam import split_over

        split_over(sim, comm, say)
    done: list[RoundRecord] = [sim.initial_record()]  # round 0: every curve starts at t = 0
    checkpoint = out / "checkpoints" / f"{unit.name}.pt" if runner.resumable and cfg.fl.mode == "sync" else None
    saver = UnitSaver(unit, cfg.checkpoint_every, parts, checkpoint, None if run is None else run.results)
    status = _Status(unit.path(".status"))
    hooks: list[Callback] = [saver, status]
    bar = ProgressBar() if progress_bar else None
    if bar is not None:
        hooks.insert(0, bar)
    if cfg.tracking.tensorboard or cfg.tracking.mlflow:
        hooks.append(TrackingCallback(cfg, out, unit.name))
    if checkpoint is not None:
        resumed = resume_simulation(sim, checkpoint, say)
        if resumed:
            say(f"{unit.label}: resuming from round {sim.round + 1}")
        done = resumed or done
    try:
        records = runner.run(sim, CallbackList(hooks + list(callbacks)), done, out / unit.engine / unit.name)
    except BaseException:  # Ctrl-C or an error: the saves in flight land before it goes on (their own error is dropped)
        saver.settle(quiet=True)
        status.behind.wait(quiet=True)
        raise
    finally:  # also on Ctrl-C or an error: the bar ends before the line that says how to continue, never redrawn after it
        if bar is not None:
            bar.close()
    if comm is not None:
        sim.seam.close()  # type: ignore[attr-defined]  # a DistributedSeam: the other ranks move on to the next unit
    saver.write(records, histogram=participation_histogram(sim.times_kept))
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


def unit_config(unit: Unit) -> ExperimentConfig:
    """The unit's config, from the run's record: the one it carries (:attr:`Unit.config`), else its run
    directory's ``config.yaml``; never the experiment file, which may have changed since the run began."""
    if unit.config:
        return config_from_record(json.loads(unit.config), str(Path(unit.run_dir) / "config.yaml"))
    return recorded_config(unit.run_dir)


def recorded_config(run_dir: str | Path) -> ExperimentConfig:
    """The config a run directory records (``config.yaml``, written when the run began)."""
    record = Path(run_dir) / "config.yaml"
    try:
        return config_from_record(yaml.safe_load(record.read_text()), str(record))
    except FileNotFoundError:
        raise ConfigError(f"{run_dir}: not a run directory (no config.yaml): no config to build from") from None


def unit_parts(unit: Unit, cache: PartsCache | None, cfg: ExperimentConfig | None = None) -> tuple[Path, ExperimentConfig, Any]:
    """The unit's experiment file, config (``cfg``, else :func:`unit_config`) and components (from ``cache``
    when it holds its seed's, else built and put there), with this process's CPU kernels and threads set
    for it: what :func:`run_unit` starts from, and what a study's worker builds to validate a run before
    any output is written."""
    from flamingo_sim.fl.training.device import set_threads

    experiment = find_experiment(unit.experiment)
    cfg = unit_config(unit) if cfg is None else cfg
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


class UnitSaver(Callback):
    """What a killed unit leaves to continue from: its result file (``done`` false) and, for a
    resumable run, its checkpoint, written together every ``every`` rounds and at its last round
    (the checkpoint also at the end of a run a callback stopped early); :meth:`write` with the
    participation histogram marks the result done. ``results``: the run's, when this process holds
    its directory: its ``metrics.parquet`` gets these rounds too every ``every`` rounds, but the
    last (the run writes it once the unit has finished).

    The saves every ``every`` rounds are made in the round's thread (the result file's rows, the
    checkpoint's bytes, the running ``metrics.parquet``'s rows: a snapshot at that round) and written
    behind it (:class:`~flamingo_sim.io.WriteBehind`: in order, one save in flight, each file atomic),
    off the rounds' path (issue 52); :meth:`settle` waits for the save in flight and raises its error,
    as the next save, :meth:`write` and :meth:`on_run_end` do."""

    def __init__(self, unit: Unit, every: int, parts: Any, checkpoint: Path | None, results: RunResults | None) -> None:
        self.unit, self.every, self.checkpoint, self.results = unit, every, checkpoint, results
        self._encodings: dict[int, _EncodedRecord] = {}  # id(record) -> its encodings (the record kept there too)
        self.behind = WriteBehind(f"{unit.name} saves")
        self.about = {
            "data": parts.dataset.description,
            "model_size_mb": parts.cfg.network.model_size_mb,
            "model_size_source": parts.model_size_source,
            "phones_from_traces": parts.population.phone_report,
        }

    def on_run_begin(self, sim: Any, records: Sequence[RoundRecord]) -> None:
        self.records = list(records)
        self.saved_round = sim.round
        self.sim = sim

    def on_round_end(self, sim: Any, record: RoundRecord) -> bool:
        self.records.append(record)
        if sim.round % self.every == 0 or sim.is_done():
            result = self._result_file(self.records)
            write_checkpoint_now = self._checkpoint_save(sim)
            running = None
            if self.results is not None and not sim.is_done():  # the rows as its file has them
                running = self.results.running_rows(self.unit.policy, self.unit.seed, [r.written for r in self._encoded(self.records)])
            results = self.results

            def save() -> None:  # what a save writes, in the order a save without the thread wrote it
                write_json_with_items(*result)
                write_checkpoint_now()
                if running is not None and results is not None:
                    results.write_rows(running)

            self.behind.submit(save)
        return False

    def on_run_end(self, sim: Any, records: Sequence[RoundRecord]) -> None:
        self.settle()
        if self.saved_round != sim.round:  # stopped early by a callback
            self._checkpoint_save(sim)()

    def settle(self, quiet: bool = False) -> None:
        """Wait for the save in flight; its error raised here (``quiet``: dropped, for a unit that is failing anyway)."""
        self.behind.wait(quiet)

    def _checkpoint_save(self, sim: Any) -> Callable[[], None]:
        """Saving the checkpoint of ``sim`` as it is now: its bytes made here (:func:`~flamingo_sim.fl.runner.checkpoint.checkpoint_bytes`,
        a snapshot of this round), written when the call is made (in the saves' thread, or here at a run's early end); a call
        that writes nothing for a run without a checkpoint."""
        self.saved_round = sim.round
        path = self.checkpoint
        if path is None:
            return lambda: None
        data = checkpoint_bytes({"simulation": sim.state_dict(), ROW_TEXTS: [r.text for r in self._encoded(self.records)]})
        return lambda: write_checkpoint(path, data)

    def _encoded(self, records: Sequence[RoundRecord]) -> list[_EncodedRecord]:
        """Each record's encodings, made once per record (a record is frozen): the result file, the checkpoint and the
        running ``metrics.parquet`` are rewritten with every round so far, and re-encoding the old rounds each time
        made the saves grow with the run."""
        cache = self._encodings
        out = []
        for record in records:
            known = cache.get(id(record))
            if known is None or known.record is not record:
                known = cache[id(record)] = _EncodedRecord(record)
            out.append(known)
        return out

    def _result_file(self, records: Sequence[RoundRecord], histogram: dict[str, int] | None = None) -> tuple[Path, dict[str, Any], str, list[str]]:
        """The arguments of :func:`~flamingo_sim.io.write_json_with_items` that write the result file with ``records``."""
        encoded = self._encoded(records)
        rows = [r.row for r in encoded]
        body = {"format": FORMAT, "policy": self.unit.policy, "seed": self.unit.seed, "done": histogram is not None,
                "rows": rows, "participation_histogram": histogram, **self.about}
        choice = getattr(getattr(getattr(self, "sim", None), "trainer", None), "choice", None)
        if choice is not None:  # train_mode auto on a GPU: what it chose, why, and the bound it checked
            body["train_mode"] = choice.record()
        return self.unit.path(".json"), body, "rows", [r.text for r in encoded]

    def write(self, records: Sequence[RoundRecord], histogram: dict[str, int] | None = None) -> list[dict[str, Any]]:
        """The result file, with ``records``, once the save in flight has landed; done once ``histogram`` is given. Its rows."""
        self.settle()
        result = self._result_file(records, histogram)
        write_json_with_items(*result)  # write_json's bytes
        return result[1]["rows"]


class _EncodedRecord:
    """A round's record as the unit's files hold it, each form made on first use and kept: :attr:`row` (its columns),
    :attr:`text` (its JSON in the result file and in the checkpoint, :func:`json_item_text`) and
    :attr:`written` (the row as the result file gives it back, :func:`as_written`)."""

    def __init__(self, record: RoundRecord) -> None:
        self.record = record
        self._row: dict[str, Any] | None = None
        self._text: str | None = None
        self._written: dict[str, Any] | None = None

    @property
    def row(self) -> dict[str, Any]:
        if self._row is None:
            self._row = self.record.to_row()
        return self._row

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = json_item_text(self.row)
        return self._text

    @property
    def written(self) -> dict[str, Any]:
        if self._written is None:
            self._written = as_written(self.row)
        return self._written


class _Status(Callback):
    """The unit's progress (``{"round": r, "rounds": R, "pid": its process}``) in a small file: when the unit
    begins, after its first round, after its last, and between them at most every :data:`STATUS_EVERY_S`: what a
    study's progress lines show, wherever the unit runs. The first round's write says the unit trains, however
    fast its rounds are (a unit of tiny rounds could otherwise go from round 0 to done between two writes)."""

    def __init__(self, path: Path) -> None:
        self.path, self.last, self.rounds_seen = path, 0.0, 0
        self.behind = WriteBehind("progress file")  # written behind the rounds, as the unit's saves are

    def _write(self, sim: Any) -> None:
        self.last = time.monotonic()
        text, path = json.dumps({"round": sim.round, "rounds": sim.rules.fl.rounds, "pid": os.getpid()}), self.path

        def write() -> None:
            with atomic_path(path) as tmp:
                tmp.write_text(text)

        self.behind.submit(write)

    def on_run_begin(self, sim: Any, records: Sequence[RoundRecord]) -> None:
        self._write(sim)

    def on_round_end(self, sim: Any, record: RoundRecord) -> bool:
        self.rounds_seen += 1
        if self.rounds_seen == 1 or time.monotonic() - self.last >= STATUS_EVERY_S or sim.is_done():
            self._write(sim)
        return False

    def on_run_end(self, sim: Any, records: Sequence[RoundRecord]) -> None:
        self.behind.wait()


def log_rates(sim: Simulation, log: Any) -> None:
    """Samples/s trained, and beside it samples/s decoded where the data is decoded from files."""
    if not sim.samples_trained or sim.train_wall_s <= 0:
        return
    line = f"{sim.policy_name} seed {sim.seed}: {sim.samples_trained / sim.train_wall_s:,.0f} samples/s trained on {sim.device}"
    decoded = getattr(sim.parts.dataset, "images_per_s", None)
    if decoded is not None and decoded == decoded:
        line += f", {decoded:,.0f} samples/s decoded ({getattr(sim.parts.dataset, 'workers', '?')} threads)"
    log(line)


