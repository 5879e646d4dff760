"""Running the paper's evaluation: the three shipped tasks, both policies, the same seeds.

Each task is one ``flamingo-sim run`` of its shipped experiment into ``OUT/runs/<task>/``, so
every number of the report can be read back from that run's ``metrics.parquet``. A task whose
run directory already exists is resumed (a finished one is just read back), so an interrupted
``reproduce`` continues where it stopped. The tasks are one study
(:mod:`flamingo_sim.studies.study`): their (task, seed, policy) units run one after another, as
``--jobs N`` processes of this machine, or as Ray tasks, with the same results. ``--quick`` shortens every task
(:data:`QUICK_OVERRIDES`) and runs :data:`QUICK_SEEDS` seeds; without it the shipped
experiments run as they are with :data:`DEFAULT_SEEDS` seeds.

Overrides are ``KEY=VALUE`` for every task or ``TASK:KEY=VALUE`` for one, e.g.
``openimage_mobilenet:data.root=/data/openimage`` to train on real OpenImage. Every task's
config (with its overrides) is loaded and validated before any run starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner.options import Execution
from flamingo_sim.studies.reproduce.paper import TASKS

if TYPE_CHECKING:
    from flamingo_sim.fl.runner.executors.progress import StudyPlan

__all__ = ["DEFAULT_SEEDS", "QUICK_SEEDS", "QUICK_OVERRIDES", "TaskRun", "task_overrides", "run_tasks", "count_units", "experiment_path"]

#: Seeds of a full reproduction (the bootstrap interval needs at least 2; 3 is the paper's usual).
DEFAULT_SEEDS = 3
#: Seeds of ``--quick``.
QUICK_SEEDS = 2
#: ``--quick``: fewer rounds, evaluated as often relative to the run (the rest as shipped).
QUICK_OVERRIDES: tuple[str, ...] = ("fl.rounds=40", "fl.eval_every=4")


@dataclass(frozen=True)
class TaskRun:
    """One task's finished run directory."""

    task: str
    run_dir: Path
    overrides: tuple[str, ...]
    n_seeds: int | None = None


def experiment_path(task: str) -> Path:
    """The shipped experiment YAML of ``task``."""
    from flamingo_sim.resources import shipped

    return shipped("experiments") / f"{task}.yaml"


def task_overrides(task: str, overrides: Sequence[str], quick: bool) -> tuple[str, ...]:
    """The ``--set`` list one task runs with: the quick ones, then the global ones, then its own."""
    own: list[str] = list(QUICK_OVERRIDES) if quick else []
    for item in overrides:
        head, sep, rest = item.partition(":")
        if sep and "=" not in head:
            if head not in TASKS:
                raise ConfigError(f"overrides: {item}: unknown task {head!r} (expected one of {', '.join(TASKS)})")
            if head == task:
                own.append(rest)
        else:
            own.append(item)
    return tuple(own)


def _seeds(tasks: Sequence[str], n_seeds: int | None, quick: bool) -> int:
    unknown = [t for t in tasks if t not in TASKS]
    if unknown or not tasks:
        raise ConfigError(f"tasks: expected some of {', '.join(TASKS)}, got {', '.join(unknown) or 'none'}")
    seeds = n_seeds if n_seeds is not None else (QUICK_SEEDS if quick else DEFAULT_SEEDS)
    if seeds < 1:
        raise ConfigError(f"n_seeds: expected a count >= 1, got {seeds}")
    return seeds


def count_units(tasks: Sequence[str], overrides: Sequence[str], quick: bool, n_seeds: int | None) -> int:
    """The (task, seed, policy) units :func:`run_tasks` would run with these arguments; every task's config is
    loaded and checked here (a bad one is one line naming the run, as the study says it)."""
    from flamingo_sim.fl.config import load_experiment, with_seeds

    seeds = _seeds(tasks, n_seeds, quick)
    units = 0
    for task in tasks:
        own = task_overrides(task, overrides, quick)
        try:
            cfg = with_seeds(load_experiment(experiment_path(task), own), seeds)
        except ConfigError as exc:
            raise ConfigError(f"reproduce: run {task}: {exc}") from None
        units += len(cfg.policies) * len(cfg.seeds)
    return units


def run_tasks(
    out_dir: str | Path,
    *,
    tasks: Sequence[str] = tuple(TASKS),
    n_seeds: int | None = None,
    quick: bool = False,
    overrides: Sequence[str] = (),
    log: Callable[[str], Any] | None = None,
    execution: Execution | None = None,
    again: str | None = None,
    phases: StudyPlan | None = None,
    after_unit: str = "",
    header: str | None = None,
) -> list[TaskRun]:
    """Run (or continue) every task into ``out_dir/runs/<task>`` as one study
    (:func:`~flamingo_sim.studies.study.run_study`: ``execution``, ``again``, ``after_unit``, ``header`` as there and ``phases``
    as its ``plan``); return where each went."""
    seeds = _seeds(tasks, n_seeds, quick)
    plan = [(t, task_overrides(t, overrides, quick)) for t in tasks]
    from flamingo_sim.fl.runner.forkserver import start_early_for

    ex = execution or Execution()
    start_early_for(ex.executor, ex.jobs)  # the workers' parent imports torch while this process imports the study and reads configs
    from flamingo_sim.studies.study import StudyRun, run_study

    runs = [StudyRun(task, experiment_path(task), own, seeds) for task, own in plan]
    results = run_study("reproduce", out_dir, runs, execution=execution, log=log, again=again, plan=phases, after_unit=after_unit,
                        header=header)
    from flamingo_sim.fl.metrics.summary import format_summary

    for i, ((task, _own), res) in enumerate(zip(plan, results), start=1):  # each summary named by its task
        print(f"== task {i}/{len(plan)}: {task} ({' / '.join(TASKS[task])}) ==", flush=True)
        print(format_summary(res.summary), flush=True)
    return [TaskRun(task, Path(out_dir) / "runs" / task, own, seeds) for task, own in plan]
