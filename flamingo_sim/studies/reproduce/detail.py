"""Each task's detailed figures (the ``report`` figures of its run), drawn as soon as its run is complete.

Every unit of a ``reproduce`` study carries :data:`HOOK` (:attr:`~flamingo_sim.fl.runner.unit_files.Unit.after`): in
the process that ran the unit (a ``--jobs N`` worker, a Ray task, or the study's own process with ``--jobs 1``),
:func:`draw_when_complete` checks whether every unit of the task's run has finished and, if so, draws the task's
figures into ``OUT/figures/<task>/`` (:func:`draw_task`). With several jobs a task's figures are thus drawn by the
worker that finished its last unit while the other tasks' units still run, not all at the end. A task whose
figures are not there when the report is written (its last unit ran in an earlier invocation, or the drawing
failed or was cut short) is drawn then (:func:`ensure_task_figures`). Both read the same thing, the run's unit
results (:func:`~flamingo_sim.fl.runner.unit_files.gather`) and the summary made from them, so the files are the
same whichever process drew them and however many jobs ran.

Two processes finishing a task's last two units at once both see the run complete; an exclusive claim file
(``OUT/figures/.<task>.claim``, removed with the report) lets one of them draw.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from flamingo_sim.errors import FlamingoError

if TYPE_CHECKING:  # importing this module (for HOOK) must not import torch: a study's arguments are checked first
    from flamingo_sim.fl.config import ExperimentConfig
    from flamingo_sim.fl.runner.unit_files import Unit

__all__ = ["HOOK", "FIGURES_DIR", "draw_when_complete", "draw_task", "ensure_task_figures", "figures_dir", "clear_claims"]

#: The units' hook (``Unit.after``).
HOOK = "flamingo_sim.studies.reproduce.detail:draw_when_complete"
#: Where the tasks' figures go, under the study's output directory.
FIGURES_DIR = "figures"


def figures_dir(study_out: Path, task: str) -> Path:
    return Path(study_out) / FIGURES_DIR / task


def _study_out(run_dir: Path) -> Path:
    return Path(run_dir).parent.parent  # OUT/runs/<task>


def draw_task(run_dir: Path, experiment: str, overrides: tuple[str, ...], n_seeds: int | None, engine: str = "native",
              cfg: ExperimentConfig | None = None) -> dict[str, list[Path]] | None:
    """Draw the task of ``run_dir`` into ``OUT/figures/<task>/`` from its units' results; None if some unit has not finished.
    ``cfg``: the run's config (default: the one its directory records, never the experiment file again)."""
    import torch

    from flamingo_sim.fl.runner.results import run_summary
    from flamingo_sim.fl.runner.unit_files import gather
    from flamingo_sim.fl.runner.units import recorded_config
    from flamingo_sim.io import as_written
    from flamingo_sim.report.data import Run
    from flamingo_sim.report.write import write_report

    run_dir = Path(run_dir)
    cfg = recorded_config(run_dir) if cfg is None else cfg
    try:
        metrics, results = gather(run_dir, cfg)
    except FlamingoError:
        return None
    summary = run_summary(cfg, metrics, results, engine, torch.backends.cpu.get_cpu_capability())
    summary = as_written(summary)  # as summary.json has it
    task = run_dir.name
    report = write_report([Run(run_dir, task, metrics, summary)], figures_dir(_study_out(run_dir), task))
    return report.figures


def _claim(study_out: Path, task: str) -> bool:
    """Whether this process may draw ``task`` (the first to ask does)."""
    folder = Path(study_out) / FIGURES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(folder / f".{task}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


def clear_claims(study_out: Path) -> None:
    """Remove the claim files (the report is written: every task's figures are there)."""
    folder = Path(study_out) / FIGURES_DIR
    if folder.is_dir():
        for claim in folder.glob(".*.claim"):
            claim.unlink(missing_ok=True)


def draw_when_complete(unit: Unit, say: Callable[[str], None]) -> None:
    """The units' hook: draw the unit's task once all its units have finished (see the module docstring)."""
    from flamingo_sim.fl.runner.unit_files import UNITS_DIR, unit_result
    from flamingo_sim.fl.runner.units import unit_config

    run_dir = Path(unit.run_dir)
    cfg = unit_config(unit)  # the run's record, which the unit carries
    if any(unit_result(run_dir / UNITS_DIR, p, s) is None for s in cfg.seeds for p in cfg.policies):
        return
    if not _claim(_study_out(run_dir), run_dir.name):
        return
    if draw_task(run_dir, unit.experiment, unit.overrides, unit.n_seeds, unit.engine, cfg=cfg) is not None:
        say(f"{run_dir.name}: figures drawn in {figures_dir(_study_out(run_dir), run_dir.name)}")


def ensure_task_figures(study_out: Path, run_dir: Path, experiment: str, overrides: tuple[str, ...], n_seeds: int | None,
                        stems: tuple[str, ...], formats: tuple[str, ...]) -> dict[str, list[Path]]:
    """The task's figures, by stem: those drawn already when each of ``stems`` is there in every format, else drawn now."""
    folder = figures_dir(study_out, Path(run_dir).name)
    have = {stem: [folder / f"{stem}.{fmt}" for fmt in formats] for stem in stems}
    if all(p.is_file() for paths in have.values() for p in paths) and (folder / "report.md").is_file():
        return have
    drawn = draw_task(Path(run_dir), experiment, overrides, n_seeds)
    if drawn is None:
        raise FlamingoError(f"{run_dir}: not every unit has finished; its figures cannot be drawn")
    return drawn
