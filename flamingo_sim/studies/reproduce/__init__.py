"""``flamingo-sim reproduce``: the paper's evaluation in one command.

- :mod:`~flamingo_sim.studies.reproduce.run`     the three tasks, both policies, the same seeds (``--quick`` shortens them);
- :mod:`~flamingo_sim.studies.reproduce.tables`  Tables 1-3 and the comparison bases, from profiles and metrics;
- :mod:`~flamingo_sim.studies.reproduce.ux`      the user-experience measure of Table 3 (one swappable function);
- :mod:`~flamingo_sim.studies.reproduce.figure`  the Figure 6 analogue;
- :mod:`~flamingo_sim.studies.reproduce.write`   ``report.md``, ``report.html``, figures and ``tables.json``;
- :mod:`~flamingo_sim.studies.reproduce.paper`   the paper's published numbers set beside ours;
- :mod:`~flamingo_sim.studies.reproduce.attribution` the walk from the paper's readings to the default (``--attribution``);
- :mod:`~flamingo_sim.studies.reproduce.why`     its table, waterfall and report section, and the docs' generated blocks.
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
    readings: str = "default",
    attribution: bool = False,
) -> Path:
    """Run (or resume) the paper's tasks into ``out_dir/runs/`` and write the report; returns ``report.md``.

    ``execution``: where the (task, seed, policy) units
    run (:mod:`flamingo_sim.studies.study`); ``again``: the command that continues an interrupted run.
    ``readings``: ``default`` or ``paper`` (:mod:`flamingo_sim.fl.readings`, set before ``overrides``; ``paper`` also
    runs EAS for Table 3, into ``out_dir/eas``); ``attribution``: also run the walk from the paper's readings to the
    default (:mod:`~flamingo_sim.studies.reproduce.attribution`, into ``out_dir/attribution/<config>``, reusing the
    main runs where they are one of its configurations) and add "Why our Table 2 differs from the paper's"."""
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.fl.readings import readings_overrides, reproduce_settings
    from flamingo_sim.studies.reproduce.paper import TASKS
    from flamingo_sim.studies.reproduce.run import count_units, experiment_path, run_tasks

    own = readings_overrides(readings)  # checks the name before anything runs
    against = reproduce_settings(readings)["table3_against"]
    todo = tuple(tasks or TASKS)
    # the study's phases, each a set of runs into its own folder: every config checked and counted before anything runs
    phases: list[tuple[str, Path, tuple[str, ...]]] = [
        (f"baseline and Flamingo, {'the paper' if readings == 'paper' else 'the simulator'}'s readings", Path(out_dir), (*own, *overrides))]
    if against == "eas":  # Table 3 as the paper compared it: EAS on the same tasks, seeds and readings
        phases.append(("EAS, Table 3 as the paper compared it", Path(out_dir) / "eas", (*own, *overrides, "policies=[eas]")))
    where: dict[str, Path] = {}
    if attribution:
        from flamingo_sim.studies.reproduce.attribution import run_configs

        for name, config in run_configs().items():
            if config == own:  # the main runs are this configuration
                where[name] = Path(out_dir)
            else:
                where[name] = Path(out_dir) / "attribution" / name
                phases.append((f"attribution, configuration {name!r}", where[name], (*config, *overrides)))
    counts = [count_units(todo, ov, quick, n_seeds) for _t, _d, ov in phases]
    from flamingo_sim.fl.runner.executors.progress import StudyPlan  # torch: after every config is checked

    plan = StudyPlan([(title, n) for (title, _d, _o), n in zip(phases, counts)])
    common: dict[str, Any] = dict(tasks=todo, n_seeds=n_seeds, quick=quick, log=log, execution=execution, again=again, phases=plan)
    ran = []
    for i, (_title, folder, ov) in enumerate(phases):
        print(plan.start(i), flush=True)
        ran.append(run_tasks(folder, overrides=ov, **common))
    done = ran[0]
    eas_dirs: dict[str, Path] = {d.task: d.run_dir for d in ran[1]} if against == "eas" else {}
    walks = None
    if attribution:
        from flamingo_sim.fl.runner.results import load_run
        from flamingo_sim.studies.reproduce.attribution import attribute

        walks = [attribute(t, {name: load_run(d / "runs" / t)[0] for name, d in where.items()}) for t in todo]
    from flamingo_sim.fl.runner.compose import profile_dirs  # torch and matplotlib: after every argument and config is checked
    from flamingo_sim.studies.reproduce.write import load_results, write_reproduction

    first = experiment_path(done[0].task)
    cfg = load_experiment(first, done[0].overrides)
    profiles = profile_dirs(cfg, first)
    catalogue = profiles.phones()
    slowdowns = {}
    for d in done:  # each phone's foreground slowdown as the task ran it (Table 3's intensity)
        model = load_experiment(experiment_path(d.task), d.overrides).policy.interference
        slowdowns[d.task] = {name: model.foreground_slowdown_for(phone.soc.shared_core_slowdown) for name, phone in catalogue.items()}
    results = load_results([(d.task, d.run_dir) for d in done], slowdowns, eas_dirs)
    return write_reproduction(results, out_dir, quick=quick, profiles=profiles, overrides={d.task: d.overrides for d in done},
                              profile_set=cfg.phones.profile_set, readings=readings, table3_against=against, walks=walks)
