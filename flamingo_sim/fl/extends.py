"""``extends:``: an experiment built on another one, a shipped experiment or a file, with keys overridden.

An experiment file may start from another::

    extends: openimage_mobilenet       # a shipped experiment's name, or a file (relative to this one)
    name: my_charging_study
    policies: [baseline, "my_policy:ChargingPolicy"]
    fl: {rounds: 20}

The merge: the base's keys, then this file's on top. Where both give a mapping (a section such as
``fl``), the two merge key by key the same way, so ``fl: {rounds: 20}`` changes ``fl.rounds`` and
keeps the base's other ``fl`` keys; any other value (a list such as ``policies``, a number, a string,
``null``) replaces the base's whole. The base may itself extend another; a file met twice on the way
is a cycle, refused in one line. ``--set`` overrides apply after the merge, and the whole is then
checked as one experiment (errors name the file you ran). Set your own ``name``: the run directory
is named after it (else after the base's).

Relative paths in the merged experiment (``traces.path``, ``data.root``, a plug-in's module) are
looked for beside the file you ran, then beside each file it extends, then among the shipped data
(:func:`experiment_files` lists those files; :func:`flamingo_sim.fl.config.resolve_path`).
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from flamingo_sim.config import load_yaml
from flamingo_sim.errors import ConfigError
from flamingo_sim.resources import shipped, shipped_experiments

__all__ = ["EXTENDS", "load_extended", "experiment_files", "merge"]

#: The key that names the experiment a file builds on.
EXTENDS = "extends"


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` on top: mappings in both merged key by key, any other value of ``over`` replacing the base's."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _base_of(path: Path, value: Any) -> Path:
    """The file ``extends: value`` in ``path`` names: a file relative to ``path``'s folder (or absolute), else a shipped experiment's name."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{path}: extends: expected the name of a shipped experiment or a path to an experiment file, got {value!r}")
    candidate = path.parent / value
    if candidate.is_file():
        return candidate
    named = Path(value)
    if len(named.parts) == 1:
        found = shipped("experiments") / (named.name if named.suffix == ".yaml" else f"{named.name}.yaml")
        if found.is_file():
            return found
    raise ConfigError(f"{path}: extends: no experiment file {value!r} (looked for {candidate}) and no shipped experiment of that name "
                      f"(shipped: {', '.join(shipped_experiments())})")


def _chain(path: str | Path) -> list[tuple[Path, dict[str, Any]]]:
    """The file and every file it extends, nearest first, each with its own mapping (``extends`` removed)."""
    chain: list[tuple[Path, dict[str, Any]]] = []
    seen: list[Path] = []
    current: Path | None = Path(path)
    while current is not None:
        real = current.resolve()
        if real in seen:
            names = " -> ".join(str(p) for p in [*seen, real])
            raise ConfigError(f"{chain[-1][0]}: extends: a cycle ({names}); an experiment cannot extend itself")
        seen.append(real)
        data = load_yaml(current)
        value = data.pop(EXTENDS, None)
        chain.append((current, data))
        current = None if value is None else _base_of(current, value)
    return chain


def load_extended(path: str | Path) -> dict[str, Any]:
    """The experiment file's mapping with everything it extends merged in (module docstring), ``extends`` removed."""
    chain = _chain(path)
    data: dict[str, Any] = {}
    for _, own in reversed(chain):
        data = merge(data, own)
    return data


def experiment_files(path: str | Path) -> list[Path]:
    """The experiment file and every file it extends, nearest first (just the file when it extends nothing or cannot be read)."""
    try:
        stamp = Path(path).stat().st_mtime_ns
    except OSError:
        return [Path(path)]
    return list(_files(str(path), stamp))


@functools.lru_cache(maxsize=64)
def _files(path: str, _stamp: int) -> tuple[Path, ...]:
    """:func:`experiment_files` of ``path`` as it was at modification time ``_stamp`` (read once per version)."""
    try:
        return tuple(p for p, _ in _chain(path))
    except ConfigError:
        return (Path(path),)
