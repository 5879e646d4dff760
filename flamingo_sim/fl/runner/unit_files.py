"""A unit's files in its run directory, read back and gathered into the run's ``metrics.parquet``.

A run directory (:mod:`flamingo_sim.fl.runner.run`) holds every (policy, seed) of one
experiment; each is a :class:`Unit`, run by :func:`flamingo_sim.fl.runner.units.run_unit`
wherever it runs. A unit writes only its own files, so units of one run directory can run at the
same time:

- ``units/<policy>-seed<k>.json``   the unit's metrics rows and what the summary needs from its
  run (participation histogram, data description, model size); ``"done": false`` while it runs
  (rewritten every ``checkpoint_every`` rounds), ``true`` once it has finished;
- ``units/<policy>-seed<k>.status`` its progress (round, rounds, process id), for the study's progress lines;
- ``units/<policy>-seed<k>.log``    its log, when it runs in another process;
- ``checkpoints/<policy>-seed<k>.pt`` its checkpoint (native engine, ``fl.mode: sync``).

:func:`unit_result` reads a result file back (a file of another format, or not finished, is not
trusted: the unit runs again); :func:`gather` reads a run's units in the config's order (seeds,
then policies), so ``metrics.parquet`` does not depend on which unit finished first;
:func:`write_partial_metrics` writes the rounds done so far (what a killed run leaves).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from flamingo_sim.errors import FlamingoError
from flamingo_sim.fl.config import ExperimentConfig
from flamingo_sim.io import atomic_path

__all__ = ["UNITS_DIR", "FORMAT", "Unit", "unit_name", "unit_result", "read_status", "safe_name", "gather", "write_metrics",
           "write_partial_metrics"]

UNITS_DIR = "units"
#: The result file's format (a file of another format is not trusted: the unit runs again).
FORMAT = 1


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def unit_name(policy: str, seed: int) -> str:
    """The stem of a unit's files: ``<policy>-seed<k>``, the policy's name made safe for a file name."""
    return f"{safe_name(policy)}-seed{seed}"


@dataclass(frozen=True)
class Unit:
    """One (policy, seed) of a run directory, and how to build its config again in any process.

    ``experiment``: a shipped experiment's name or an absolute path (the same on every node).
    ``threads``: the CPU threads the unit may use (its share of the cores: torch's thread
    budget in a worker process, the CPUs a Ray task asks for); ``gpu``: it trains on a CUDA GPU;
    ``cost``: its relative work, for the order in which units start (not their results);
    ``device``: its ``fl.device`` as configured (``auto`` and ``cuda`` train on the GPU a ``--jobs N``
    pool gives the worker); ``after``: ``package.module:function`` called with ``(unit, say)`` once the unit has
    finished, in the process that ran it (a study's per-run work done where the run ends:
    ``reproduce`` draws a task's figures when its last unit is done); its errors are said, not raised.
    """

    experiment: str  # a shipped experiment's name or an absolute path
    overrides: tuple[str, ...]  # the run's --set overrides
    n_seeds: int | None  # the run's --seeds (None: the experiment's own)
    run_dir: str  # the run directory, which every worker must be able to write
    policy: str  # the policy, as the experiment names it
    seed: int  # the seed
    label: str  # how progress lines name the unit
    engine: str = "native"  # what runs its rounds
    executors: int = 0  # FedScale's executor processes
    threads: int = 1  # the CPU threads it may use
    gpu: bool = False  # it trains on a CUDA GPU
    cost: float = 1.0  # relative work (rounds x clients x steps): the costliest units start first
    after: str = ""  # package.module:function called with (unit, say) once it has finished, where it ran
    device: str = "cpu"  # fl.device as configured: a pool gives each worker its own GPU for "auto" and "cuda"

    @property
    def name(self) -> str:
        return unit_name(self.policy, self.seed)

    def path(self, suffix: str) -> Path:
        """``RUN_DIR/units/<policy>-seed<k><suffix>``."""
        return Path(self.run_dir) / UNITS_DIR / f"{self.name}{suffix}"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Unit":
        raw = json.loads(text)
        raw["overrides"] = tuple(raw["overrides"])
        return cls(**raw)


def unit_result(unit_dir: Path, policy: str, seed: int, *, done_only: bool = True) -> dict[str, Any] | None:
    """The unit's result file read back and checked (None if absent, unfinished or not trustworthy)."""
    path = unit_dir / f"{unit_name(policy, seed)}.json"
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = (isinstance(raw, dict) and raw.get("format") == FORMAT and raw.get("policy") == policy and raw.get("seed") == seed
          and isinstance(raw.get("rows"), list) and all(isinstance(r, dict) for r in raw["rows"]))
    if not ok or (done_only and raw.get("done") is not True):
        return None
    return raw


def read_status(unit: Unit) -> tuple[int, int | None] | None:
    """``(round, rounds)`` of a running unit (None before its first write)."""
    try:
        raw = json.loads(unit.path(".status").read_text())
        return int(raw["round"]), (None if raw["rounds"] is None else int(raw["rounds"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def gather(run_dir: Path, cfg: ExperimentConfig, *, partial: bool = False) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Every unit's rows in the config's order (seeds, then policies) and their results.

    ``partial``: take what each unit has written so far (finished or not, absent ones left
    out); otherwise every unit must have finished (a :class:`FlamingoError` names the first that has not).
    """
    rows: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for seed in cfg.seeds:
        for policy in cfg.policies:
            res = unit_result(run_dir / UNITS_DIR, policy, seed, done_only=not partial)
            if res is None:
                if partial:
                    continue
                raise FlamingoError(f"{run_dir}: unit {unit_name(policy, seed)} has not finished")
            rows += res["rows"]
            results.append(res)
    return pd.DataFrame(rows), results


def write_metrics(out: Path, metrics: pd.DataFrame) -> None:
    with atomic_path(out / "metrics.parquet") as tmp:
        metrics.to_parquet(tmp, index=False)


def write_partial_metrics(run_dir: Path, cfg: ExperimentConfig) -> None:
    """``metrics.parquet`` of the rounds the units have written so far (nothing if none has)."""
    metrics, _ = gather(run_dir, cfg, partial=True)
    if len(metrics):
        write_metrics(run_dir, metrics)
