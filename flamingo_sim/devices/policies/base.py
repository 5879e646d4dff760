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
:func:`check_outcome` holds what ``run_tasks`` returns to the contract, field by field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Sequence, runtime_checkable

import numpy as np

from flamingo_sim.config import check_ranges
from flamingo_sim.devices.battery import population_fingerprint
from flamingo_sim.devices.execution import InterferenceModel, run_ladder
from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.devices.scheduling import contention_table
from flamingo_sim.errors import PluginError
from flamingo_sim.plugins import Contract

__all__ = ["DECLINE_REASONS", "RESERVED_REASONS", "decline_reasons", "PolicyConfig", "TaskRequest", "TaskOutcome", "Policy", "PricedPolicy",
           "Ladders", "Priced", "POLICY_METHODS", "CONTRACT", "check_outcome"]

#: The reasons the shipped policies decline with (each a ``declined_<reason>`` column of ``metrics.parquet``,
#: in every run); a policy of your own registers its others in its class's ``DECLINE_REASONS``.
DECLINE_REASONS = ("too_hot", "in_use_exploring", "low_battery_in_use")
#: Reasons no policy may register: the memory model's drop (``flamingo_sim.fl.sim.limits.OUT_OF_MEMORY``) and the engine's
#: outcomes of a task (``flamingo_sim.fl.sim.rounds.REASONS``), each with its own ``dropped_<reason>`` column.
RESERVED_REASONS = ("out_of_memory", "kept", "declined", "unavailable", "battery_exhausted", "interrupted", "too_slow")
_REASON = re.compile(r"^[a-z][a-z0-9_]*$")


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

    #: int (k,): each requested client's index in the population (what ``Policy.init`` sized its state for).
    client_idx: np.ndarray
    #: int (k,): each client's phone, a row of the profile set ``Policy.init`` was given.
    phone_idx: np.ndarray
    #: Local training steps (minibatches) each task runs.
    n_steps: int
    #: Virtual time (s) the round's tasks start at.
    start_s: float
    #: float (k,): each client's effective battery level (%) at the start (its trace's, less what training drew).
    battery_pct: np.ndarray
    #: bool (k,): each phone is on the charger at the start (the charger then pays for training).
    charging: np.ndarray
    #: float (k,): each phone's battery temperature (degC) at the start: the trace's, plus the heat of earlier
    #: training when ``devices.thermal`` is on.
    temperature_c: np.ndarray
    #: bool (k, n_slots): the owner uses the phone in slot ``s`` (see above).
    in_use: np.ndarray
    #: Seconds per slot of ``in_use`` (the trace's resolution).
    slot_s: float
    #: The minibatch each client trains (k,), or None: the profiles' own batch. A step's latency and energy
    #: scale with it (:meth:`PricedPolicy.price`), the rule the memory model's shrunk batches follow too.
    batch_size: np.ndarray | None = None

    def __post_init__(self) -> None:
        k = len(np.asarray(self.client_idx))
        for name in ("phone_idx", "battery_pct", "charging", "temperature_c"):
            if np.asarray(getattr(self, name)).shape != (k,):
                raise ValueError(f"TaskRequest.{name} must have shape ({k},)")
        if self.batch_size is not None and (np.shape(self.batch_size) != (k,) or np.any(np.asarray(self.batch_size) < 1)):
            raise ValueError(f"TaskRequest.batch_size must have shape ({k},) and hold positive sizes")
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
    """What each of the ``k`` requested clients did with its request: every array has one entry per requested
    task (``k = len(request.client_idx)``), in the request's order; :func:`check_outcome` holds it to its fields.

    ``decline_reason``: '' if accepted; ``mode``: 'declined', 'baseline', 'explore',
    'default' (4567 while exploring and charging) or 'control'. ``steps_by_choice[i, l]``
    counts steps on label ``labels[l]`` (the profile set's global labels).

    ``interrupted[i]``: the policy started client ``i``'s task but gives it up before the end
    (its update never reaches the server); the engine drops such a client with reason
    ``interrupted``. Policies that never interrupt leave it out: it defaults to all ``False``.
    ``duration_s``/``energy_j``/``interference_s`` are those of the whole task either way.

    ``interference_s``: the owner's foreground time slowed by training; ``foreground_lost_s``:
    that time weighed by the share of the owner's work lost (Table 3's intensity). A policy that
    leaves the latter out gets half of ``interference_s`` (two equal threads sharing a core).
    """

    #: bool (k,): the client trains (False: it declines the request).
    accepted: np.ndarray
    #: str (k,): '' if accepted, else why not: one of ``DECLINE_REASONS`` or of the policy's own ``DECLINE_REASONS``.
    decline_reason: np.ndarray
    #: float (k,), finite and >= 0: the whole task's duration (s), compute only (the engine adds the model's transfers).
    duration_s: np.ndarray
    #: float (k,), finite and >= 0: the whole task's energy (J).
    energy_j: np.ndarray
    #: float (k,), finite and >= 0: the owner's foreground time slowed by training (s).
    interference_s: np.ndarray
    #: int (k, n_labels), >= 0: steps on each execution choice, by the profile set's label index (a column per ``labels`` entry).
    steps_by_choice: np.ndarray
    #: The profile set's labels (``steps_by_choice``'s columns).
    labels: tuple[str, ...]
    #: str (k,): 'declined', or how the task ran ('baseline', 'explore', 'default', 'control', or a policy's own word).
    mode: np.ndarray
    #: bool (k,): the policy gives the task up before its end (see above); None: all False.
    interrupted: np.ndarray = field(default=None)  # type: ignore[arg-type]
    #: float (k,), finite and >= 0: ``interference_s`` weighed by the share of the owner's work lost; None: ``interference_s`` / 2.
    foreground_lost_s: np.ndarray = field(default=None)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        k = len(np.asarray(self.accepted))
        if self.foreground_lost_s is None:
            self.foreground_lost_s = np.asarray(self.interference_s, dtype=float) * 0.5
        else:
            self.foreground_lost_s = np.asarray(self.foreground_lost_s, dtype=float)
            if self.foreground_lost_s.shape != (k,):
                raise ValueError(f"TaskOutcome.foreground_lost_s must have shape ({k},), got {self.foreground_lost_s.shape}")
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
    #: Optional: the reasons this policy declines with besides the shipped ``DECLINE_REASONS``, each a
    #: lower-case word with underscores (its count per round is the metrics column ``declined_<reason>``).
    #: Default: none; a reason not registered stops the run at its first use.
    DECLINE_REASONS: tuple[str, ...] = ()

    def init(self, n_clients: int, phone_idx: np.ndarray, profile_set: ProfileSet) -> None:
        """Create per-client state for ``n_clients`` clients whose phones are rows of ``profile_set``."""

    def run_tasks(self, request: TaskRequest) -> TaskOutcome:
        """Decide and price one round's requests: a :class:`TaskOutcome` with one entry per requested task
        (``k = len(request.client_idx)``) in every array, each field as it declares (:func:`check_outcome`)."""

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



def decline_reasons(policy: Any) -> tuple[str, ...]:
    """Every reason ``policy`` may decline with: the shipped ``DECLINE_REASONS``, then its own."""
    return tuple(dict.fromkeys((*DECLINE_REASONS, *getattr(policy, "DECLINE_REASONS", ()))))


def _check_decline_reasons(policy: Any) -> str | None:
    """What is wrong with a policy's own ``DECLINE_REASONS`` (the contract's rule), or None."""
    own = getattr(policy, "DECLINE_REASONS", ())
    if isinstance(own, str) or not isinstance(own, (tuple, list)) or not all(isinstance(r, str) and _REASON.match(r) for r in own):
        return f"DECLINE_REASONS must be a tuple of lower-case words with underscores (each a column declined_<reason>), got {own!r}"
    taken = [r for r in own if r in RESERVED_REASONS]
    if taken:
        return f"DECLINE_REASONS: {taken[0]!r} is the engine's own drop reason, not a decline; give the reason another name"
    return None


def check_outcome(policy_name: str, request: TaskRequest, outcome: Any, registered: Sequence[str] = DECLINE_REASONS) -> TaskOutcome:
    """``outcome``, what policy ``policy_name``'s ``run_tasks`` returned for ``request`` (before the engine's device
    limits), as it came when it keeps the contract: a :class:`TaskOutcome` with one entry per requested task in every
    array (``len(request.client_idx)``), ``accepted`` and ``interrupted`` bool, the times and the energy float, finite
    and >= 0, ``steps_by_choice`` integer and >= 0 with a column per label, ``decline_reason`` '' for an accepted task
    and one of ``registered`` (:func:`decline_reasons` of the policy) for a declined one. Else a
    :class:`~flamingo_sim.errors.PluginError` line naming the policy, the field, what it must be and what came back."""
    problem = _outcome_problem(request.k, outcome, tuple(registered))
    if problem is None:
        return outcome
    raise PluginError(f"policy {policy_name!r} broke its contract: {problem}")


def _outcome_problem(k: int, out: Any, registered: tuple[str, ...]) -> str | None:
    if not isinstance(out, TaskOutcome):
        return f"run_tasks must return a TaskOutcome, got {_a(type(out).__name__)}"
    task = f"one entry per requested task ({k},)"
    for name, kind in (("accepted", "b"), ("interrupted", "b"), ("decline_reason", "U"), ("mode", "U"), ("duration_s", "f"),
                       ("energy_j", "f"), ("interference_s", "f"), ("foreground_lost_s", "f")):
        wrong = _array_problem(getattr(out, name), kind, (k,))
        if wrong:
            return f"TaskOutcome.{name} must be {_KINDS[kind]} of {task}, got {wrong}"
        value = np.asarray(getattr(out, name))
        if kind == "f" and not (np.isfinite(value).all() and (value >= 0).all()):
            bad = value[~(np.isfinite(value) & (value >= 0))]
            more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
            return f"TaskOutcome.{name} must be finite and >= 0, got {float(bad[0])!r}{more}"
    labels = out.labels
    if not isinstance(labels, tuple) or not all(isinstance(x, str) for x in labels):
        return f"TaskOutcome.labels must be a tuple of str (the profile set's labels), got {_a(type(labels).__name__)}"
    wrong = _array_problem(out.steps_by_choice, "i", (k, len(labels)))
    if wrong:
        return f"TaskOutcome.steps_by_choice must be {_KINDS['i']} of shape ({k}, {len(labels)}), one row per requested task, got {wrong}"
    if (np.asarray(out.steps_by_choice) < 0).any():
        return f"TaskOutcome.steps_by_choice must be >= 0, got {int(np.asarray(out.steps_by_choice).min())}"
    accepted, reason = np.asarray(out.accepted), np.asarray(out.decline_reason).astype(str)
    if (reason[accepted] != "").any():
        return f"TaskOutcome.decline_reason must be '' for an accepted task, got {str(reason[accepted & (reason != '')][0])!r}"
    unknown = sorted(set(reason[~accepted].tolist()) - set(registered))
    if unknown:
        said = "'' (no reason)" if unknown[0] == "" else f"{unknown[0]!r}, which it does not register"
        return (f"TaskOutcome.decline_reason of a declined task must be one of its DECLINE_REASONS ({', '.join(registered)}), "
                f"got {said}")
    return None


_KINDS = {"b": "a bool array", "f": "a float array", "U": "a str array", "i": "an integer array"}


def _array_problem(value: Any, kind: str, shape: tuple[int, ...]) -> str | None:
    """What is wrong with ``value`` as an array of ``kind`` (``U``: str, or objects that are str) and ``shape``, or None."""
    if not isinstance(value, np.ndarray):
        return _a(type(value).__name__)
    if value.shape != shape:
        return f"shape {value.shape}"
    found = value.dtype.kind
    if kind == "U" and found == "O" and all(isinstance(x, str) for x in value.ravel().tolist()):
        return None
    if found != kind and not (kind == "i" and found == "u"):
        return f"dtype {value.dtype}"
    return None


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


#: The policy extension point: required methods, the optional ``settle`` and ``DECLINE_REASONS`` (defaults above),
#: entry-point group ``flamingo_sim.policies``.
CONTRACT = Contract("policy", Policy, required=POLICY_METHODS[:4], optional=("settle", "DECLINE_REASONS"), validate=_check_decline_reasons)


@dataclass(frozen=True)
class Ladders:
    """Each of ``k`` requests' ladder of execution choices, ``C`` rungs (what :meth:`PricedPolicy.price` runs).

    Rung 0 is where a task starts (the fastest); rungs at and beyond ``n_rungs[i]`` are padding
    (latency and power NaN, label -1). ``controlled[i]``: the task runs the control loop over its
    ladder; otherwise it stays on rung 0."""

    latency_s: np.ndarray  # (k, C) profiled step latency of each rung, at the profiles' batch
    power_w: np.ndarray  # (k, C) profiled power of each rung
    label_idx: np.ndarray  # (k, C) the rung's label index in the profile set
    n_rungs: np.ndarray  # (k,) int
    controlled: np.ndarray  # (k,) bool

    @classmethod
    def single(cls, latency_s: np.ndarray, power_w: np.ndarray, label_idx: np.ndarray) -> "Ladders":
        """One rung per request (the given choice), no control loop."""
        k = len(latency_s)
        return cls(np.asarray(latency_s, dtype=float)[:, None], np.asarray(power_w, dtype=float)[:, None],
                   np.asarray(label_idx, dtype=np.int64)[:, None], np.ones(k, dtype=np.int64), np.zeros(k, dtype=bool))


@dataclass(frozen=True)
class Priced:
    """What :meth:`PricedPolicy.price` returns: per request (zero for those not run)."""

    duration_s: np.ndarray  # (k,) each task's duration (s)
    energy_j: np.ndarray  # (k,) its energy (J)
    interference_s: np.ndarray  # (k,) the owner's foreground time it slowed (s)
    foreground_lost_s: np.ndarray  # (k,) that time weighed by the share of the owner's work lost (s)
    steps_by_label: np.ndarray  # (k, n_labels) steps on each execution choice, by label index
    end_s: np.ndarray  # start_s + duration_s

    def then(self, later: "Priced") -> "Priced":
        """This part followed by ``later`` (a continuation started at this part's end): sums, and ``later``'s end."""
        ran = later.duration_s > 0
        return Priced(self.duration_s + later.duration_s, self.energy_j + later.energy_j, self.interference_s + later.interference_s,
                      self.foreground_lost_s + later.foreground_lost_s, self.steps_by_label + later.steps_by_label,
                      np.where(ran, later.end_s, self.end_s))


class PricedPolicy(Policy):
    """A policy that prices its tasks on the profile set: the helpers every shipped policy uses.

    Subclass it and implement :meth:`run_tasks`; the helpers are public so that a policy of
    your own prices tasks exactly as the shipped ones do:

    - ``ready`` checks a request against :meth:`init`'s phones and returns the profile set;
    - :meth:`monitor` gives the decline reasons of Flamingo's monitoring;
    - :meth:`run_fixed` runs every accepted request on one execution choice per phone;
    - :meth:`price` runs tasks on ladders of choices (with or without the control loop).

    ``pinned``: whether the policy pins its threads to its choice's cores (``sched_setaffinity``,
    as Flamingo does) or leaves their placement to the kernel (PyTorch's default); under the
    ``android`` interference model an unpinned thread moves off a core the owner's app needs
    (:mod:`flamingo_sim.devices.scheduling`).
    """

    name = "base"
    pinned = True

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
        # (n_phones, n_labels): what the owner's use does to each choice's step on each phone
        self.contention = contention_table(profile_set, self.config.interference, self.pinned)

    @property
    def profiles(self) -> ProfileSet:
        if self.profile_set is None:
            raise RuntimeError(f"{type(self).__name__}.init must be called first")
        return self.profile_set

    def ready(self, req: TaskRequest) -> ProfileSet:
        """The profile set, once ``req`` is checked: ``init`` has run and the request's phones are
        those ``init`` gave its clients (a :class:`RuntimeError` or :class:`ValueError` otherwise)."""
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
        got = self.price(req, Ladders.single(latency_s[ph], power_w[ph], label_idx[ph]), run)
        mode = np.where(run, name, "declined").astype(object)
        return TaskOutcome(run, reason, got.duration_s, got.energy_j, got.interference_s, got.steps_by_label, ps.labels, mode,
                           foreground_lost_s=got.foreground_lost_s)

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

    def price(self, req: TaskRequest, ladders: Ladders, run: np.ndarray, n_steps: np.ndarray | None = None,
              start_s: np.ndarray | None = None) -> Priced:
        """Run the selected tasks (mask ``run``) on their ``ladders``; full-size arrays (:class:`Priced`).

        ``n_steps`` (k,) defaults to the request's; ``start_s`` (k,) to 0. A step's latency (and so
        its energy) scales with the client's minibatch over the profiles' (``req.batch_size``);
        while the owner uses the phone each rung's step is priced by :attr:`contention`."""
        ps = self.profiles
        k = req.k
        dur, en, inter, lost, end = np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k)
        counts = np.zeros((k, ps.n_labels), dtype=np.int64)
        sel = np.flatnonzero(run)
        if sel.size:
            cfg = self.config
            lab = np.asarray(ladders.label_idx)[sel]
            ph = np.asarray(req.phone_idx, dtype=np.int64)[sel]
            lat = np.asarray(ladders.latency_s, dtype=float)[sel]
            if req.batch_size is not None:
                lat = lat * (np.asarray(req.batch_size, dtype=float)[sel] / ps.batch_size[ph])[:, None]
            steps = np.full(sel.size, req.n_steps) if n_steps is None else np.asarray(n_steps)[sel]
            start = None if start_s is None else np.asarray(start_s, dtype=float)[sel]
            res = run_ladder(lat, np.asarray(ladders.power_w, dtype=float)[sel], np.asarray(ladders.n_rungs)[sel], steps,
                             np.asarray(req.in_use, dtype=bool)[sel], req.slot_s, np.asarray(ladders.controlled)[sel],
                             self.contention.at(ph, lab), cfg.interference_factor, cfg.probe_s, start_s=start)
            dur[sel], en[sel], inter[sel], lost[sel], end[sel] = res.duration_s, res.energy_j, res.interference_s, \
                res.foreground_lost_s, res.end_s
            rows = np.repeat(sel, lab.shape[1])
            ok = lab.ravel() >= 0
            np.add.at(counts, (rows[ok], lab.ravel()[ok]), res.steps.ravel()[ok])
        return Priced(dur, en, inter, lost, counts, end)

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
