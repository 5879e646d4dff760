"""The per-round record: what one finished round of one (policy, seed) run produced.

:meth:`flamingo_sim.fl.sim.simulation.Simulation.finish_round` returns a :class:`RoundRecord`;
callbacks receive it (:mod:`flamingo_sim.fl.runner.callbacks`) and :meth:`RoundRecord.to_row` gives
the ``metrics.parquet`` row (columns in :data:`flamingo_sim.fl.metrics.summary.COLUMNS`, with
``declined_<reason>`` after the ``dropped_*`` counts, then ``steps_<choice>``, ``interference_s_<phone>``,
``foreground_s_<phone>``, ``training_foreground_s_<phone>`` and ``foreground_lost_s_<phone>``).
:meth:`RoundRecord.from_row` reads a row back (checkpoints store rows, plain data). :func:`count_declines`
counts a round's declines by reason and :func:`by_phone` sums a per-client quantity per phone model,
for every engine's records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np

from flamingo_sim.errors import PluginError
from flamingo_sim.fl.sim.rounds import DROP_REASONS

__all__ = ["RoundRecord", "NETWORK_COLUMNS", "count_declines", "by_phone"]

_STEPS, _INTERFERENCE, _FOREGROUND, _TRAINING_FG = "steps_", "interference_s_", "foreground_s_", "training_foreground_s_"
_FOREGROUND_LOST, _DECLINED = "foreground_lost_s_", "declined_"
#: Columns of the device limits (:mod:`flamingo_sim.fl.sim.limits`), present only with ``devices.thermal`` / ``devices.memory`` on
#: (a request declined too hot is counted with the other declines, ``declined_too_hot``, in every run).
LIMIT_PREFIXES = ("dropped_out_of_memory", "out_of_memory_", "batch_shrunk_", "throttled_")
#: Columns of the network (:mod:`flamingo_sim.fl.sim.network`), present only with ``network.model: traces`` or
#: ``network.unmetered_only`` (a ``lognormal`` run's table stays as it was).
NETWORK_COLUMNS = ("radio_energy_j", "transfer_s", "n_unreachable", "n_cellular")


@dataclass(frozen=True)
class RoundRecord:
    """One round's metrics (units in the names; see :data:`flamingo_sim.fl.metrics.summary.COLUMNS`).

    ``dropped`` maps every drop reason (:data:`flamingo_sim.fl.sim.rounds.DROP_REASONS`) to its
    count; ``declined`` maps every reason the policy may decline with (the shipped ones, then its
    own: ``flamingo_sim.devices.policies.base.decline_reasons``) to the requests it declined
    with it (they sum to ``dropped["declined"]``); ``steps_by_choice`` maps each execution-choice label to the local steps the kept
    clients ran on it; ``interference_s_by_phone`` maps each phone model to the interference
    its selected clients caused (all attempts), ``foreground_s_by_phone`` the time their owners
    used them meanwhile (the task's whole time under the job, transfers included),
    ``training_foreground_s_by_phone`` their use while training ran (over each whole task,
    scaled by the share that ran, as the interference is; the denominator of the
    user-experience intensity, :mod:`flamingo_sim.studies.reproduce.ux`), ``foreground_lost_s_by_phone``
    the interference weighed by the share of the owners' work it cost (its numerator). The mappings are read-only. ``n_exploring`` and ``energy_exploring_j``:
    selected clients whose task explored an execution choice, and the energy they drew.
    ``straggler_phone``: the phone model of the round's slowest kept client, whose task sets the
    round's duration under keep-the-K-fastest ('' where none was kept; FedBuff rounds have none).
    ``jain_*`` are Jain's indices over all clients so far (:mod:`flamingo_sim.fl.sim.fairness`);
    ``staleness_mean`` is set by the asynchronous engine only (a column only there);
    ``device_limits`` (column -> value) only with ``devices.thermal`` or ``devices.memory`` on
    (:meth:`flamingo_sim.devices.pricing.DevicePricing.columns`); ``network`` (:data:`NETWORK_COLUMNS` -> value)
    only with ``network.model: traces`` or ``network.unmetered_only``
    (:func:`flamingo_sim.fl.sim.simulation.network_columns`; ``energy_j`` includes ``radio_energy_j``).
    """

    policy: str
    seed: int
    round: int
    time_s: float
    duration_s: float
    accuracy: float
    loss: float
    train_loss: float
    n_online: int
    n_selected: int
    n_kept: int
    dropped: Mapping[str, int]  # each drop reason's count (the dropped_<reason> columns)
    energy_j: float
    energy_cum_j: float
    interference_s: float
    clients_lost: int
    clients_lost_cum: int
    steps_by_choice: Mapping[str, int]  # the kept clients' local steps per execution choice (steps_<choice>)
    interference_s_by_phone: Mapping[str, float]  # interference per phone model, all attempts (interference_s_<phone>)
    foreground_s_by_phone: Mapping[str, float] = field(default_factory=dict)  # the owners' use while selected (foreground_s_<phone>)
    training_foreground_s_by_phone: Mapping[str, float] = field(default_factory=dict)  # ... while training ran
    foreground_lost_s_by_phone: Mapping[str, float] = field(default_factory=dict)  # interference weighed by the owners' work lost
    n_exploring: int = 0
    energy_exploring_j: float = 0.0
    jain_participation: float = float("nan")
    jain_energy: float = float("nan")
    staleness_mean: float | None = None  # FedBuff: the mean staleness of the update's deltas
    device_limits: Mapping[str, float] | None = None  # the heat and memory models' columns (with them on)
    straggler_phone: str = ""  # the phone model of the slowest kept client ('' if none kept, or FedBuff)
    network: Mapping[str, float] | None = None  # the network's columns (network.model: traces, or unmetered_only)
    declined: Mapping[str, int] = field(default_factory=dict)  # requests declined, by reason (declined_<reason>)

    def __post_init__(self) -> None:
        if set(self.dropped) != set(DROP_REASONS):
            raise ValueError(f"RoundRecord.dropped: expected the reasons {', '.join(DROP_REASONS)}, got {', '.join(self.dropped)}")
        dropped = {r: self.dropped[r] for r in DROP_REASONS}
        object.__setattr__(self, "dropped", MappingProxyType(dropped))
        object.__setattr__(self, "declined", MappingProxyType(dict(self.declined)))
        object.__setattr__(self, "steps_by_choice", MappingProxyType(dict(self.steps_by_choice)))
        object.__setattr__(self, "interference_s_by_phone", MappingProxyType(dict(self.interference_s_by_phone)))
        object.__setattr__(self, "foreground_s_by_phone", MappingProxyType(dict(self.foreground_s_by_phone)))
        object.__setattr__(self, "training_foreground_s_by_phone", MappingProxyType(dict(self.training_foreground_s_by_phone)))
        object.__setattr__(self, "foreground_lost_s_by_phone", MappingProxyType(dict(self.foreground_lost_s_by_phone)))

    def to_row(self) -> dict[str, Any]:
        """The ``metrics.parquet`` row, columns in their documented order."""
        row: dict[str, Any] = {
            "policy": self.policy,
            "seed": self.seed,
            "round": self.round,
            "time_s": self.time_s,
            "duration_s": self.duration_s,
            "accuracy": self.accuracy,
            "loss": self.loss,
            "train_loss": self.train_loss,
            "n_online": self.n_online,
            "n_selected": self.n_selected,
            "n_kept": self.n_kept,
            **{f"dropped_{r}": n for r, n in self.dropped.items()},
            **{f"{_DECLINED}{r}": n for r, n in self.declined.items()},
            "energy_j": self.energy_j,
            "energy_cum_j": self.energy_cum_j,
            "interference_s": self.interference_s,
            "clients_lost": self.clients_lost,
            "clients_lost_cum": self.clients_lost_cum,
            "n_exploring": self.n_exploring,
            "energy_exploring_j": self.energy_exploring_j,
            "jain_participation": self.jain_participation,
            "jain_energy": self.jain_energy,
            "straggler_phone": self.straggler_phone,
        }
        row.update({f"{_STEPS}{label}": n for label, n in self.steps_by_choice.items()})
        row.update({f"{_INTERFERENCE}{phone}": s for phone, s in self.interference_s_by_phone.items()})
        row.update({f"{_FOREGROUND}{phone}": s for phone, s in self.foreground_s_by_phone.items()})
        row.update({f"{_TRAINING_FG}{phone}": s for phone, s in self.training_foreground_s_by_phone.items()})
        row.update({f"{_FOREGROUND_LOST}{phone}": s for phone, s in self.foreground_lost_s_by_phone.items()})
        if self.staleness_mean is not None:
            row["staleness_mean"] = self.staleness_mean
        if self.device_limits is not None:
            row.update(self.device_limits)
        if self.network is not None:
            row.update({k: self.network[k] for k in NETWORK_COLUMNS})
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "RoundRecord":
        """The record of a ``metrics.parquet`` row (inverse of :meth:`to_row`)."""
        plain = {k: row[k] for k in ("policy", "seed", "round", "time_s", "duration_s", "accuracy", "loss", "train_loss",
                                     "n_online", "n_selected", "n_kept", "energy_j", "energy_cum_j", "interference_s",
                                     "clients_lost", "clients_lost_cum")}
        extra = {k: row[k] for k in ("jain_participation", "jain_energy", "staleness_mean", "straggler_phone") if k in row}
        limits = {k: v for k, v in row.items() if k.startswith(LIMIT_PREFIXES)}
        if limits:
            extra["device_limits"] = limits
        if all(k in row for k in NETWORK_COLUMNS):
            extra["network"] = {k: row[k] for k in NETWORK_COLUMNS}
        return cls(
            **plain,
            n_exploring=int(row.get("n_exploring", 0)),
            energy_exploring_j=float(row.get("energy_exploring_j", 0.0)),
            **extra,
            dropped={r: row[f"dropped_{r}"] for r in DROP_REASONS},
            declined={k[len(_DECLINED):]: int(v) for k, v in row.items() if k.startswith(_DECLINED)},
            steps_by_choice={k[len(_STEPS):]: v for k, v in row.items() if k.startswith(_STEPS)},
            interference_s_by_phone={k[len(_INTERFERENCE):]: v for k, v in row.items() if k.startswith(_INTERFERENCE)},
            foreground_s_by_phone={k[len(_FOREGROUND):]: v for k, v in row.items() if k.startswith(_FOREGROUND)},
            training_foreground_s_by_phone={k[len(_TRAINING_FG):]: v for k, v in row.items() if k.startswith(_TRAINING_FG)},
            foreground_lost_s_by_phone={k[len(_FOREGROUND_LOST):]: v for k, v in row.items() if k.startswith(_FOREGROUND_LOST)},
        )


def count_declines(registered: Sequence[str], reasons: np.ndarray, policy: str) -> dict[str, int]:
    """The count of each ``registered`` reason among ``reasons`` (the declined requests' reasons);
    a :class:`~flamingo_sim.errors.PluginError` naming ``policy`` for a reason it did not register or none at all."""
    counts = dict.fromkeys(registered, 0)
    if len(reasons):
        found, n = np.unique(np.asarray(reasons, dtype=object).astype(str), return_counts=True)
        for reason, k in zip(found.tolist(), n.tolist()):
            if reason not in counts:
                said = f"with reason {reason!r}, which it does not register" if reason else "without a reason (decline_reason '')"
                raise PluginError(f"policy {policy!r} declined a request {said}: list each reason it declines with in its class's "
                                  f"DECLINE_REASONS (registered: {', '.join(registered)})")
            counts[reason] += k
    return counts


def by_phone(values: np.ndarray, phone: np.ndarray, names: Sequence[str]) -> dict[str, float]:
    """``values`` (one per client) summed per phone model: ``phone`` holds each client's index into ``names``."""
    values, phone = np.asarray(values, dtype=np.float64), np.asarray(phone)
    return {name: float(values[phone == p].sum()) for p, name in enumerate(names)}
