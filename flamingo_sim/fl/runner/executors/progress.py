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


#: Rounds each measured unit must have done before the whole study's time is estimated from them.
ESTIMATE_ROUNDS = 2


class Progress:
    """Units done, running and failed, and the time left estimated from the finished ones.

    On a terminal, one line per running unit and a total, redrawn in place; otherwise a line
    when a unit starts, ends or fails, and the total every :attr:`every_s` seconds.
    ``show=False``: only failures are said (a single run's own progress bars show the rest).
    Once a running unit has done its first :data:`ESTIMATE_ROUNDS` rounds, one line estimates the
    whole study's time (:meth:`estimate_from_rounds`), and again each time a run is measured for the
    first time (at most once a run).
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
        self.began = time.monotonic()
        self.costs: dict[Unit, float] = {}  # the units not finished yet, by their relative work
        self.all_costs: dict[Unit, float] = {}
        self.done_before = done
        self.rates: dict[str, dict[Unit, float]] = {}  # run -> its running units' seconds per unit of work
        self.finished_rates: dict[str, float] = {}  # run -> the same from its finished units
        self.done_rates: dict[str, list[float]] = {}
        self.estimated: float | None = None
        self.said_runs = 0
        #: running unit -> (when it was first seen past round 0, that round): its start-up apart from its rounds
        self.first_round: dict[Unit, tuple[float, int]] = {}
        #: running unit -> its seconds per round once two rounds were seen (what is left of it is that times its rounds left)
        self.per_round_s: dict[Unit, float] = {}

    def _fraction(self, unit: Unit) -> float:
        status = read_status(unit)
        if status is None or not status[1]:
            return 0.0
        return min(1.0, status[0] / status[1])

    def expect(self, units: list[Unit]) -> None:
        """The units this study will run (those not finished yet): what the estimate from the first rounds covers."""
        self.costs = {u: max(float(u.cost), 1e-9) for u in units}
        self.all_costs = dict(self.costs)
        self.done_before = self.done

    def _measure(self) -> None:
        """Each run's seconds per unit of work, from its running units that have done :data:`ESTIMATE_ROUNDS` rounds:
        a unit's start-up (imports, traces, data, the round-0 evaluation: from its start to the first round seen, less
        the rounds before it) plus its rounds at the pace seen since, over its cost. Until two rounds were seen apart,
        its wall time so far over its rounds done, times its rounds (which counts the start-up once a round)."""
        now = time.monotonic()
        for unit, t0 in list(self.running.items()):  # a snapshot: a watcher thread may call this while units start and end
            status = read_status(unit)
            if status is None or not status[1]:
                continue
            done, rounds = status[0], int(status[1])
            first = self.first_round.get(unit)
            if first is None and done >= 1:
                self.first_round[unit] = first = (now, done)
            if done >= ESTIMATE_ROUNDS and unit.run_dir not in self.finished_rates:
                if first is not None and done > first[1]:
                    per_round = (now - first[0]) / (done - first[1])
                    setup = max(0.0, first[0] - t0 - first[1] * per_round)
                    whole = setup + per_round * rounds
                    self.per_round_s[unit] = per_round
                else:
                    whole = (now - t0) / done * rounds
                self.rates.setdefault(unit.run_dir, {})[unit] = whole / self.costs.get(unit, max(unit.cost, 1e-9))

    def estimate_from_rounds(self) -> tuple[float, str] | None:
        """``(seconds the whole study takes, counted from its start, a line saying so)`` from what its units have done
        so far: each run's rate from its units' first :data:`ESTIMATE_ROUNDS` rounds (or from its finished units),
        a run not measured yet at the mean rate of those that are; the work left shared by the jobs. None before any
        unit has done those rounds."""
        self._measure()
        per_run = {run: sum(r.values()) / len(r) for run, r in list(self.rates.items()) if r}
        per_run.update(self.finished_rates)
        costs = dict(self.costs)
        if not per_run or not costs:
            return None
        mean = sum(per_run.values()) / len(per_run)
        work = 0.0
        running = dict(self.running)
        for unit, cost in costs.items():
            frac = 0.0
            if unit in running:
                status = read_status(unit)
                if status and status[1] and unit in self.per_round_s:  # its start-up is behind it: its rounds left
                    work += self.per_round_s[unit] * max(0, status[1] - status[0])
                    continue
                frac = min(1.0, status[0] / status[1]) if status and status[1] else 0.0
            work += per_run.get(unit.run_dir, mean) * cost * (1.0 - frac)
        now = time.monotonic()
        jobs = max(1, min(self.jobs, len(costs)))
        left = work / jobs
        total = (now - self.began) + left
        runs = sorted({u.run_dir for u in self.all_costs} | set(per_run))
        measured = ", ".join(f"{Path(run).name} {per_run[run] * self._cost_of(run):,.0f} s a unit" for run in runs if run in per_run)
        line = (f"estimate from the first rounds ({len(per_run)} of {len(runs)} runs measured): the {self.total - self.done_before} "
                f"units take about {_clock(total)} in all, {_clock(left)} from now ({measured}; {jobs} at a time)")
        return total, line

    def _cost_of(self, run_dir: str) -> float:
        costs = [c for u, c in self.all_costs.items() if u.run_dir == run_dir]
        return sum(costs) / len(costs) if costs else 1.0

    def estimate_once(self) -> None:
        """Say :meth:`estimate_from_rounds`'s line when it covers a run more than the last one said (so at most once a run);
        nothing where ``show`` is off (a single run's own progress bars say its time)."""
        if not self.costs or not self.show:
            return
        est = self.estimate_from_rounds()
        if est is None:
            return
        measured = len({run for run, r in self.rates.items() if r} | set(self.finished_rates))
        if measured > self.said_runs:
            self.said_runs = measured
            self.estimated = est[0]
            self._erase()
            self.say(est[1])

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
            cost = self.costs.pop(unit, None)
            if cost is not None:  # this run's rate from now on: its finished units'
                self.done_rates.setdefault(unit.run_dir, []).append(self.durations[-1] / cost)
                self.finished_rates[unit.run_dir] = sum(self.done_rates[unit.run_dir]) / len(self.done_rates[unit.run_dir])
        self.done += 1
        if not self.tty:
            self._line(f"{unit.label}: done ({self.summary()})")
        if self.on_finish is not None:
            self.on_finish(unit)

    def fail(self, unit: Unit, error: str) -> None:
        """``unit`` failed with ``error`` (one line, said at once); the others go on."""
        self.running.pop(unit, None)
        self.costs.pop(unit, None)
        failure = Failure(unit, error)
        self.failed.append(failure)
        self._erase()
        self.say(failure.describe())

    def tick(self) -> None:
        self.estimate_once()
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
