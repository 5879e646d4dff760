"""Real data for ``reproduce``: each data set found, packed once into ``OUT/packs/`` and shared by the tasks and seeds.

``reproduce --data-root DIR`` points every task at its data set under ``DIR``, found by FedScale's folder
names (:data:`FOLDERS`: ``DIR/open_images`` for both OpenImage tasks, ``DIR/google_speech`` for the
speech task); a task whose ``data.root`` is set already (``--set TASK:data.root=...`` or its experiment
file) keeps it. :func:`plan_data` then packs each data set the tasks read in FedScale's layout once
(``flamingo-sim pack-data``: decoded, resized, float16 arrays), one pack per (folder, packing settings),
so that the two OpenImage tasks at the same image size share one pack and every seed and policy reads
it: no image is decoded twice. The packs go to ``OUT/packs/<data set>-<image size>-<digest>/``; a
later invocation of the same study finds them there and reuses them (a run verifies its pack when it
opens it). A ``data.root`` that is a pack already is used as it is.

Every task's config (with the new ``data.root``) is loaded and checked before anything is packed.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from flamingo_sim.errors import ConfigError

__all__ = ["FOLDERS", "PACKS_DIR", "DataPlan", "find_data_set", "plan_data"]

#: FedScale's folder name(s) of each data set under ``--data-root`` (``benchmark/dataset/data/<folder>``), tried in order.
FOLDERS: dict[str, tuple[str, ...]] = {"openimage": ("open_images", "openimage"), "google_speech": ("google_speech",)}
#: Where the packs go, under the study's output directory.
PACKS_DIR = "packs"


@dataclass(frozen=True)
class DataPlan:
    """Each task's ``--set`` list with its ``data.root`` (the pack), and what was packed or reused."""

    overrides: dict[str, tuple[str, ...]]
    packs: dict[str, Path]  # task -> the pack it reads
    packed: dict[Path, dict[str, Any]]  # packs made now -> their clients, samples, bytes, seconds


def find_data_set(data_root: Path, name: str, task: str) -> Path:
    """The folder of data set ``name`` under ``data_root`` (one line naming what was looked for when none is there)."""
    folders = FOLDERS.get(name)
    if folders is None:
        raise ConfigError(f"--data-root: task {task} reads {name!r} data, which has no FedScale folder (known: {', '.join(FOLDERS)})")
    for folder in folders:
        if (data_root / folder).is_dir():
            return data_root / folder
    raise ConfigError(f"--data-root: {data_root}: no {' or '.join(folders)} folder for task {task} ({name} data in FedScale's layout)")


def _key(root: Path, settings: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps([str(root.resolve()), sorted(settings.items())], default=str).encode()).hexdigest()[:10]


def plan_data(tasks: Sequence[str], overrides: Mapping[str, tuple[str, ...]], out_dir: Path, data_root: str | Path | None,
              log: Callable[[str], None]) -> DataPlan:
    """Point each task at its data (``data_root``, or its own ``data.root``) and pack each data set once (module docstring).

    ``overrides``: each task's ``--set`` list as it would run; the tasks on the generated proxy
    (no ``data.root`` and no ``data_root``) are left as they are.
    """
    from flamingo_sim.fl.compose.datasets import pack_experiment, pack_settings
    from flamingo_sim.fl.config import load_experiment, resolve_path
    from flamingo_sim.fl.data.pipeline import is_packed
    from flamingo_sim.studies.reproduce.run import experiment_path

    root = Path(data_root).expanduser() if data_root is not None else None
    if root is not None and not root.is_dir():
        raise ConfigError(f"--data-root: {root}: not a directory")
    todo: dict[str, tuple[Path, str]] = {}  # pack key -> (source folder, first task reading it)
    new: dict[str, tuple[str, ...]] = {}
    wants: dict[str, tuple[Path, str] | Path] = {}
    for task in tasks:  # every config checked before anything is packed
        experiment = experiment_path(task)
        own = tuple(overrides.get(task, ()))
        cfg = load_experiment(experiment, own)
        if cfg.data.root is None and root is not None:
            own = (*own, f"data.root={find_data_set(root, cfg.data.name, task)}")
            cfg = load_experiment(experiment, own)
        new[task] = own
        if cfg.data.root is None or cfg.data.name not in FOLDERS:
            continue
        source = resolve_path(cfg.data.root, experiment)
        if not source.exists():
            raise ConfigError(f"{experiment}: data.root: {str(cfg.data.root)!r} not found (task {task})")
        if is_packed(source):
            wants[task] = source
            continue
        settings = pack_settings(cfg)
        key = f"{cfg.data.name}-{cfg.data.image_size}-{_key(source, settings)}"
        todo.setdefault(key, (source, task))
        wants[task] = (source, key)
    packs: dict[str, Path] = {}
    packed: dict[Path, dict[str, Any]] = {}
    made: dict[str, Path] = {}
    for key, (source, first) in todo.items():
        where = Path(out_dir) / PACKS_DIR / key
        if is_packed(where):
            log(f"data: {source} is packed already in {where}; reusing it")
        else:
            readers = sorted(t for t, w in wants.items() if isinstance(w, tuple) and w[1] == key)
            log(f"data: packing {source} once for {', '.join(readers)} into {where}")
            t0 = time.perf_counter()
            info = pack_experiment(experiment_path(first), where, [*new[first]], log=log)
            secs = time.perf_counter() - t0
            packed[where] = {"clients": info.n_clients, "samples": info.n_samples, "bytes": info.size_bytes, "seconds": round(secs, 1)}
            log(f"data: {info.describe()}; {secs:.1f} s")
        made[key] = where
    for task, want in wants.items():
        pack = want if isinstance(want, Path) else made[want[1]]
        packs[task] = pack
        if not isinstance(want, Path):
            new[task] = (*new[task], f"data.root={pack}")
    return DataPlan(new, packs, packed)
