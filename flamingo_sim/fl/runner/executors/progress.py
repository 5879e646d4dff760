"""A study's progress (units done, running, failed, the time left) and a failed unit's one line.

Every executor (:mod:`flamingo_sim.fl.runner.executors.base`) reports each unit's start, end
and failure to one :class:`Progress`; a unit that did not finish is a :class:`Failure`.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from flamingo_sim.errors import FlamingoError
from flamingo_sim.fl.runner.unit_files import UNITS_DIR, Unit, read_status, unit_result

__all__ = ["Failure", "Progress", "StudyPlan", "one_line"]


@dataclass(frozen=True)
class Failure:
    """A unit that did not finish, and why (one line)."""

    unit: Unit
    error: str

    def describe(self) -> str:
        return f"{self.unit.label} failed: {self.error} (run directory {self.unit.run_dir}, log {self.unit.path('.log')})"


@dataclass
class StudyPlan:
    """A study run as several phases, one after another (``reproduce --readings paper --attribution``: the paper's
    readings, EAS, the attribution's configurations), each its own set of units: what each phase's
    :class:`Progress` needs to count and estimate the whole study, not only its own phase.

    :meth:`start` names the phase now running (its header, for stdout); the finished units' wall
    times accumulate in :attr:`durations` across the phases, so a phase's estimate starts from the
    earlier ones'."""

    #: Each phase's title and its units, in the order they run.
    phases: list[tuple[str, int]]
    #: The phase running (0-based).
    index: int = 0
    #: Wall seconds of every unit finished so far in this process, all phases.
    durations: list[float] = field(default_factory=list)

    def start(self, index: int) -> str:
        """Phase ``index`` (0-based) starts: its header line, "== phase 2 of 4: EAS runs (6 units) =="."""
        self.index = index
        title, units = self.phases[index]
        return f"== phase {index + 1} of {len(self.phases)}: {title} ({units} units) =="

    @property
    def total(self) -> int:
        return sum(n for _t, n in self.phases)

    @property
    def before(self) -> int:
        """Units of the phases before the running one."""
        return sum(n for _t, n in self.phases[: self.index])

    @property
    def after(self) -> int:
        """Units of the phases after the running one."""
        return sum(n for _t, n in self.phases[self.index + 1:])


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """Units done, running and failed, and the time left estimated from the finished ones.

    On a terminal, one line per running unit and a total, redrawn in place; otherwise a line
    when a unit starts, ends or fails, and the total every :attr:`every_s` seconds.
    ``show=False``: only failures are said (a single run's own progress bars show the rest).
    """

    every_s = 30.0

    def __init__(self, total: int, done: int, jobs: int, say: Callable[[str], None], *, show: bool = True,
                 stream: Any = None, on_finish: Callable[[Unit], None] | None = None, plan: StudyPlan | None = None) -> None:
        self.total, self.done, self.jobs, self.say, self.show = total, done, jobs, say, show
        #: The study's phases, when this is one of several (the counts and the estimate then cover them all).
        self.plan = plan
        #: Called with each unit that finished (after its line): what its run can do with it already.
        self.on_finish = on_finish
        self.stream = sys.stderr if stream is None else stream
        self.tty = show and hasattr(self.stream, "isatty") and self.stream.isatty() and not os.environ.get("FLAMINGO_SIM_QUIET")
        self.failed: list[Failure] = []
        self.running: dict[Unit, float] = {}
        self.durations: list[float] = plan.durations if plan is not None else []
        self.drawn = 0
        self.last_total = time.monotonic()

    def _fraction(self, unit: Unit) -> float:
        status = read_status(unit)
        if status is None or not status[1]:
            return 0.0
        return min(1.0, status[0] / status[1])

    def eta_s(self) -> float | None:
        """Seconds left: the mean finished unit's wall time times the work left (with a :class:`StudyPlan`, the
        later phases' units too), over the jobs."""
        if not self.durations:
            return None
        mean = sum(self.durations) / len(self.durations)
        queued = self.total - self.done - len(self.failed) - len(self.running) + (self.plan.after if self.plan is not None else 0)
        left = queued * mean + sum(max(0.0, mean * (1.0 - self._fraction(u))) for u in self.running)
        return left / max(1, min(self.jobs, queued + len(self.running)))

    def summary(self) -> str:
        eta = self.eta_s()
        plan = self.plan
        done, total = (self.done, self.total) if plan is None else (plan.before + self.done, plan.before + self.total + plan.after)
        whole = "" if plan is None or len(plan.phases) == 1 else f" of the study (phase {plan.index + 1} of {len(plan.phases)})"
        left = self.running or done < total
        return (f"units{whole}: {done}/{total} done, {len(self.running)} running, {len(self.failed)} failed"
                + ("" if eta is None or not left else f", about {_clock(eta)} left"))

    def _line(self, msg: str) -> None:
        self._erase()
        if self.show:
            self.say(msg)

    def start(self, unit: Unit) -> None:
        """``unit`` has started (its line says so, or that it resumes from its checkpoint)."""
        self.running[unit] = time.monotonic()
        if not self.tty:
            partial = unit_result(Path(unit.run_dir) / UNITS_DIR, unit.policy, unit.seed, done_only=False)
            last = max((int(r.get("round", 0)) for r in partial["rows"]), default=0) if partial is not None else 0
            what = f"resuming from round {last + 1}" if last else "started"
            self._line(f"[{self.done + len(self.failed) + len(self.running)}/{self.total}] {unit.label}: {what}")

    def finish(self, unit: Unit) -> None:
        """``unit`` has finished: its result file says done."""
        t0 = self.running.pop(unit, None)
        if t0 is not None:
            self.durations.append(time.monotonic() - t0)
        self.done += 1
        if not self.tty:
            self._line(f"{unit.label}: done ({self.summary()})")
        if self.on_finish is not None:
            self.on_finish(unit)

    def fail(self, unit: Unit, error: str) -> None:
        """``unit`` failed with ``error`` (one line, said at once); the others go on."""
        self.running.pop(unit, None)
        failure = Failure(unit, error)
        self.failed.append(failure)
        self._erase()
        self.say(failure.describe())

    def tick(self) -> None:
        if not self.show:
            return
        if self.tty:
            self._draw()
        elif time.monotonic() - self.last_total >= self.every_s:
            self.last_total = time.monotonic()
            self.say(self.summary())

    def _draw(self) -> None:
        lines = []
        for unit in self.running:
            status = read_status(unit)
            where = "starting" if status is None else f"round {status[0]}" + (f"/{status[1]}" if status[1] else "")
            lines.append(f"  {unit.label}: {where}")
        lines.append(self.summary())
        self._erase()
        self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()
        self.drawn = len(lines)

    def _erase(self) -> None:
        if self.tty and self.drawn:
            self.stream.write(f"\x1b[{self.drawn}F\x1b[J")
            self.stream.flush()
            self.drawn = 0

    def close(self) -> None:
        self._erase()
        if self.show and self.total > 1:
            self.say(self.summary())


def one_line(exc: BaseException) -> str:
    """An exception as the one line a failed unit reports."""
    from flamingo_sim.faults import describe_os_error

    if isinstance(exc, FlamingoError):
        return str(exc)
    if isinstance(exc, OSError):
        return describe_os_error(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
