"""How a device trains when asked: the policy protocol, the PyTorch baseline and Flamingo.

The engine calls, once per round, for the cohort of ``k`` participants::

    policy.init(n_clients, phone_idx_per_client, profile_set)          # once per run
    outcome = policy.run_tasks(TaskRequest(...))                       # per round
    state = policy.state_dict(); policy.load_state_dict(state)         # checkpoint / resume

A policy is any object with those methods (:class:`Policy`, a ``typing.Protocol``); load one
by name or import path with :func:`make_policy` (``"baseline"``, ``"flamingo"`` or
``"package.module:ClassName"``, constructed as ``cls(config)`` with a :class:`PolicyConfig`).
Per-client state lives in arrays sized ``n_clients`` created by ``init``.

Policies price tasks with :func:`flamingo_sim.devices.execution.run_ladder` (interference
model and control loop documented there). One hook is optional, declared in the protocol with
its default (a policy that subclasses :class:`Policy` inherits it): ``settle(outcome,
done_frac)``, which the engine calls once the round is settled, with the share of each task
that ran (see :mod:`flamingo_sim.fl.sim.rounds`); default: nothing.

**Baseline** (PyTorch default): always runs ``4567`` (as many threads as big cores), no
control loop: it suffers interference whenever the owner uses the phone. Its admission
(``baseline_admission``, not stated in the paper): ``accept_all`` (the default) accepts every
request; ``monitored`` declines as Flamingo's monitoring does, ``'too_hot'`` above
``max_temperature_c`` and ``'low_battery_in_use'`` in use, unplugged and below
``min_battery_pct``, so the two policies differ only in how they train.

**Flamingo** (SPEC section 3), per request, in this order:

1. Monitoring: battery above ``max_temperature_c`` (35 degC) -> decline ``'too_hot'``.
2. Exploring (the client has no full profile of its device model yet):
   - idle (owner not using the phone at the request's start) and unplugged -> accept and
     explore, work-conserving (every step counts), in one of three modes (``exploration``):

     ``packed`` (the default): the task profiles the client's next unexplored choices in
     state-space order, ``explore_steps`` batches each, so one or two requests explore every
     choice; a choice counts as explored once its batches ran in full, and steps left after
     the last choice run under the control loop. With ``share_profiles`` the coordinator hands
     the device model's profile to every client of that model once the *first* client of the
     model has finished exploring.

     ``per_request`` (the paper's text read literally: "a different execution choice for each
     training request until all choices are explored"): each exploring task runs whole on the
     client's next unexplored choice, profiled over every batch of the request; sharing as in
     ``packed`` (once the first client of the model has explored every choice), so a model is
     profiled only after some client has been selected, idle and unplugged, once per choice.

     ``collective``: each exploring task runs whole on one choice; with sharing the
     coordinator splits the model's unmeasured choices across the round's explorers (one that
     finds none left runs ``4567`` like a charging client) and shares the profile once every
     choice has been measured by someone (without sharing it is ``per_request``).

     In all three, exploration progress is booked only after the round is settled
     (:meth:`FlamingoPolicy.settle`): an explorer cut by the deadline or the K-fastest rule
     has explored only the choices it finished before the round ended.
   - in use -> decline ``'in_use_exploring'`` (SPEC: requests in use are accepted only after
     exploration; a measurement under interference would be wrong).
   - idle and charging -> accept and run on ``4567`` without monitoring (the runtime has no
     profile yet to run its control loop against, and the battery cannot be used to measure
     energy while charging, so no exploration progress is made).
3. Profiled: in use, unplugged and battery below ``min_battery_pct`` -> decline
   ``'low_battery_in_use'``; otherwise accept and run the control loop over the device
   model's viable choices starting from the largest (fastest). The paper says only "above a
   minimum battery level"; the level (30 %) is the simulator's choice, a knob.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, runtime_checkable

import numpy as np

from flamingo_sim.config import check_ranges
from flamingo_sim.devices.execution import InterferenceModel, run_ladder
from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.errors import ConfigError
from flamingo_sim.plugins import load_object

__all__ = [
    "PolicyConfig",
    "TaskRequest",
    "TaskOutcome",
    "Policy",
    "BaselinePolicy",
    "FlamingoPolicy",
    "make_policy",
    "DECLINE_REASONS",
]

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
    #: request), "per_request" (one choice per request, profiled over the whole request) or "collective".
    exploration: Literal["packed", "per_request", "collective"] = "packed"
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


#: What :func:`make_policy` checks an imported policy for: the protocol's methods.
_METHODS = ("init", "run_tasks", "state_dict", "load_state_dict", "settle")


class _PolicyBase(Policy):
    name = "base"

    def __init__(self, config: PolicyConfig | None = None) -> None:
        self.config = config or PolicyConfig()
        self.profile_set: ProfileSet | None = None
        self.client_phone = np.zeros(0, dtype=np.int64)

    def init(self, n_clients: int, phone_idx: np.ndarray, profile_set: ProfileSet) -> None:
        phone_idx = np.asarray(phone_idx, dtype=np.int64)
        if phone_idx.shape != (n_clients,):
            raise ValueError(f"phone_idx must have shape ({n_clients},)")
        if n_clients and (phone_idx.min() < 0 or phone_idx.max() >= profile_set.n_phones):
            raise ValueError("phone_idx out of range of the profile set")
        self.profile_set = profile_set
        self.client_phone = phone_idx.copy()
        fg = self.config.interference
        socs = [prof.phone.soc for prof in profile_set.profiles]
        held = [set(fg.cores_for(soc.foreground_cores)) for soc in socs]
        # (n_phones, n_labels): the label's cores overlap the phone's foreground cores
        self._label_shared = np.array([[bool(set(c) & h) for c in profile_set.label_cores] for h in held], dtype=bool)
        self._slowdown = np.array([fg.slowdown_for(soc.shared_core_slowdown) for soc in socs])

    @property
    def _profiles(self) -> ProfileSet:
        if self.profile_set is None:
            raise RuntimeError(f"{type(self).__name__}.init must be called first")
        return self.profile_set

    def _ready(self, req: TaskRequest) -> ProfileSet:
        if self.profile_set is None:
            raise RuntimeError(f"{type(self).__name__}.init must be called before run_tasks")
        ci, pi = np.asarray(req.client_idx), np.asarray(req.phone_idx)
        if np.any(self.client_phone[ci] != pi):
            raise ValueError("request phone_idx disagrees with the phones given to init")
        return self.profile_set

    def _run_fixed(self, req: TaskRequest, latency_s: np.ndarray, power_w: np.ndarray, label_idx: np.ndarray,
                   name: str, reason: np.ndarray | None = None) -> TaskOutcome:
        """Every request not declined run on one execution choice per phone, no control loop.

        ``latency_s``, ``power_w`` and ``label_idx`` hold that choice's step latency, power and
        label index, one entry per phone of the profile set; ``reason`` (k,) the decline reason
        of each request, '' to accept (default: accept all).
        """
        ps = self._ready(req)
        k = req.k
        ph = np.asarray(req.phone_idx, dtype=np.int64)
        reason = np.full(k, "", dtype=object) if reason is None else reason
        run = reason == ""
        dur, en, inter, counts, _ = self._price(
            req, latency_s[ph][:, None], power_w[ph][:, None], label_idx[ph][:, None],
            np.ones(k, dtype=np.int64), np.zeros(k, dtype=bool), run)
        mode = np.where(run, name, "declined").astype(object)
        return TaskOutcome(run, reason, dur, en, inter, counts, ps.labels, mode)

    def _monitor(self, req: TaskRequest, profiled: np.ndarray) -> np.ndarray:
        """Decline reasons of Flamingo's monitoring: ``too_hot``; then, for the ``profiled``
        clients, ``low_battery_in_use`` (in use at the start, unplugged, below ``min_battery_pct``)."""
        cfg = self.config
        use0 = np.asarray(req.in_use, dtype=bool)[:, 0]
        low = ~np.asarray(req.charging, dtype=bool) & (np.asarray(req.battery_pct, dtype=float) < cfg.min_battery_pct)
        reason = np.full(req.k, "", dtype=object)
        reason[profiled & use0 & low] = "low_battery_in_use"
        reason[np.asarray(req.temperature_c, dtype=float) > cfg.max_temperature_c] = "too_hot"
        return reason

    def _price(self, req: TaskRequest, lat, pw, label, n_rungs, controlled, run, n_steps=None, start_s=None) -> tuple:
        """Run the selected tasks (mask ``run``) on their ladders; returns full-size arrays
        ``(duration_s, energy_j, interference_s, steps per label, end_s)``. ``n_steps`` (k,)
        defaults to the request's; ``start_s`` (k,) to 0."""
        ps = self._profiles
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
        return {"name": self.name, "client_phone": self.client_phone.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("name") != self.name:
            raise ValueError(f"state is for policy {state.get('name')!r}, not {self.name!r}")
        if self.profile_set is None:
            raise RuntimeError("call init before load_state_dict")
        self.client_phone = np.asarray(state["client_phone"], dtype=np.int64).copy()


class BaselinePolicy(_PolicyBase):
    """PyTorch's default: always ``4567``, no control loop; admission per ``baseline_admission``."""

    name = "baseline"

    def run_tasks(self, request: TaskRequest) -> TaskOutcome:
        ps = self._ready(request)
        reason = None
        if self.config.baseline_admission == "monitored":
            reason = self._monitor(request, np.ones(request.k, dtype=bool))
        return self._run_fixed(request, ps.baseline_latency_s, ps.baseline_power_w, ps.baseline_label_idx, "baseline", reason)


class FlamingoPolicy(_PolicyBase):
    """Flamingo's runtime: monitoring, exploration, profile sharing, control loop (module docstring)."""

    name = "flamingo"

    def init(self, n_clients: int, phone_idx: np.ndarray, profile_set: ProfileSet) -> None:
        super().init(n_clients, phone_idx, profile_set)
        self.explored = np.zeros(n_clients, dtype=np.int64)  # state-space choices this client explored
        width = profile_set.space_latency_s.shape[1]
        self.model_done = np.zeros((profile_set.n_phones, width), dtype=bool)  # coordinator: measured choices
        self.shared_table = np.zeros(profile_set.n_phones, dtype=bool)  # coordinator has the profile
        self._pending: dict[str, np.ndarray] | None = None

    def profiled(self, client_idx: np.ndarray) -> np.ndarray:
        """Whether each client has its device model's profile (own or shared)."""
        ps = self._profiles
        ph = self.client_phone[client_idx]
        own = self.explored[client_idx] >= ps.n_space[ph]
        return own | (self.config.share_profiles & self.shared_table[ph])

    @property
    def _split(self) -> bool:
        """Collective exploration with the coordinator splitting choices across clients."""
        return self.config.exploration == "collective" and self.config.share_profiles

    def _segments(self, explore: np.ndarray, ci: np.ndarray, ph: np.ndarray, n_steps: int) -> tuple:
        """Each explorer's segments: state-space positions ``(k, S)`` (-1: none) and steps ``(k, S)``."""
        ps, cfg = self._profiles, self.config
        k = len(ci)
        seg_len = min(cfg.explore_steps, n_steps) if cfg.exploration == "packed" else n_steps
        if self._split:
            first = np.full(k, -1, dtype=np.int64)
            for p in np.unique(ph[explore]):
                mine = np.flatnonzero(explore & (ph == p))
                todo = np.flatnonzero(~self.model_done[p, : ps.n_space[p]])
                take = min(len(mine), len(todo))
                first[mine[:take]] = todo[:take]
            return first[:, None], np.where(first >= 0, n_steps, 0)[:, None], seg_len
        pos = self.explored[ci]
        n_seg = np.where(explore, np.minimum(-(-n_steps // max(seg_len, 1)), ps.n_space[ph] - pos), 0) if n_steps else np.zeros(k, dtype=np.int64)
        width = max(int(n_seg.max(initial=0)), 1)
        j = np.arange(width)[None, :]
        valid = j < n_seg[:, None]
        choice = np.where(valid, pos[:, None] + j, -1)
        steps = np.where(valid, np.minimum(seg_len, n_steps - j * seg_len), 0)
        return choice, steps, seg_len

    def run_tasks(self, request: TaskRequest) -> TaskOutcome:
        ps = self._ready(request)
        k = request.k
        ci = np.asarray(request.client_idx, dtype=np.int64)
        ph = np.asarray(request.phone_idx, dtype=np.int64)
        use0 = np.asarray(request.in_use, dtype=bool)[:, 0]
        charging = np.asarray(request.charging, dtype=bool)
        profiled = self.profiled(ci)

        reason = self._monitor(request, profiled)
        reason[(reason == "") & ~profiled & use0] = "in_use_exploring"
        accepted = reason == ""
        explore = accepted & ~profiled & ~charging
        seg_choice, seg_steps, seg_len = self._segments(explore, ci, ph, request.n_steps)
        explore &= (seg_steps > 0).any(axis=1)
        default = accepted & ~profiled & ~explore
        control = accepted & profiled

        # Controlled and default tasks: one ladder each (viable choices, or 4567 alone).
        width = ps.latency_s.shape[1]
        lat = np.full((k, width), np.nan)
        pw = np.full((k, width), np.nan)
        lab = np.full((k, width), -1, dtype=np.int64)
        n_rungs = np.ones(k, dtype=np.int64)
        lat[control], pw[control], lab[control] = ps.latency_s[ph[control]], ps.power_w[ph[control]], ps.label_idx[ph[control]]
        n_rungs[control] = ps.n_viable[ph[control]]
        lat[default, 0] = ps.baseline_latency_s[ph[default]]
        pw[default, 0] = ps.baseline_power_w[ph[default]]
        lab[default, 0] = ps.baseline_label_idx[ph[default]]
        dur, en, inter, counts, _ = self._price(request, lat, pw, lab, n_rungs, control, control | default)

        # Explorers: one segment per explored choice, back to back, then the rest controlled.
        t = np.zeros(k)
        seg_end = np.zeros(seg_choice.shape)
        one = np.ones(k, dtype=np.int64)
        for j in range(seg_choice.shape[1]):
            run = explore & (seg_steps[:, j] > 0)
            pos = np.maximum(seg_choice[:, j], 0)
            part = self._price(request, ps.space_latency_s[ph, pos][:, None], ps.space_power_w[ph, pos][:, None],
                               ps.space_label_idx[ph, pos][:, None], one, np.zeros(k, dtype=bool), run,
                               n_steps=seg_steps[:, j], start_s=t)
            dur, en, inter, counts = dur + part[0], en + part[1], inter + part[2], counts + part[3]
            t = np.where(run, part[4], t)
            seg_end[:, j] = t
        rest = np.where(explore, request.n_steps - seg_steps.sum(axis=1), 0)
        run = rest > 0
        if run.any():
            part = self._price(request, ps.latency_s[ph], ps.power_w[ph], ps.label_idx[ph], ps.n_viable[ph],
                               np.ones(k, dtype=bool), run, n_steps=rest, start_s=t)
            dur, en, inter, counts = dur + part[0], en + part[1], inter + part[2], counts + part[3]
        rows = np.flatnonzero(explore)
        self._pending = {"rows": rows, "client": ci[rows], "phone": ph[rows], "choice": seg_choice[rows],
                         "full": seg_steps[rows] == seg_len, "end_s": seg_end[rows], "duration_s": dur[rows]}

        mode = np.full(k, "declined", dtype=object)
        mode[explore], mode[default], mode[control] = "explore", "default", "control"
        return TaskOutcome(accepted, reason, dur, en, inter, counts, ps.labels, mode)

    def settle(self, outcome: TaskOutcome, done_frac: np.ndarray) -> None:
        """Book exploration progress once the round is settled.

        ``done_frac`` (over the round's requests): the share of each task that ran. A choice
        counts as explored if its ``explore_steps`` batches ended within the part that ran
        (``done_frac x duration``); the coordinator's table is updated afterwards.
        """
        pend, self._pending = self._pending, None
        if pend is None or not len(pend["rows"]):
            return
        ps = self._profiles
        ran = np.asarray(done_frac, dtype=float)[pend["rows"]] * pend["duration_s"]
        ok = pend["full"] & (pend["choice"] >= 0) & (pend["end_s"] <= ran[:, None] * (1 + 1e-9) + 1e-9)
        ph = pend["phone"]
        if self._split:
            rows, cols = np.nonzero(ok)
            self.model_done[ph[rows], pend["choice"][rows, cols]] = True
            width = self.model_done.shape[1]
            self.shared_table |= (self.model_done | (np.arange(width)[None, :] >= ps.n_space[:, None])).all(axis=1)
            return
        np.add.at(self.explored, pend["client"], np.cumprod(ok, axis=1).sum(axis=1))
        if self.config.share_profiles:
            finished = self.explored[pend["client"]] >= ps.n_space[ph]
            self.shared_table[ph[finished]] = True

    def state_dict(self) -> dict[str, Any]:
        out = super().state_dict()
        out.update(explored=self.explored.copy(), model_done=self.model_done.copy(), shared_table=self.shared_table.copy())
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        explored = np.asarray(state["explored"], dtype=np.int64)
        if explored.shape != self.explored.shape:
            raise ValueError(f"state is for {explored.shape[0]} clients, this policy has {self.explored.shape[0]}")
        self.explored = explored.copy()
        self.model_done = np.asarray(state["model_done"], dtype=bool).copy()
        self.shared_table = np.asarray(state["shared_table"], dtype=bool).copy()
        self._pending = None


_BUILTIN: dict[str, Callable[[PolicyConfig | None], Policy] | str] = {
    "baseline": BaselinePolicy, "flamingo": FlamingoPolicy, "eas": "flamingo_sim.devices.eas:EasPolicy"}


def make_policy(spec: str, config: PolicyConfig | None = None) -> Policy:
    """A policy by name (``baseline``, ``flamingo``) or import path ``package.module:ClassName``."""
    if spec in _BUILTIN:
        cls = _BUILTIN[spec]
        return (load_object(cls, "policies", kind="policy", known=_BUILTIN) if isinstance(cls, str) else cls)(config)
    cls = load_object(spec, "policies", kind="policy", known=_BUILTIN)
    policy = cls(config)
    missing = [m for m in _METHODS if not callable(getattr(policy, m, None))]
    if missing:
        raise ConfigError(f"policy {spec!r}: lacks {', '.join(missing)} (see flamingo_sim.devices.policies.Policy; "
                          "subclass it for the default of the optional settle)")
    return policy
