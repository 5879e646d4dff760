"""The run directory's guard: one writer, decided before the work, clean after a kill.

:func:`check_run_dir` runs before anything is built (the location is writable; a new run goes
into an absent or empty directory; a resume into a run directory). :func:`run_guard` then holds
the directory's lock for the whole run, re-checks under the lock, removes temporary files a
killed writer left, records (new run: the resolved config in ``config.yaml``, the record the run's
units build from, and the inputs' checksums) or verifies (resume) them, and turns an interruption or
a full disk into a message that says how to continue.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from flamingo_sim.config import to_mapping
from flamingo_sim.errors import ConfigError, FlamingoError, PluginError, PoolLost
from flamingo_sim.faults import (
    LOCK_FILE,
    check_writable,
    describe_os_error,
    is_disk_full,
    run_lock,
)
from flamingo_sim.fl.runner.inputs import check_inputs, config_diff, record_inputs
from flamingo_sim.io import _LEGACY_TEMP, _TEMP, atomic_path, clean_stale

if TYPE_CHECKING:
    from flamingo_sim.fl.config import ExperimentConfig

__all__ = ["check_run_dir", "run_guard", "default_out_dir", "resume_command", "RESUME_FILE", "write_resume_file"]

#: The file of a run (or study) directory that holds the command continuing it, written when the work starts: the
#: line an interruption prints can be lost (``... 2>&1 | tee log``: Ctrl-C ends tee too), the directory keeps it.
RESUME_FILE = "resume.txt"


def write_resume_file(out: Path, command: str) -> None:
    """``out/resume.txt``: the command that continues the work in ``out``, one line."""
    with atomic_path(out / RESUME_FILE) as tmp:
        tmp.write_text(command + "\n")


def default_out_dir(cfg: ExperimentConfig) -> Path:
    """Where a run goes without ``out_dir``: ``runs/<name>-<timestamp>``."""
    return Path("runs") / f"{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def resume_command(experiment: str, out: Path, overrides: Sequence[str] = (), n_seeds: int | None = None,
                   engine: str = "native", executors: int = 0, jobs: int | None = 1) -> str:
    """The command line that continues a run started from the library: ``experiment`` as the command
    line would name it, every override as a ``--set``, and the other arguments that shaped the run."""
    argv = ["run", experiment, "--out", str(out), *[a for s in overrides for a in ("--set", s)]]
    if n_seeds is not None:
        argv += ["--seeds", str(n_seeds)]
    if engine != "native":
        argv += ["--engine", engine]
    if executors:
        argv += ["--executors", str(executors)]
    if jobs != 1:
        argv += ["--jobs", "auto" if jobs is None else str(jobs)]
    return "flamingo-sim " + shlex.join([*argv, "--resume"])


def _outputs(out: Path) -> list[str]:
    """Entries of ``out`` other than the lock file and temporary files."""
    if not out.is_dir():
        return []
    return [p.name for p in out.iterdir() if p.name != LOCK_FILE and not (_TEMP.match(p.name) or _LEGACY_TEMP.match(p.name))]


def check_run_dir(out: Path, cfg: ExperimentConfig, resume: bool) -> None:
    """Before any work: ``out`` can be written, and is empty (new run) or a run directory (resume)."""
    check_writable(out)
    if resume:
        _check_resumable(out, cfg)
    elif _outputs(out):
        raise ConfigError(f"{out}: run directory exists and is not empty (continue it with resume, or choose another out_dir)")


NEW_KEY = " (not in the run)"


def _at_default(cfg: Any, dotted: str) -> bool:
    """Whether the config key ``dotted`` (of a dataclass config) holds its field's default."""
    import dataclasses

    obj = cfg
    *parents, last = dotted.split(".")
    for name in parents:
        obj = getattr(obj, name, None)
    if obj is None or not dataclasses.is_dataclass(obj):
        return False
    f = next((f for f in dataclasses.fields(obj) if f.name == last), None)
    if f is None:
        return False
    if f.default is not dataclasses.MISSING:
        return bool(getattr(obj, last) == f.default)
    if f.default_factory is not dataclasses.MISSING:
        return bool(getattr(obj, last) == f.default_factory())
    return False


def _check_resumable(out: Path, cfg: ExperimentConfig) -> None:
    saved = out / "config.yaml"
    if not saved.is_file():
        raise ConfigError(f"{out}: not a run directory (no config.yaml) - nothing to resume")
    diff = config_diff(yaml.safe_load(saved.read_text()), to_mapping(cfg))
    # a key added since the run started, left at its default, is what the run did: not a difference
    diff = [d for d in diff if not (d.endswith(NEW_KEY) and _at_default(cfg, d[: -len(NEW_KEY)]))]
    if diff:
        more = f" and {len(diff) - 3} more" if len(diff) > 3 else ""
        raise ConfigError(
            f"{out}: the experiment config differs from the one this run started with in {', '.join(diff[:3])}{more}; "
            "resume with the same config and overrides"
        )


@contextlib.contextmanager
def run_guard(out: Path, cfg: ExperimentConfig, experiment: str | Path | None, *, resume: bool, resumable: bool = True,
              how: str | None = None, engine: str = "FedScale", again: str | None = None,
              record: Mapping[str, Any] | None = None) -> Iterator[None]:
    """Hold ``out``'s lock; write ``config.yaml`` (``record``, default :func:`~flamingo_sim.fl.compose.config_record`
    of ``cfg``) and ``inputs.json`` (new run) or verify them (resume), and :data:`RESUME_FILE` with the command
    that continues the run where its engine can resume it.

    ``resumable``: whether the engine writes checkpoints (what the message on an interruption says,
    naming ``engine`` when it does not); ``again``: the command that continues the run (default: the
    directory and experiment with ``--resume``); ``how``: what that message says instead (a study is
    continued by its own command).
    """
    with run_lock(out):
        check_run_dir(out, cfg, resume)  # again, under the lock: another writer may have been first
        clean_stale(out, recursive=True)
        if resume:
            check_inputs(out, cfg, experiment)
        else:  # inputs first: config.yaml marks a run directory that can be resumed
            record_inputs(out, cfg, experiment)
            if record is None:
                from flamingo_sim.fl.compose import config_record  # torch: the run has imported it by now

                record = config_record(cfg, experiment)
            with atomic_path(out / "config.yaml") as tmp:
                tmp.write_text(yaml.safe_dump(dict(record), sort_keys=False))
        if how is not None:
            pass
        elif resumable:
            command = again or resume_command(str(experiment), out)
            write_resume_file(out, command)
            how = f"continue it with: {command}"
        else:
            how = f"this run keeps no checkpoints ({engine}): start it again with another out_dir"
        try:
            yield
        except KeyboardInterrupt as exc:
            exc.hint = how  # type: ignore[attr-defined]  # printed by the CLI
            clean_stale(out, recursive=True, mine=True)  # the write the signal cut short (its workers are stopped by now)
            raise
        except PoolLost as exc:  # a pool's forkserver that cannot be started again: what died, then how to continue
            raise FlamingoError(f"{exc}; {how}") from None
        except PluginError as exc:  # a plug-in broke its contract mid-run: once it is fixed, the run continues from its checkpoint
            raise PluginError(f"{exc}; fix it, then {how}" if resumable and "continue it with: " not in str(exc) else str(exc)) from None
        except OSError as exc:
            if is_disk_full(exc):
                raise FlamingoError(f"{describe_os_error(exc)}; {how}") from None
            raise

