"""What the notebooks need besides figures: where the repository is, and a small run of their own.

A notebook given no run directory calls :func:`ensure_small_run`, which runs the shipped
OpenImage/MobileNetV2 experiment scaled down (about half a minute on two cores) into
``runs/notebook-small`` and reuses it on the next execution.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

__all__ = ["repo_root", "repo_path", "ensure_small_run", "SMALL_RUN_OVERRIDES", "SMALL_RUN_SEEDS"]

#: The scaled-down run the notebooks make when given none: 3 seeds x 2 policies.
SMALL_RUN_OVERRIDES: tuple[str, ...] = (
    "fl.rounds=20",
    "fl.participants_per_round=20",
    "fl.local_steps=10",
    "fl.eval_every=2",
    "data.proxy.n_clients=2000",
)
SMALL_RUN_SEEDS = 3


def repo_root() -> Path:
    """The checkout holding ``experiments/`` and ``traces/``: beside the package, else the working directory or a parent."""
    import flamingo_sim

    candidates = [Path(flamingo_sim.__file__).resolve().parents[1], Path.cwd(), *Path.cwd().parents]
    for c in candidates:
        if (c / "experiments").is_dir() and (c / "traces").is_dir():
            return c
    from flamingo_sim.errors import FlamingoError

    raise FlamingoError("cannot find the flamingo-sim checkout (a folder with experiments/ and traces/); pass paths explicitly")


def repo_path(relative: str | Path) -> Path:
    """``relative`` inside the checkout, e.g. ``repo_path("traces/synthetic")``."""
    return repo_root() / relative


def ensure_small_run(
    out_dir: str | Path | None = None,
    *,
    experiment: str | Path | None = None,
    overrides: Sequence[str] = SMALL_RUN_OVERRIDES,
    n_seeds: int = SMALL_RUN_SEEDS,
) -> Path:
    """A finished small run directory: ``out_dir`` (default ``runs/notebook-small``) if it has one, else run it now.

    A run that was interrupted part-way is resumed from its checkpoints.
    """
    import os
    import warnings

    out = Path(out_dir) if out_dir is not None else repo_path("runs/notebook-small")
    if (out / "summary.json").is_file() and (out / "metrics.parquet").is_file():
        return out
    from flamingo_sim.fl.runner.run import run_experiment  # torch: only when a run is needed

    experiment = experiment if experiment is not None else repo_path("experiments/openimage_mobilenet.yaml")
    resume = (out / "config.yaml").is_file()
    quiet = os.environ.get("FLAMINGO_SIM_QUIET")
    os.environ["FLAMINGO_SIM_QUIET"] = "1"  # no progress bars in notebook outputs
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm.auto in a kernel without ipywidgets
            run_experiment(experiment, out_dir=out, overrides=list(overrides), n_seeds=n_seeds, resume=resume, log=lambda _m: None)
    finally:
        if quiet is None:
            del os.environ["FLAMINGO_SIM_QUIET"]
        else:
            os.environ["FLAMINGO_SIM_QUIET"] = quiet
    return out
