"""The policy contract: what the engine asks of a device-side training policy, and the pricing
every shipped policy uses.

The engine calls, once per round, for the cohort of ``k`` participants::

    policy.init(n_clients, phone_idx_per_client, profile_set)          # once per run
    outcome = policy.run_tasks(TaskRequest(...))                       # per round
    policy.settle(outcome, done_frac)                                  # optional, per round
    state = policy.state_dict(); policy.load_state_dict(state)         # checkpoint / resume

A policy is any object with those methods (:class:`Policy`, a ``typing.Protocol``); the one
optional hook, ``settle``, has its default here (nothing), which a subclass of :class:`Policy`
inherits and :func:`~flamingo_sim.devices.policies.make_policy` gives a policy that lacks it
(:data:`CONTRACT`). A policy is constructed as ``cls(config, **params)``: ``config`` the shared
:class:`PolicyConfig` (the experiment's ``policy`` section), ``params`` the fields of its own
``Params`` dataclass, read from ``policy_params.<name>``. Per-client state lives in arrays sized ``n_clients`` created by ``init``.
:class:`PricedPolicy` holds the public pricing helpers (:func:`~flamingo_sim.devices.execution.run_ladder`
under the interference model) that the baseline, Flamingo and EAS are written with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from flamingo_sim.config import check_ranges
from flamingo_sim.devices.battery import population_fingerprint
from flamingo_sim.devices.execution import InterferenceModel, run_ladder
from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.plugins import Contract

__all__ = ["DECLINE_REASONS", "PolicyConfig", "TaskRequest", "TaskOutcome", "Policy", "PricedPolicy", "POLICY_METHODS", "CONTRACT"]

DECLINE_REASONS = ("too_hot", "in_use_exploring", "low_battery_in_use")


@dataclass(frozen=True)
class PolicyConfig:
    """Parameters of the shipped policies (a section of the experiment config)."""

    #: flamingo declines a request while the battery is hotter than this (degC).
    max_temperature_c: float = 35.0
    #: Battery level (%) below which Flamingo declines a request while the phone is in use and unplugged
    #: (the paper says only "a minimum battery level"; 30 is the simulator's choice).
    min_battery_pct: float = 30.0
    #: flamingo's control loop moves to the next smaller choice when a step takes more than this x its profiled latency.
    interference_factor: float = 1.1
    #: flamingo's control loop moves back up one choice per step once this many seconds have passed since the last downgrade.
    probe_s: float = 120.0
    #: The coordinator hands a phone model's profile to every client of that model once one client has explored it.
    share_profiles: bool = True
    #: How Flamingo explores execution choices: "packed" (explore_steps batches per choice, several choices per
    #: request), "per_request" (one choice per request, profiled over the whole request), "collective", or
    #: "none" (every phone model's profile is known to the coordinator from the first round, as profiles
    #: benchmarked before the job or kept from an earlier one: no client explores).
    exploration: Literal["packed", "per_request", "collective", "none"] = "packed"
    #: Batches each choice is profiled on (``exploration: packed``).
    explore_steps: int = 2
    #: What the baseline accepts: "accept_all" (every request) or "monitored" (declines too hot, and in use
    #: unplugged below min_battery_pct, as Flamingo's monitoring does); the paper does not say.
    baseline_admission: Literal["accept_all", "monitored"] = "accept_all"
    #: The owner's foreground app: which cores it holds while the phone is in use, and how much it slows a training step.
    interference: InterferenceModel = field(default_factory=InterferenceModel)

    def __post_init__(self) -> None:
        check_ranges(self, max_temperature_c="[-50, 150]", min_battery_pct="[0, 100]", interference_factor=">= 1", probe_s="> 0",
                     explore_steps=">= 1")


@dataclass(frozen=True)
class TaskRequest:
    """One round's training requests for ``k`` clients (arrays of length ``k``).

    ``in_use[i, s]``: the owner uses the phone during ``[start_s + s*slot_s, start_s + (s+1)*slot_s)``
    (beyond the last slot the last value persists).
    """

    client_idx: np.ndarray
    phone_idx: np.ndarray
    n_steps: int
    start_s: float
    battery_pct: np.ndarray
    charging: np.ndarray
    temperature_c: np.ndarray
    in_use: np.ndarray
    slot_s: float

    def __post_init__(self) -> None:
        k = len(np.asarray(self.client_idx))
        for name in ("phone_idx", "battery_pct", "charging", "temperature_c"):
            if np.asarray(getattr(self, name)).shape != (k,):
                raise ValueError(f"TaskRequest.{name} must have shape ({k},)")
        use = np.asarray(self.in_use)
        if use.ndim != 2 or use.shape[0] != k or use.shape[1] < 1:
            raise ValueError(f"TaskRequest.in_use must have shape ({k}, n_slots >= 1)")
        if self.n_steps < 0 or self.slot_s <= 0:
            raise ValueError("TaskRequest needs n_steps >= 0 and slot_s > 0")

    @property
    def k(self) -> int:
        return len(np.asarray(self.client_idx))


@dataclass
class TaskOutcome:
    """What each of the ``k`` clients did with its request.

    ``decline_reason``: '' if accepted; ``mode``: 'declined', 'baseline', 'explore',
    'default' (4567 while exploring and charging) or 'control'. ``steps_by_choice[i, l]``
    counts steps on label ``labels[l]`` (the profile set's global labels).

    ``interrupted[i]``: the policy started client ``i``'s task but gives it up before the end
    (its update never reaches the server); the engine drops such a client with reason
    ``interrupted``. Policies that never interrupt leave it out: it defaults to all ``False``.
    ``duration_s``/``energy_j``/``interference_s`` are those of the whole task either way.
    """

    accepted: np.ndarray
    decline_reason: np.ndarray
    duration_s: np.ndarray
    energy_j: np.ndarray
    interference_s: np.ndarray
    steps_by_choice: np.ndarray
    labels: tuple[str, ...]
    mode: np.ndarray
    interrupted: np.ndarray = field(default=None)  # type: ignore[arg-type]  # bool (k,), default (None) all False

    def __post_init__(self) -> None:
        k = len(np.asarray(self.accepted))
        if self.interrupted is None:
            self.interrupted = np.zeros(k, dtype=bool)
        else:
            self.interrupted = np.asarray(self.interrupted, dtype=bool)
            if self.interrupted.shape != (k,):
                raise ValueError(f"TaskOutcome.interrupted must have shape ({k},), got {self.interrupted.shape}")

    def choice_mix(self) -> dict[str, int]:
        """Total steps per choice label over the cohort (labels with no steps omitted)."""
        tot = self.steps_by_choice.sum(axis=0)
        return {lab: int(n) for lab, n in zip(self.labels, tot) if n}


@runtime_checkable
class Policy(Protocol):
    """The device-side training policy the engine calls (see the module docstring); subclass it
    to inherit the optional hook's default."""

    name: str

    def init(self, n_clients: int, phone_idx: np.ndarray, profile_set: ProfileSet) -> None:
        """Create per-client state for ``n_clients`` clients whose phones are rows of ``profile_set``."""

    def run_tasks(self, request: TaskRequest) -> TaskOutcome:
        """Decide and price one round's requests."""

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume (numpy arrays and plain values)."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def settle(self, outcome: TaskOutcome, done_frac: np.ndarray) -> None:
        """Optional: the round is settled; ``done_frac[i]`` is the share of task ``i`` of
        ``outcome`` that ran, in [0, 1] (:class:`~flamingo_sim.fl.sim.rounds.RoundSettlement`). Default: nothing."""
        return None


#: The methods a policy has (what :func:`~flamingo_sim.devices.policies.make_policy` checks; ``settle`` is optional).
POLICY_METHODS = ("init", "run_tasks", "state_dict", "load_state_dict", "settle")

#: The policy extension point: required methods, the optional ``settle`` (default above), entry-point group ``flamingo_sim.policies``.
CONTRACT = Contract("policy", Policy, required=POLICY_METHODS[:4], optional=("settle",))


class PricedPolicy(Policy):
    """A policy that prices its tasks on the profile set: the helpers every shipped policy uses.

    Subclass it and implement :meth:`run_tasks`; the helpers are public so that a policy of
    your own prices tasks exactly as the shipped ones do:

    - :meth:`ready` checks a request against :meth:`init`'s phones and returns the profile set;
    - :meth:`monitor` gives the decline reasons of Flamingo's monitoring;
    - :meth:`run_fixed` runs every accepted request on one execution choice per phone;
    - :meth:`price` runs tasks on ladders of choices (with or without the control loop).
    """

    name = "base"

    def __init__(self, config: PolicyConfig | None = None) -> None:
        self.config = config or PolicyConfig()
        self.profile_set: ProfileSet | None = None
        self.client_phone = np.zeros(0, dtype=np.int64)
        self._phone_crc: int | None = None  # checksum of client_phone, for checkpoints

    def init(self, n_clients: int, phone_idx: np.ndarray, profile_set: ProfileSet) -> None:
        phone_idx = np.asarray(phone_idx, dtype=np.int64)
        if phone_idx.shape != (n_clients,):
            raise ValueError(f"phone_idx must have shape ({n_clients},)")
        if n_clients and (phone_idx.min() < 0 or phone_idx.max() >= profile_set.n_phones):
            raise ValueError("phone_idx out of range of the profile set")
        self.profile_set = profile_set
        self.client_phone = phone_idx.copy()
        self._phone_crc = None
        fg = self.config.interference
        socs = [prof.phone.soc for prof in profile_set.profiles]
        held = [set(fg.cores_for(soc.foreground_cores)) for soc in socs]
        # (n_phones, n_labels): the label's cores overlap the phone's foreground cores
        self._label_shared = np.array([[bool(set(c) & h) for c in profile_set.label_cores] for h in held], dtype=bool)
        self._slowdown = np.array([fg.slowdown_for(soc.shared_core_slowdown) for soc in socs])

    @property
    def profiles(self) -> ProfileSet:
        if self.profile_set is None:
            raise RuntimeError(f"{type(self).__name__}.init must be called first")
        return self.profile_set

    def ready(self, req: TaskRequest) -> ProfileSet:
        if self.profile_set is None:
            raise RuntimeError(f"{type(self).__name__}.init must be called before run_tasks")
        ci, pi = np.asarray(req.client_idx), np.asarray(req.phone_idx)
        if np.any(self.client_phone[ci] != pi):
            raise ValueError("request phone_idx disagrees with the phones given to init")
        return self.profile_set

    def run_fixed(self, req: TaskRequest, latency_s: np.ndarray, power_w: np.ndarray, label_idx: np.ndarray,
                   name: str, reason: np.ndarray | None = None) -> TaskOutcome:
        """Every request not declined run on one execution choice per phone, no control loop.

        ``latency_s``, ``power_w`` and ``label_idx`` hold that choice's step latency, power and
        label index, one entry per phone of the profile set; ``reason`` (k,) the decline reason
        of each request, '' to accept (default: accept all).
        """
        ps = self.ready(req)
        k = req.k
        ph = np.asarray(req.phone_idx, dtype=np.int64)
        reason = np.full(k, "", dtype=object) if reason is None else reason
        run = reason == ""
        dur, en, inter, counts, _ = self.price(
            req, latency_s[ph][:, None], power_w[ph][:, None], label_idx[ph][:, None],
            np.ones(k, dtype=np.int64), np.zeros(k, dtype=bool), run)
        mode = np.where(run, name, "declined").astype(object)
        return TaskOutcome(run, reason, dur, en, inter, counts, ps.labels, mode)

    def monitor(self, req: TaskRequest, profiled: np.ndarray) -> np.ndarray:
        """Decline reasons of Flamingo's monitoring: ``too_hot``; then, for the ``profiled``
        clients, ``low_battery_in_use`` (in use at the start, unplugged, below ``min_battery_pct``)."""
        cfg = self.config
        use0 = np.asarray(req.in_use, dtype=bool)[:, 0]
        low = ~np.asarray(req.charging, dtype=bool) & (np.asarray(req.battery_pct, dtype=float) < cfg.min_battery_pct)
        reason = np.full(req.k, "", dtype=object)
        reason[profiled & use0 & low] = "low_battery_in_use"
        reason[np.asarray(req.temperature_c, dtype=float) > cfg.max_temperature_c] = "too_hot"
        return reason

    def price(self, req: TaskRequest, lat, pw, label, n_rungs, controlled, run, n_steps=None, start_s=None) -> tuple:
        """Run the selected tasks (mask ``run``) on their ladders; returns full-size arrays
        ``(duration_s, energy_j, interference_s, steps per label, end_s)``. ``n_steps`` (k,)
        defaults to the request's; ``start_s`` (k,) to 0."""
        ps = self.profiles
        k = req.k
        dur, en, inter, end = np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k)
        counts = np.zeros((k, ps.n_labels), dtype=np.int64)
        sel = np.flatnonzero(run)
        if sel.size:
            cfg = self.config
            lab = label[sel]
            ph = np.asarray(req.phone_idx, dtype=np.int64)[sel]
            shared = self._label_shared[ph[:, None], np.maximum(lab, 0)] & (lab >= 0)
            steps = np.full(sel.size, req.n_steps) if n_steps is None else np.asarray(n_steps)[sel]
            start = None if start_s is None else np.asarray(start_s, dtype=float)[sel]
            res = run_ladder(lat[sel], pw[sel], shared, n_rungs[sel], steps, np.asarray(req.in_use, dtype=bool)[sel],
                             req.slot_s, controlled[sel], cfg.interference, cfg.interference_factor, cfg.probe_s,
                             start_s=start, slowdown=self._slowdown[ph])
            dur[sel], en[sel], inter[sel], end[sel] = res.duration_s, res.energy_j, res.interference_s, res.end_s
            rows = np.repeat(sel, lab.shape[1])
            ok = lab.ravel() >= 0
            np.add.at(counts, (rows[ok], lab.ravel()[ok]), res.steps.ravel()[ok])
        return dur, en, inter, counts, end

    def state_dict(self) -> dict[str, Any]:
        """The policy's name and a checksum of the clients' phones (set by :meth:`init`, not saved whole)."""
        return {"name": self.name, "n_clients": len(self.client_phone), "client_phone_crc32": self._phone_crc32()}

    def _phone_crc32(self) -> int:
        crc = getattr(self, "_phone_crc", None)
        if crc is None:  # once per init (O(clients))
            crc = self._phone_crc = population_fingerprint(self.client_phone)
        return crc

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("name") != self.name:
            raise ValueError(f"state is for policy {state.get('name')!r}, not {self.name!r}")
        if self.profile_set is None:
            raise RuntimeError("call init before load_state_dict")
        if "client_phone" in state:  # saved whole by an older version
            self.client_phone = np.asarray(state["client_phone"], dtype=np.int64).copy()
            self._phone_crc = None
        elif (int(state["n_clients"]), int(state["client_phone_crc32"])) != (len(self.client_phone), self._phone_crc32()):
            raise ValueError(f"state is for {int(state['n_clients'])} clients with other phones than this policy's {len(self.client_phone)}")
