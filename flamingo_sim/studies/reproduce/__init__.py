"""``flamingo-sim reproduce``: the paper's evaluation in one command.

- :mod:`~flamingo_sim.studies.reproduce.run`     the three tasks, both policies, the same seeds (``--quick`` shortens them);
- :mod:`~flamingo_sim.studies.reproduce.tables`  Tables 1-3 and the comparison bases, from profiles and metrics;
- :mod:`~flamingo_sim.studies.reproduce.ux`      the user-experience measure of Table 3 (one swappable function);
- :mod:`~flamingo_sim.studies.reproduce.figure`  the Figure 6 analogue;
- :mod:`~flamingo_sim.studies.reproduce.write`   ``report.md``, ``report.html``, figures and ``tables.json``;
- :mod:`~flamingo_sim.studies.reproduce.paper`   the paper's published numbers set beside ours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from flamingo_sim.fl.runner.options import Execution

__all__ = ["reproduce"]


def reproduce(
    out_dir: str | Path,
    *,
    n_seeds: int | None = None,
    quick: bool = False,
    tasks: Sequence[str] | None = None,
    overrides: Sequence[str] = (),
    log: Callable[[str], Any] | None = None,
    execution: Execution | None = None,
    again: str | None = None,
) -> Path:
    """Run (or resume) the paper's tasks into ``out_dir/runs/`` and write the report; returns ``report.md``.

    ``execution``: where the (task, seed, policy) units
    run (:mod:`flamingo_sim.studies.study`); ``again``: the command that continues an interrupted run."""
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.studies.reproduce.paper import TASKS
    from flamingo_sim.studies.reproduce.run import experiment_path, run_tasks

    done = run_tasks(out_dir, tasks=tuple(tasks or TASKS), n_seeds=n_seeds, quick=quick, overrides=overrides, log=log,
                     execution=execution, again=again)
    from flamingo_sim.fl.runner.compose import profile_dirs  # torch and matplotlib: after every argument and config is checked
    from flamingo_sim.studies.reproduce.write import load_results, write_reproduction

    first = experiment_path(done[0].task)
    cfg = load_experiment(first, done[0].overrides)
    profiles = profile_dirs(cfg, first)
    catalogue = profiles.phones()
    slowdowns = {}
    for d in done:  # each phone's shared_core_slowdown as the task ran it (Table 3's intensity)
        model = load_experiment(experiment_path(d.task), d.overrides).policy.interference
        slowdowns[d.task] = {name: model.slowdown_for(phone.soc.shared_core_slowdown) for name, phone in catalogue.items()}
    results = load_results([(d.task, d.run_dir) for d in done], slowdowns)
    return write_reproduction(results, out_dir, quick=quick, profiles=profiles, overrides={d.task: d.overrides for d in done},
                              profile_set=cfg.phones.profile_set)
