"""Callbacks of the run loop: hooks called around every (policy, seed) run and every round.

An engine (:mod:`flamingo_sim.fl.runner.engines`) drives one :class:`~flamingo_sim.fl.sim.simulation.Simulation`
and calls, through a :class:`CallbackList`::

    on_run_begin(sim, records)        # once; ``records``: rounds already done (resumed run)
    on_round_begin(sim)               # before each round is planned (sim.round is the last one done)
    on_round_end(sim, record) -> bool # after each round; True asks the engine to stop this run
    on_run_end(sim, records)          # once, after the last round (also after an early stop)

Every callback sees every hook, in the order given, even when an earlier one asked to stop.
Checkpoints, the metrics file and the progress bar are callbacks
(:func:`flamingo_sim.fl.runner.units.run_unit` wires them); pass your own to
:func:`flamingo_sim.fl.runner.run.run_experiment` with ``callbacks=[...]``. Subclass
:class:`Callback` and override the hooks you need (the others do nothing).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Protocol, Sequence, runtime_checkable

from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.io import ProgressBar as ProgressBarType
from flamingo_sim.io import progress

if TYPE_CHECKING:
    from flamingo_sim.fl.sim.simulation import Simulation

__all__ = ["Callback", "CallbackList", "ProgressBar"]


@runtime_checkable
class Callback(Protocol):
    """The run loop's hooks, each a no-op here (see the module docstring)."""

    def on_run_begin(self, sim: "Simulation", records: Sequence[RoundRecord]) -> None:
        return None

    def on_round_begin(self, sim: "Simulation") -> None:
        return None

    def on_round_end(self, sim: "Simulation", record: RoundRecord) -> bool | None:
        """Return True to stop this (policy, seed) run after this round."""
        return None

    def on_run_end(self, sim: "Simulation", records: Sequence[RoundRecord]) -> None:
        return None


class CallbackList:
    """Calls each hook on every callback in order; :meth:`on_round_end` is True if any asked to stop."""

    def __init__(self, callbacks: Iterable[Callback] = ()) -> None:
        self.callbacks = list(callbacks)
        for cb in self.callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"{cb!r} is not a callback: it needs on_run_begin, on_round_begin, on_round_end and on_run_end (subclass Callback)")

    def on_run_begin(self, sim: "Simulation", records: Sequence[RoundRecord]) -> None:
        for cb in self.callbacks:
            cb.on_run_begin(sim, records)

    def on_round_begin(self, sim: "Simulation") -> None:
        for cb in self.callbacks:
            cb.on_round_begin(sim)

    def on_round_end(self, sim: "Simulation", record: RoundRecord) -> bool:
        stop = False
        for cb in self.callbacks:
            stop = bool(cb.on_round_end(sim, record)) or stop
        return stop

    def on_run_end(self, sim: "Simulation", records: Sequence[RoundRecord]) -> None:
        for cb in self.callbacks:
            cb.on_run_end(sim, records)


class ProgressBar(Callback):
    """The progress bar of each (policy, seed): rounds, virtual time, online; the accuracy only where the
    round evaluated it (a log line must not repeat an old accuracy as if it were measured then)."""

    def on_run_begin(self, sim: "Simulation", records: Sequence[RoundRecord]) -> None:
        rounds = sim.rules.fl.rounds  # None: the run ends at fl.horizon_h, the bar counts rounds without a total
        self.bar: ProgressBarType[int] = progress(None, desc=f"{sim.policy_name} seed {sim.seed}", total=rounds, unit="round",
                                                  initial=sim.round)

    def on_round_end(self, sim: "Simulation", record: RoundRecord) -> bool:
        acc = "" if math.isnan(record.accuracy) else f" acc={record.accuracy:.3f}"
        self.bar.set_postfix_str(f"t={record.time_s / 3600:.2f} h{acc} online={record.n_online}", refresh=False)
        self.bar.update(1)
        return False

    def on_run_end(self, sim: "Simulation", records: Sequence[RoundRecord]) -> None:
        self.close()

    def close(self) -> None:
        """End the bar (again: a no-op); the unit calls it also when the run stops early, so that a bar is never drawn
        after the line an interruption prints."""
        bar = getattr(self, "bar", None)
        if bar is not None:
            bar.close()
