"""A study: several runs of shipped or user experiments into one output directory, run as units.

``reproduce`` (three tasks) and ``sensitivity`` (a reference and one run per knob value) are
studies. A study is a list of :class:`StudyRun` (a name, an experiment, its ``--set`` list and
seeds), each an ordinary run directory ``OUT/runs/<name>/``; every (policy, seed) of every run
is a unit of work (:mod:`flamingo_sim.fl.runner.unit_files`), and all the study's units go to one
executor (:mod:`flamingo_sim.fl.runner.execute`): one after another here (``jobs=1``), as
processes of this machine (``jobs=N``) or as Ray tasks. The results do not depend on which.

What :func:`run_study` guarantees:

- every run's config is validated before anything is written (one line naming the run);
- ``OUT/.lock`` is held for the whole study and each run directory's lock as well, so a second
  study (or a ``run``) writing into them is refused naming the first one's PID;
- ``OUT/study.json`` says which command wrote the directory: the same command again continues
  it (finished units are read back, interrupted ones continue from their checkpoints, failed
  ones run again); a directory of another command, or of files this tool did not write, is refused;
- a unit that fails is reported (its error, run directory and log) while the others finish,
  and then :class:`StudyFailed` says how many failed and how to continue.
"""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from flamingo_sim.errors import ConfigError, FlamingoError, PoolLost
from flamingo_sim.faults import LOCK_FILE, check_writable, run_lock
from flamingo_sim.fl.runner.execute import StudyPlan, auto_jobs, check_executor, check_parallel, run_units
from flamingo_sim.fl.runner.executors import make_executor
from flamingo_sim.fl.runner.executors.base import Executor
from flamingo_sim.fl.runner.options import Execution
from flamingo_sim.fl.runner.plan import PreparedRun, build_first_parts, prepare_run
from flamingo_sim.fl.runner.results import RunResult, finish_run
from flamingo_sim.fl.runner.rundir import run_guard, write_resume_file
from flamingo_sim.fl.runner.unit_files import Unit, write_partial_metrics
from flamingo_sim.io import write_json

__all__ = ["StudyRun", "StudyFailed", "run_study", "check_study_out", "STUDY_FILE", "OWN_BEFORE"]

STUDY_FILE = "study.json"
#: What a study command may write into its output directory before the study starts (``reproduce``: the packed data sets).
OWN_BEFORE: dict[str, tuple[str, ...]] = {"reproduce": ("packs",)}


@dataclass(frozen=True)
class StudyRun:
    """One run of a study: ``OUT/runs/<name>/`` holds ``experiment`` run with ``overrides`` and ``n_seeds`` seeds."""

    name: str
    experiment: str | Path
    overrides: tuple[str, ...] = ()
    n_seeds: int | None = None


class StudyFailed(FlamingoError):
    """Some units failed (each said as it failed); the others finished and are kept."""


def check_study_out(out: Path, command: str) -> None:
    """``out`` is absent, empty, or a directory this study command wrote (then it is continued)."""
    check_writable(out)
    marker = out / STUDY_FILE
    if marker.is_file():
        try:
            wrote = json.loads(marker.read_text()).get("command")
        except (OSError, ValueError, AttributeError):
            wrote = None
        if wrote != command:
            raise ConfigError(f"{out}: holds a {wrote or 'damaged'} study ({STUDY_FILE}), not a {command} one; choose another --out")
        return
    own = {LOCK_FILE, *OWN_BEFORE.get(command, ())}
    entries = [p.name for p in out.iterdir() if p.name not in own] if out.is_dir() else []
    if entries and not (command == "reproduce" and (out / "runs").is_dir()):  # a reproduce OUT of before study.json
        raise ConfigError(f"{out}: output directory holds files flamingo-sim did not write for {command} "
                          f"({', '.join(sorted(entries)[:3])}); choose another --out")


def run_study(
    command: str,
    out_dir: str | Path,
    runs: Sequence[StudyRun],
    *,
    execution: Execution | None = None,
    log: Callable[[str], None] | None = None,
    again: str | None = None,
    plan: StudyPlan | None = None,
    after_unit: str = "",
    header: str | None = None,
) -> list[RunResult]:
    """Run (or continue) every run of the study into ``out_dir/runs/<name>``; their results, in order.

    ``command`` names the study (``reproduce``, ``sensitivity``): a directory written by another
    command is refused. ``execution``: where the units run
    (:class:`~flamingo_sim.fl.runner.options.Execution`; default one at a time here).
    Raises :class:`StudyFailed` after every unit ended when some failed. ``again``: the command
    that continues the study (said when it is interrupted or a unit failed). ``plan``: the phases of a study
    that runs several of these one after another (its progress then counts and estimates them all). ``after_unit``: every
    unit's :attr:`~flamingo_sim.fl.runner.units.Unit.after` (what the study does where a unit ends). ``header``: printed
    once every check has passed, before anything is written (a refusal is the only line: issue 50).
    """
    say: Callable[[str], Any] = log or (lambda msg: print(msg, file=sys.stderr))
    out = Path(out_dir)
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ConfigError(f"{command}: two runs named {next(n for n in names if names.count(n) > 1)!r}")
    check_study_out(out, command)
    execution = execution or Execution()
    check_executor(execution.executor, execution.ray_address)
    executor, ray_address = execution.executor, execution.ray_address
    runner = make_executor(executor)
    if execution.jobs != 1:
        runner.warm_up(execution.jobs or 2)  # the pool's parent imports torch while the runs' configs are read
    prepared: list[PreparedRun] = []
    quiet: Callable[[str], None] = lambda _m: None  # noqa: E731 - the runs' set-up lines, said once by the study
    for r in runs:
        run_dir = out / "runs" / r.name
        resume = (run_dir / "config.yaml").is_file()
        try:
            prepared.append(prepare_run(r.experiment, r.overrides, r.n_seeds, run_dir, resume=resume, say=quiet, label=r.name, build=False))
        except ConfigError as exc:
            also = f"; or start a new {command} with another --out" if resume else ""
            raise ConfigError(f"{command}: run {r.name}: {exc}{also}") from None
    jobs = auto_jobs([p.cfg for p in prepared]) if execution.jobs is None else execution.jobs
    check_parallel(prepared, jobs, executor)
    units = [replace(u, after=after_unit) for p in prepared for u in p.units(jobs)]
    try:
        _validate(command, runs, prepared, units, runner, jobs)
    except PoolLost as exc:
        raise FlamingoError(f"{exc}; nothing was written; " + (f"run it again with: {again}" if again else f"run the same {command} again")) from None
    how = f"finished units are kept; continue it with: {again}" if again else f"finished units are kept; run the same {command} again"
    if header is not None:
        print(header, flush=True)
    with run_lock(out), ExitStack() as held:
        held.callback(runner.close)  # what validation kept, if the units do not run
        check_study_out(out, command)  # again, under the lock: another writer may have been first
        write_json(out / STUDY_FILE, {"command": command, "runs": names})
        if again:
            write_resume_file(out, again)
        for p in prepared:
            held.enter_context(run_guard(p.out, p.cfg, p.experiment, resume=(p.out / "config.yaml").is_file(), resumable=p.resumable,
                                         how=how))
        resumed = sum((p.out / "units").is_dir() for p in prepared)
        say(f"{command}: {len(prepared)} run(s), {len(units)} units into {out}" + (f" ({resumed} run(s) continued)" if resumed else ""))
        with _EarlyFinish(jobs > 1 or executor != "local", quiet) as early:
            failures = run_units(prepared, units, jobs=jobs, executor=executor, ray_address=ray_address, say=say, shared_dir=out,
                                 on_run_done=early.submit, plan=plan)
            results = {str(p.out): early.result(p) for p in prepared if str(p.out) not in {f.unit.run_dir for f in failures}}
        if failures:
            for p in prepared:  # the runs that did finish have their metrics and summary; the others their rounds so far
                if str(p.out) not in results:
                    write_partial_metrics(p.out, p.cfg)
            first = failures[0]
            raise StudyFailed(f"{len(failures)} of {len(units)} units failed, first {first.unit.label}: {first.error} "
                              f"(log {first.unit.path('.log')}); the other units finished and are kept; {how.partition('; ')[2]}")
        return [results[str(p.out)] for p in prepared]


def _validate(command: str, runs: Sequence[StudyRun], prepared: Sequence[PreparedRun], units: Sequence[Unit], runner: Executor,
              jobs: int) -> None:
    """The last check of every run, before anything is written: its first seed's components built,
    on the executor's workers where it builds them (in parallel, kept there for the units), else here."""
    first = [next(u for u in units if u.run_dir == str(p.out) and u.seed == p.cfg.seeds[0]) for p in prepared]
    errors = runner.validate(first, jobs)
    for r, p, unit in zip(runs, prepared, first):
        if errors is None:
            try:
                build_first_parts(p, lambda _m: None)
            except ConfigError as exc:
                raise ConfigError(f"{command}: run {r.name}: {exc}") from None
        elif unit in errors:
            raise ConfigError(f"{command}: run {r.name}: {errors[unit]}")


class _EarlyFinish:
    """A run's metrics and summary written (:func:`finish_run`) on a thread of this process as soon as
    its last unit finished, while the workers run the other runs' units (``active``: units run
    elsewhere; with ``jobs=1`` here, they would only take turns with the units); else at the end."""

    def __init__(self, active: bool, say: Callable[[str], None]) -> None:
        from concurrent.futures import Future, ThreadPoolExecutor

        self.say = say
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="finish-run") if active else None
        self.futures: dict[str, Future[RunResult]] = {}

    def __enter__(self) -> "_EarlyFinish":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def submit(self, run: PreparedRun) -> None:
        if self.pool is not None:
            self.futures[str(run.out)] = self.pool.submit(finish_run, run, self.say, print_summary=False)

    def result(self, run: PreparedRun) -> RunResult:
        """The run's result: the one written early, else written now."""
        future = self.futures.get(str(run.out))
        return future.result() if future is not None else finish_run(run, self.say, print_summary=False)
