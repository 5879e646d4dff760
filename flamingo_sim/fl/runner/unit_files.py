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
trusted: the unit runs again); :class:`RunResults` keeps a run's finished units as they finish, each
read once, and writes ``metrics.parquet`` from them in the config's order (seeds, then policies), so
that it does not depend on which unit finished first; :func:`gather` reads every unit at once, and
:func:`write_partial_metrics` writes the rounds done so far (what an interrupted run leaves).
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
           "write_partial_metrics", "RunResults"]

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
    """One (policy, seed) of a run directory, and the run's resolved config it builds from in any process.

    ``experiment``: a shipped experiment's name or an absolute path (the same on every node), where
    the config's relative paths and plug-in modules are looked for; the unit never reads it again.
    ``config``: the run's resolved config as JSON, the record its run directory keeps in ``config.yaml``
    (:func:`flamingo_sim.fl.compose.config_record`): what the unit builds from wherever it runs (empty:
    the run directory's ``config.yaml``).
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
    config: str = ""  # the run's resolved config as JSON, as config.yaml records it (empty: read config.yaml)

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


class RunResults:
    """A run's finished units in the process that holds its directory, each result file read back once,
    and its ``metrics.parquet`` written from them: once as each unit finishes (:meth:`write`; a unit
    still running in this process adds its rows so far, every ``checkpoint_every`` rounds), then the
    summary made from them (:meth:`gather`) without reading a unit again."""

    def __init__(self, run_dir: Path, cfg: ExperimentConfig) -> None:
        self.run_dir, self.cfg = Path(run_dir), cfg
        self.done: dict[tuple[str, int], dict[str, Any]] = {}
        #: ``metrics.parquet`` holds every unit, finished: nothing left to write.
        self.complete = False

    def _order(self) -> list[tuple[str, int]]:
        return [(policy, seed) for seed in self.cfg.seeds for policy in self.cfg.policies]

    def take(self, policy: str, seed: int) -> bool:
        """Whether the unit has finished; its result read back the first time it has (and kept)."""
        if (policy, seed) not in self.done:
            res = unit_result(self.run_dir / UNITS_DIR, policy, seed)
            if res is None:
                return False
            self.done[(policy, seed)] = res
        return True

    def write(self, running: tuple[str, int, list[dict[str, Any]]] | None = None) -> None:
        """``metrics.parquet`` of the finished units taken so far and, ``running``, a running unit's
        ``(policy, seed, rows)`` so far, in the config's order (nothing when there is no row)."""
        rows = self._rows(running)
        self.write_rows(rows)
        self.complete = running is None and len(self.done) == len(self._order())

    def running_rows(self, policy: str, seed: int, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows :meth:`write` would write with a running unit's rows so far: the finished units taken and the running
        one's, in the config's order, in a new list (the rows themselves are never changed), for :meth:`write_rows` to write
        later, in another thread (:class:`~flamingo_sim.fl.runner.units.UnitSaver`)."""
        self.complete = False
        return self._rows((policy, seed, rows))

    def write_rows(self, rows: list[dict[str, Any]]) -> None:
        """``metrics.parquet`` of ``rows`` (nothing when there is none)."""
        if rows:
            write_metrics(self.run_dir, pd.DataFrame(rows))

    def _rows(self, running: tuple[str, int, list[dict[str, Any]]] | None) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for key in self._order():
            if key in self.done:
                rows += self.done[key]["rows"]
            elif running is not None and key == running[:2]:
                rows += running[2]
        return rows

    def gather(self) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
        """:func:`gather` of the units taken, reading only those not taken yet (a :class:`FlamingoError`
        names the first that has not finished)."""
        for policy, seed in self._order():
            if not self.take(policy, seed):
                raise FlamingoError(f"{self.run_dir}: unit {unit_name(policy, seed)} has not finished")
        results = [self.done[key] for key in self._order()]
        return pd.DataFrame([row for res in results for row in res["rows"]]), results


def write_partial_metrics(run_dir: Path, cfg: ExperimentConfig) -> None:
    """``metrics.parquet`` of the rounds the units have written so far (nothing if none has)."""
    metrics, _ = gather(run_dir, cfg, partial=True)
    if len(metrics):
        write_metrics(run_dir, metrics)
