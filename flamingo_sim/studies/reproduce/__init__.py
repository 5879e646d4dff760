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
- :mod:`~flamingo_sim.studies.reproduce.mechanisms` past the default: the model's mechanisms one at a time, and the stragglers;
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

    ``execution``: where the (task, seed, policy) units run (:mod:`flamingo_sim.studies.study`); ``again``: the command
    that continues an interrupted run. ``readings``: ``default`` or ``paper`` (:mod:`flamingo_sim.fl.readings`, set
    before ``overrides``); ``paper`` also runs Appendix B's explore-then-share reading of exploration (into
    ``out_dir/explore_then_share``) and reports both. ``attribution``: also run the walk from the paper's readings to the
    default (:mod:`~flamingo_sim.studies.reproduce.attribution`, into ``out_dir/attribution/<config>``, reusing the main
    runs where they are one of its configurations) and on past the default into the model's mechanisms
    (:mod:`~flamingo_sim.studies.reproduce.mechanisms`, into ``out_dir/mechanisms/<variant>``), and add "Why our
    Table 2 differs from the paper's". ``data_root``: the folder holding FedScale's data sets (each task reads its own
    under it); that data, or any task's own ``data.root`` in FedScale's layout, is packed once into ``out_dir/packs``
    and shared (:mod:`~flamingo_sim.studies.reproduce.data`)."""
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.fl.readings import EXPLORE_THEN_SHARE, readings_overrides
    from flamingo_sim.studies.reproduce.paper import TASKS
    from flamingo_sim.studies.reproduce.run import count_units, experiment_path, run_tasks, task_overrides

    own = readings_overrides(readings)  # checks the name before anything runs
    todo = tuple(tasks or TASKS)
    overrides = (*overrides, *_packed_data(todo, (*own, *overrides), quick, Path(out_dir), data_root, log))
    # the study's phases, each a set of runs into its own folder: every config checked and counted before anything runs
    phases: list[tuple[str, Path, tuple[str, ...]]] = [
        (f"baseline and Flamingo, {'the paper' if readings == 'paper' else 'the simulator'}'s readings", Path(out_dir), (*own, *overrides))]
    ets_dir = None
    if readings == "paper":  # the paper's other reading of exploration: Appendix B's explore-then-share
        ets_dir = Path(out_dir) / "explore_then_share"
        phases.append(("the paper's readings with Appendix B's explore-then-share", ets_dir, (*EXPLORE_THEN_SHARE, *overrides)))
    where: dict[str, Path] = {}
    variants: dict[str, Any] = {}
    if attribution:
        from flamingo_sim.studies.reproduce.attribution import run_configs
        from flamingo_sim.studies.reproduce.mechanisms import mechanism_configs

        for name, config in run_configs().items():
            if config == own:  # the main runs are this configuration
                where[name] = Path(out_dir)
            else:
                where[name] = Path(out_dir) / "attribution" / name
                phases.append((f"attribution, configuration {name!r}", where[name], (*config, *overrides)))
        mix = load_experiment(experiment_path(todo[0]), task_overrides(todo[0], (*own, *overrides), quick)).phones.mix
        variants = mechanism_configs(mix if isinstance(mix, dict) else {})  # from_traces: no fixed shares to leave one out of
        for name, m in variants.items():
            phases.append((f"mechanism: {m.label}", Path(out_dir) / "mechanisms" / name, (*m.overrides, *overrides)))
    counts = [count_units(todo, ov, quick, n_seeds) for _t, _d, ov in phases]
    from flamingo_sim.fl.runner.executors.progress import StudyPlan  # torch: after every config is checked

    plan = StudyPlan([(title, n) for (title, _d, _o), n in zip(phases, counts)])
    common: dict[str, Any] = dict(tasks=todo, n_seeds=n_seeds, quick=quick, log=log, execution=execution, again=again, phases=plan)
    from flamingo_sim.studies.reproduce.detail import HOOK

    ran = []
    for i, (_title, folder, ov) in enumerate(phases):  # each phase's header once its checks passed (a refusal: one line)
        ran.append(run_tasks(folder, overrides=ov, after_unit=HOOK if i == 0 else "", header=plan.start(i), **common))
    done = ran[0]
    walks = mech = None
    if attribution:
        from flamingo_sim.fl.runner.results import load_run
        from flamingo_sim.studies.reproduce.attribution import attribute
        from flamingo_sim.studies.reproduce.mechanisms import mechanism_steps

        walks = [attribute(t, {name: load_run(d / "runs" / t)[0] for name, d in where.items()}) for t in todo]
        default_dir = where["default"]
        mech = {t: mechanism_steps(t, load_run(default_dir / "runs" / t)[0],
                                   {n: load_run(Path(out_dir) / "mechanisms" / n / "runs" / t)[0] for n in variants}, variants)
                for t in todo}
    from flamingo_sim.fl.compose import profile_dirs  # torch and matplotlib: after every argument and config is checked
    from flamingo_sim.studies.reproduce.write import load_results, write_reproduction

    first = experiment_path(done[0].task)
    cfg = load_experiment(first, done[0].overrides)
    profiles = profile_dirs(cfg, first)
    construction = {d.task: _construction(load_experiment(experiment_path(d.task), d.overrides), profiles) for d in done}
    results = load_results([(d.task, d.run_dir) for d in done], construction)
    explore = load_results([(d.task, ets_dir / "runs" / d.task) for d in done], construction) if ets_dir is not None else None
    from flamingo_sim.report.plots import FIGURES
    from flamingo_sim.report.write import FORMATS
    from flamingo_sim.studies.reproduce.detail import clear_claims, ensure_task_figures

    details = {d.task: ensure_task_figures(Path(out_dir), d.run_dir, str(experiment_path(d.task)), d.overrides, d.n_seeds, tuple(FIGURES),
                                           FORMATS) for d in done}  # each drawn as its run finished; any missing, now
    report = write_reproduction(results, out_dir, quick=quick, profiles=profiles, overrides={d.task: d.overrides for d in done},
                                profile_set=cfg.phones.profile_set, readings=readings, walks=walks, mechanisms=mech,
                                explore_then_share=explore, details=details)
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


def _construction(cfg: Any, profiles: Any) -> dict[str, dict[str, Any]]:
    """Per phone of the task's fleet: the owner's loss while training runs the baseline's placement (unpinned) and
    Flamingo's chosen execution (pinned), with where the threads run (Table 3's "by construction" column)."""
    from flamingo_sim.devices.pricing import TABLE3_PCMARK_PCT
    from flamingo_sim.devices.scheduling import contention, stall_share

    catalogue = profiles.phones()
    model = cfg.policy.interference
    out = {}
    mix = cfg.phones.mix
    for name in (mix if isinstance(mix, dict) else sorted(catalogue)):
        prof = profiles.load(name, cfg.model, phones=catalogue, profile_set=cfg.phones.profile_set)
        base = contention(prof.phone, prof.baseline.cores, False, model, prof.baseline.step_latency_s, cfg.model,
                          stall_share(prof, prof.baseline.cores))
        best = contention(prof.phone, prof.best.cores, True, model, prof.best.step_latency_s, cfg.model, stall_share(prof, prof.best.cores))
        given = model.owner_loss == "paper" and name in TABLE3_PCMARK_PCT  # Table 3 as input: the row says so
        b_loss = -TABLE3_PCMARK_PCT[name][0] / 100 if given else base.foreground_loss
        f_loss = -TABLE3_PCMARK_PCT[name][1] / 100 if given else best.foreground_loss
        out[name] = {"baseline": (b_loss, base.placement.describe(), base.owner_cpu_loss > 0),
                     "flamingo": (prof.best.label, f_loss, best.placement.describe(), best.owner_cpu_loss > 0), "given": given}
    return out
