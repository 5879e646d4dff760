"""The rules of one round, as a pure function of the selected clients' priced tasks.

FedScale's round model with Flamingo's energy budget: over-commit, let each client's policy
accept or decline and price its task, drop those who decline, whose trace alone takes them
offline before they finish (the owner's own use), or whose training would drain their battery
below the offline threshold before they finish; keep the K fastest of the rest (and only those within the deadline, if one
is set); the round lasts until the last kept client finishes.

How much of its task each selected client ran (``done_frac``): all of it if kept or taken
offline by its trace (it only learns at the end); none if it declined; for an exhausted one,
the share its spare energy paid for (it trained until the battery hit the threshold); for one
cut as too slow, the share done by the end of the round. Interference with the owner scales with
that share; the energy spent is what that share of the task drew (the same share of its energy
at one power; with a ``curve``, the task's own power as it runs: throttled, or the radio around
the compute, :class:`flamingo_sim.devices.pricing.PowerTimeline`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

#: Outcome codes of a selected client, in ``RoundSettlement.reason``.
KEPT, DECLINED, UNAVAILABLE, BATTERY_EXHAUSTED, INTERRUPTED, TOO_SLOW = range(6)
REASONS = ("kept", "declined", "unavailable", "battery_exhausted", "interrupted", "too_slow")
DROP_REASONS = REASONS[1:]

#: A round in which nobody finishes still costs this much virtual time (the coordinator waits).
EMPTY_ROUND_S = 60.0


class EnergyCurve(Protocol):
    """Each task's energy as it runs (:class:`flamingo_sim.devices.pricing.PowerTimeline`): what a share of it draws."""

    def spent_j(self, share: np.ndarray) -> np.ndarray: ...

    def share_at_j(self, energy_j: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class RoundSettlement:
    reason: np.ndarray  # int8 (k,) one of the codes above
    done_frac: np.ndarray  # float (k,) share of its task each client ran, in [0, 1]
    energy_spent_j: np.ndarray  # float (k,) what the share done_frac drew (energy_j x done_frac at one power)
    duration_s: float  # virtual time the round took
    kept: np.ndarray  # int64 indices (into the selected clients) of the kept ones, fastest first

    def count(self, code: int) -> int:
        return int(np.count_nonzero(self.reason == code))


def settle_round(
    *,
    k: int,
    accepted: np.ndarray,
    duration_s: np.ndarray,
    energy_j: np.ndarray,
    spare_energy_j: np.ndarray,
    online_at_finish: np.ndarray,
    interrupted: np.ndarray | None = None,
    deadline_s: float | None = None,
    curve: EnergyCurve | None = None,
) -> RoundSettlement:
    """Decide who of the selected clients counts this round.

    Parameters are arrays over the selected clients: ``accepted`` by their policy; the task's
    ``duration_s`` (compute plus communication) and ``energy_j``; ``spare_energy_j``, the energy
    each has above the offline threshold at the round's start; ``online_at_finish``, whether
    its trace alone (no training) still has it online when it would finish; ``interrupted``,
    whether the policy gave up mid-task. ``k`` is the number of updates to keep. ``curve``: each task's energy as
    it runs (its power changes within the task: throttled, or the radio around the compute); None: one power.
    """
    n = len(accepted)
    accepted = np.asarray(accepted, dtype=bool)
    duration_s = np.asarray(duration_s, dtype=np.float64)
    energy_j = np.asarray(energy_j, dtype=np.float64)
    spare = np.maximum(np.asarray(spare_energy_j, dtype=np.float64), 0.0)
    interrupted = np.zeros(n, dtype=bool) if interrupted is None else np.asarray(interrupted, dtype=bool)

    reason = np.full(n, KEPT, dtype=np.int8)
    reason[~accepted] = DECLINED
    live = reason == KEPT
    gone = live & ~np.asarray(online_at_finish, dtype=bool)
    reason[gone] = UNAVAILABLE
    live &= ~gone
    exhausted = live & (energy_j > spare)
    reason[exhausted] = BATTERY_EXHAUSTED
    live &= ~exhausted
    stopped = live & interrupted
    reason[stopped] = INTERRUPTED
    live &= ~stopped
    if deadline_s is not None:
        late = live & (duration_s > deadline_s)
        reason[late] = TOO_SLOW
        live &= ~late

    candidates = np.flatnonzero(live)
    order = candidates[np.argsort(duration_s[candidates], kind="stable")]
    kept, slow = order[:k], order[k:]
    reason[slow] = TOO_SLOW

    if len(kept):
        round_s = float(duration_s[kept[-1]])
    elif deadline_s is not None:
        round_s = float(deadline_s)
    else:
        tried = duration_s[accepted]
        round_s = float(tried.max()) if len(tried) else EMPTY_ROUND_S
    round_s = max(round_s, 1e-9)

    with np.errstate(divide="ignore", invalid="ignore"):
        by_time = np.where(duration_s > 0, round_s / duration_s, 1.0)
        by_energy = np.where(energy_j > 0, spare / energy_j, 1.0) if curve is None else curve.share_at_j(spare)
    done = np.ones(n)
    done[reason == DECLINED] = 0.0
    done = np.where(reason == BATTERY_EXHAUSTED, by_energy, done)
    done = np.where(reason == TOO_SLOW, by_time, done)
    done = np.clip(done, 0.0, 1.0)
    spent = energy_j * done if curve is None else curve.spent_j(done)
    return RoundSettlement(reason=reason, done_frac=done, energy_spent_j=spent, duration_s=round_s, kept=kept)
