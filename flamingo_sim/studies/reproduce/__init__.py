"""``flamingo-sim reproduce``: the paper's evaluation in one command.

- :mod:`~flamingo_sim.studies.reproduce.run`     the three tasks, both policies, the same seeds (``--quick`` shortens them);
- :mod:`~flamingo_sim.studies.reproduce.data`    real data (``--data-root``): each data set packed once, shared by the tasks and seeds;
- :mod:`~flamingo_sim.studies.reproduce.detail`  each task's detailed figures, drawn where its last unit finished;
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
    data_root: str | Path | None = None,
) -> Path:
    """Run (or resume) the paper's tasks into ``out_dir/runs/`` and write the report; returns ``report.md``.

    ``execution``: where the (task, seed, policy) units
    run (:mod:`flamingo_sim.studies.study`); ``again``: the command that continues an interrupted run.
    ``readings``: ``default`` or ``paper`` (:mod:`flamingo_sim.fl.readings`, set before ``overrides``; ``paper`` also
    runs EAS for Table 3, into ``out_dir/eas``); ``attribution``: also run the walk from the paper's readings to the
    default (:mod:`~flamingo_sim.studies.reproduce.attribution`, into ``out_dir/attribution/<config>``, reusing the
    main runs where they are one of its configurations) and add "Why our Table 2 differs from the paper's".
    ``data_root``: the folder holding FedScale's data sets (each task reads its own under it); that data, or any
    task's own ``data.root`` in FedScale's layout, is packed once into ``out_dir/packs`` and shared
    (:mod:`~flamingo_sim.studies.reproduce.data`)."""
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.fl.readings import readings_overrides, reproduce_settings
    from flamingo_sim.studies.reproduce.paper import TASKS
    from flamingo_sim.studies.reproduce.run import experiment_path, run_tasks

    own = readings_overrides(readings)  # checks the name before anything runs
    against = reproduce_settings(readings)["table3_against"]
    todo = tuple(tasks or TASKS)
    overrides = (*overrides, *_packed_data(todo, (*own, *overrides), quick, Path(out_dir), data_root, log))
    common: dict[str, Any] = dict(tasks=todo, n_seeds=n_seeds, quick=quick, log=log, execution=execution, again=again)
    from flamingo_sim.studies.reproduce.detail import HOOK

    done = run_tasks(out_dir, overrides=(*own, *overrides), after_unit=HOOK, **common)
    eas_dirs: dict[str, Path] = {}
    if against == "eas":  # Table 3 as the paper compared it: EAS on the same tasks, seeds and readings
        eas = run_tasks(Path(out_dir) / "eas", overrides=(*own, *overrides, "policies=[eas]"), **common)
        eas_dirs = {d.task: d.run_dir for d in eas}
    walks = None
    if attribution:
        from flamingo_sim.fl.runner.results import load_run
        from flamingo_sim.studies.reproduce.attribution import attribute, run_configs

        where: dict[str, Path] = {}
        for name, config in run_configs().items():
            if config == own:
                where[name] = Path(out_dir)
                continue
            where[name] = Path(out_dir) / "attribution" / name
            run_tasks(where[name], overrides=(*config, *overrides), **common)
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
    from flamingo_sim.report.plots import FIGURES
    from flamingo_sim.report.write import FORMATS
    from flamingo_sim.studies.reproduce.detail import clear_claims, ensure_task_figures

    details = {d.task: ensure_task_figures(Path(out_dir), d.run_dir, str(experiment_path(d.task)), d.overrides, d.n_seeds, tuple(FIGURES),
                                           FORMATS) for d in done}  # each drawn as its run finished; any missing, now
    report = write_reproduction(results, out_dir, quick=quick, profiles=profiles, overrides={d.task: d.overrides for d in done},
                                profile_set=cfg.phones.profile_set, readings=readings, table3_against=against, walks=walks,
                                details=details)
    clear_claims(Path(out_dir))
    return report


def _packed_data(tasks: Sequence[str], overrides: Sequence[str], quick: bool, out: Path, data_root: str | Path | None,
                 log: Callable[[str], Any] | None) -> list[str]:
    """``TASK:data.root=PACK`` for each task on real data, each data set packed once (:func:`~flamingo_sim.studies.reproduce.data.plan_data`)."""
    import sys

    from flamingo_sim.errors import ConfigError
    from flamingo_sim.studies.reproduce.data import plan_data
    from flamingo_sim.studies.reproduce.paper import TASKS
    from flamingo_sim.studies.reproduce.run import task_overrides

    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ConfigError(f"tasks: expected some of {', '.join(TASKS)}, got {', '.join(unknown)}")
    per = {t: task_overrides(t, overrides, quick) for t in tasks}
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if data_root is None and not any(o.startswith("data.root=") for own in per.values() for o in own):
        return []  # every task on the generated proxy
    from flamingo_sim.studies.study import check_study_out

    check_study_out(out, "reproduce")  # before anything is written into it
    plan = plan_data(tasks, per, out, data_root, say)
    return [f"{t}:{o}" for t in tasks for o in plan.overrides[t][len(per[t]):]]

