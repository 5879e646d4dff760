"""How a run or a study runs: the frozen options :func:`~flamingo_sim.fl.runner.run.run_experiment` and the study commands take.

- :class:`Execution`  where the (policy, seed) units run: how many at a time (``jobs``), on which
  executor (``local`` processes or ``ray``) and which Ray cluster; shared by ``run_experiment``,
  ``run_study``, ``reproduce`` and ``run_sensitivity``;
- :class:`RunOptions` everything else one run is asked for besides its experiment file: its
  directory, ``--set`` overrides, seeds, resume, engine, device, threads, its
  :class:`Execution` and the collectives' timeout of a torchrun group.

What a run computes comes from its experiment file and overrides; these options say only where
and how it runs (with the same results whatever they are, except ``n_seeds``, ``device`` and
``threads``, which are overrides by another name).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from flamingo_sim.config import FieldError, check_ranges
from flamingo_sim.errors import ConfigError

if TYPE_CHECKING:
    from flamingo_sim.fl.config import ExperimentConfig

__all__ = ["Execution", "RunOptions"]


@dataclass(frozen=True)
class Execution:
    """Where a run's or a study's units run (:mod:`flamingo_sim.fl.runner.execute`); the results do not depend on it."""

    #: Units at a time; None: as many as the usable cores allow (``--jobs auto``).
    jobs: int | None = 1
    #: ``local`` (processes of this machine, or this process with one job) or ``ray``.
    executor: str = "local"
    #: The Ray cluster to join (``--ray-address``); None: a local Ray.
    ray_address: str | None = None

    def __post_init__(self) -> None:
        _checked(self, jobs=">= 1")

    @property
    def here(self) -> bool:
        """One unit at a time in this process."""
        return self.jobs == 1 and self.executor == "local"


@dataclass(frozen=True)
class RunOptions:
    """One run's options besides its experiment (the ``flamingo-sim run`` flags)."""

    #: The run directory; None: ``runs/<name>-<timestamp>``.
    out_dir: str | Path | None = None
    #: ``key=value`` overrides of the experiment, as ``--set``.
    overrides: tuple[str, ...] = ()
    #: Seeds from the experiment's first; None: the experiment's own list.
    n_seeds: int | None = None
    #: Continue the run in ``out_dir`` (checkpoints, finished units).
    resume: bool = False
    #: What runs each simulation's rounds: ``native``, ``fedscale`` or ``flower``.
    engine: str = "native"
    #: FedScale executor processes (0: in-process).
    executors: int = 0
    #: ``fl.device`` by another name (``--device``).
    device: str | None = None
    #: ``fl.threads`` by another name (``--threads``).
    threads: int | None = None
    #: Where the units run.
    execution: Execution = field(default_factory=Execution)
    #: Seconds before a collective of a torchrun group times out (None: the default).
    collective_timeout_s: float | None = None
    #: The command that continues the run, for the line an interruption or a failure prints (the
    #: command line passes the command typed); None: one built from these options.
    again: str | None = None
    #: Asked, with the estimate, whether a run estimated longer than a day should go on
    #: (:mod:`flamingo_sim.fl.runner.estimate`); None: such a run is refused.
    confirm: Callable[[str], bool] | None = None
    #: The experiment as the caller already read it, with these overrides and seeds (the command line reads it
    #: before importing torch): the run takes it instead of reading the file again; None: the run reads it.
    config: ExperimentConfig | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "overrides", tuple(self.overrides))
        # n_seeds, executors, threads and collective_timeout_s are checked where they are used (resolve_config,
        # make_engine, the fl section, the process group), each with its one message

    def with_fields(self, **changes: object) -> RunOptions:
        """These options with ``changes`` (field names, and ``jobs``/``executor``/``ray_address`` of
        :attr:`execution`); an unknown name is a :class:`~flamingo_sim.errors.ConfigError` naming it."""
        own = {f.name for f in fields(self)}
        of_execution = {f.name for f in fields(Execution)}
        unknown = sorted(set(changes) - own - of_execution)
        if unknown:
            raise ConfigError(f"run_experiment: unknown option {unknown[0]!r} (known: {', '.join(sorted(own | of_execution))})")
        execution = replace(self.execution, **{k: v for k, v in changes.items() if k in of_execution})  # type: ignore[arg-type]
        return replace(self, execution=execution, **{k: v for k, v in changes.items() if k in own})  # type: ignore[arg-type]

    def all_overrides(self) -> list[str]:
        """``overrides`` with ``device`` and ``threads`` appended as the ``--set`` they stand for."""
        out = list(self.overrides)
        if self.device is not None:
            out.append(f"fl.device={self.device}")
        if self.threads is not None:
            out.append(f"fl.threads={self.threads}")
        return out


def _checked(options: object, **rules: str) -> None:
    """:func:`~flamingo_sim.config.check_ranges` with the option's name in a :class:`ConfigError`."""
    try:
        check_ranges(options, **rules)
    except FieldError as exc:
        raise ConfigError(f"{type(options).__name__}: {exc}") from None
