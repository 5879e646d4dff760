"""Where the shipped data and the user's own files live.

Shipped with the package (``importlib.resources``, so a wheel installed anywhere has them):
the phone catalogue and profiles (``profiles``), the trace set (``traces/synthetic``) and the
experiments (``experiments``), under :func:`data_root`. In the source tree the entries of
``flamingo_sim/data/`` are links to the top-level ``profiles/``, ``traces/`` and
``experiments/``; building a wheel copies the files they point to.

The user's own files (profiles measured with ``flamingo-sim profile``) go under
:func:`user_home`: ``$FLAMINGO_SIM_HOME`` if set, else ``$XDG_DATA_HOME/flamingo-sim``, else
``~/.local/share/flamingo-sim``; never into the shipped folders.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

from flamingo_sim.errors import ConfigError, FlamingoError

__all__ = ["data_root", "shipped", "user_home", "user_profiles_dir", "find_experiment", "shipped_experiments", "name_shipped"]


def data_root() -> Path:
    """The folder holding the shipped ``profiles/``, ``traces/`` and ``experiments/``."""
    root = files("flamingo_sim").joinpath("data")
    if not isinstance(root, Path):  # a zipped install: the simulator reads these as files
        raise FlamingoError("flamingo-sim's data files are not on disk (zipped install?); install it unpacked with pip")
    return root


def shipped(relative: str | Path) -> Path:
    """A shipped file or folder, e.g. ``shipped("traces/synthetic")``."""
    return data_root() / relative


def user_home() -> Path:
    """The user's flamingo-sim folder (``$FLAMINGO_SIM_HOME``, else the XDG data folder)."""
    if os.environ.get("FLAMINGO_SIM_HOME"):
        return Path(os.environ["FLAMINGO_SIM_HOME"]).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "flamingo-sim"


def user_profiles_dir() -> Path:
    """Where ``flamingo-sim profile`` writes measured profiles by default."""
    return user_home() / "profiles"


def shipped_experiments() -> list[str]:
    """The names of the shipped experiments (``flamingo-sim run NAME``)."""
    return sorted(p.stem for p in shipped("experiments").glob("*.yaml"))


def find_experiment(experiment: str | Path) -> Path:
    """An experiment file: ``experiment`` as a path if it exists, else a shipped experiment by name.

    ``openimage_mobilenet`` (or ``openimage_mobilenet.yaml``) names the shipped
    ``experiments/openimage_mobilenet.yaml`` from any directory.
    """
    path = Path(experiment)
    if path.exists() or len(path.parts) != 1:
        return path
    candidate = shipped("experiments") / (path.name if path.suffix == ".yaml" else f"{path.name}.yaml")
    if candidate.is_file():
        return candidate
    raise ConfigError(f"{experiment}: no such experiment file, and no shipped experiment of that name "
                      f"(shipped: {', '.join(shipped_experiments())})")


def name_shipped(message: str) -> str:
    """``message`` with every path of a shipped experiment (inside the installed package, where the user
    never typed it) replaced by the experiment's name, which is what ``flamingo-sim run NAME`` takes."""
    import re

    try:
        folder = shipped("experiments")
    except FlamingoError:
        return message
    names = "|".join(re.escape(n) for n in sorted(shipped_experiments(), key=len, reverse=True))
    if not names:
        return message
    return re.sub(rf"{re.escape(str(folder))}/({names})\.yaml(?![\w./-])", r"\1", message)
