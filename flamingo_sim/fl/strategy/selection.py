"""Client selection: which of the online clients are asked to train this round; the shipped selectors.

A selector has the :class:`~flamingo_sim.fl.strategy.base.Selector` contract: ``select(online, n, generator, view)`` returns
``n`` distinct entries of ``online`` (the sorted online client indices); ``generator`` is a
numpy Generator derived from (seed, "selection", round), so a resumed run selects exactly the
same cohorts; ``view`` (:class:`CoordinatorView`) is what a real coordinator knows when it
selects: the battery level each client reports when it checks in. After a round,
``observe`` hands it what arrived with the kept clients' updates (sample count, training loss,
how long the client took from dispatch to upload); nothing else of the simulation is visible.
``state_dict``/``load_state_dict`` keep a stateful selector's memory in checkpoints.

A selector may also have ``select_online(online, n, generator, view)``, where ``online`` is
the lazy sorted set of online clients (:class:`OnlineSet`: ``len(online)``,
``online.take(ranks)``, ``online.members()``): the engine then calls it instead of ``select``
(:func:`select_online`), and a draw reads only the clients it picks, not the population.
``uniform`` has it (the same cohorts as ``select``, bit for bit); the other selectors weigh
every online client, so they get the whole array (O(online)).

Registered names (``fl.selection``; parameters in the experiment's ``selector:`` section, checked
by the selector's ``Params``; :func:`make_selector` also finds import paths and entry points):

- ``uniform``: uniformly at random without replacement (FedScale's default); no parameters.
- ``battery``: battery-aware. Client ``i``'s weight is ``floor + (1 - floor) * e_i`` with
  ``e_i = clip((level_i - min_pct) / (100 - min_pct), 0, 1)`` its energy above the offline
  threshold as a share of the most it can have; each draw picks among the not yet drawn with
  probability proportional to the weight. ``floor`` (0.1) keeps nearly flat phones selectable.
- ``oort``: Oort-style guided selection (Lai et al., OSDI '21), simplified. A client that has
  reported has utility ``n_i * loss_i`` (statistical: samples times its last training loss)
  times ``(T / t_i) ** straggler_penalty`` if its last duration ``t_i`` exceeded the preferred
  round duration ``T`` (system utility; ``T`` = ``preferred_duration_s`` or, unset, the median
  of the last reported durations). ``exploration`` (0.2) of the slots go to never-seen clients
  uniformly; the rest are drawn without replacement with probability proportional to utility
  among the seen ones (either pool topping up the other when it runs short).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Protocol, Sequence

import numpy as np

from flamingo_sim.config import check_ranges
from flamingo_sim.errors import PluginError
from flamingo_sim.fl.strategy.base import SELECTOR, CoordinatorView, Selector
from flamingo_sim.numeric import power
from flamingo_sim.plugins import Registry, plugin_label

__all__ = [
    "CoordinatorView",
    "Selector",
    "UniformSelector",
    "BatterySelector",
    "BatteryParams",
    "OortSelector",
    "OortParams",
    "SELECTORS",
    "battery_weights",
    "make_selector",
    "select_online",
    "check_selection",
    "OnlineSet",
]


class OnlineSet(Protocol):
    """The sorted online clients, lazily (:class:`~flamingo_sim.devices.online.OnlineClients`)."""

    def __len__(self) -> int: ...

    def take(self, positions: Any) -> np.ndarray:
        """The clients at ``positions`` (0-based ranks) of the sorted set."""
        ...

    def members(self) -> np.ndarray:
        """The whole sorted set."""
        ...


def select_online(selector: Selector, online: OnlineSet, n: int, generator: np.random.Generator, view: CoordinatorView) -> np.ndarray:
    """``selector``'s pick of ``n`` of ``online``: its ``select_online`` where it has one, else
    its ``select`` on the whole sorted array; held to the contract (:func:`check_selection`)."""
    lazy = getattr(selector, "select_online", None)
    if lazy is not None:
        handed = _Handed(online)
        got = lazy(handed, n, generator, view)
        return np.asarray(check_selection(selector, "select_online", got, n, handed, view), dtype=np.int64)
    members = online.members()
    return check_selection(selector, "select", selector.select(members, n, generator, view), n, members, view)


class _Handed:
    """The online set as a lazy selector is handed it, remembering the clients it read: its pick must be among them."""

    def __init__(self, online: OnlineSet) -> None:
        self.online = online
        self.read: list[np.ndarray] = []
        self.whole: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.online)

    def take(self, positions: Any) -> np.ndarray:
        out = self.online.take(positions)
        self.read.append(np.asarray(out))
        return out

    def members(self) -> np.ndarray:
        self.whole = self.online.members()
        return self.whole

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.members(), dtype=dtype)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.online, name)


def check_selection(selector: Any, method: str, got: Any, n: int, online: np.ndarray | _Handed, view: CoordinatorView | None) -> np.ndarray:
    """``got``, what ``selector.<method>`` returned for ``n`` of ``online`` (the sorted online
    clients, or the lazy set it read from), as it came (an array-like of ints as an array): at most
    ``n`` unique online integer client ids; else a :class:`~flamingo_sim.errors.PluginError` line
    naming the selector, the contract and what came back."""
    ids = got if isinstance(got, np.ndarray) else np.asarray(got) if isinstance(got, (list, tuple)) else None
    problem = _selection_problem(ids, got, n, online)
    if problem is None:
        assert ids is not None
        return ids if ids.dtype.kind in "iu" else ids.astype(np.int64)  # none at all, as floats
    at = f" at round {view.round}" if view is not None else ""
    raise PluginError(f"selector {plugin_label(selector)!r} broke its contract{at}: {method} must return at most {n} unique online "
                      f"integer client ids, got {problem}")


def _selection_problem(ids: np.ndarray | None, got: Any, n: int, online: np.ndarray | _Handed) -> str | None:
    if ids is None:
        return "None" if got is None else _a(type(got).__name__)
    if ids.ndim != 1:
        return f"a {ids.ndim}-D array of shape {ids.shape}"  # one id per entry
    if ids.dtype.kind not in "iu":
        return None if ids.size == 0 and ids.dtype.kind == "f" else f"{len(ids)} {ids.dtype} ids"
    unique = np.unique(ids)
    away = unique[~_among(unique, online)]
    if len(ids) <= n and len(unique) == len(ids) and not len(away):
        return None
    what = [f"{len(ids)} ids"]
    if len(unique) < len(ids):
        what.append(f"{len(ids) - len(unique)} duplicated")
    if len(away):
        what.append(f"{len(away)} not online (e.g. {', '.join(map(str, away[:3].tolist()))})")
    return ", ".join(what)


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _among(ids: np.ndarray, online: np.ndarray | _Handed) -> np.ndarray:
    """Whether each of ``ids`` (sorted, unique) is in ``online``: the sorted array, or what a lazy selector read of its set."""
    if isinstance(online, _Handed):
        if online.whole is None:
            return np.isin(ids, np.concatenate(online.read)) if online.read else np.zeros(len(ids), dtype=bool)
        online = online.whole
    pos = np.minimum(np.searchsorted(online, ids), max(len(online) - 1, 0))
    return online[pos] == ids if len(online) else np.zeros(len(ids), dtype=bool)


class UniformSelector(Selector):
    """Uniformly at random, without replacement (FedScale's default)."""

    def select(self, online: np.ndarray, n: int, generator: np.random.Generator, view: CoordinatorView | None = None) -> np.ndarray:
        if n >= len(online):
            return np.asarray(online, dtype=np.int64).copy()
        return np.sort(generator.choice(online, size=n, replace=False)).astype(np.int64)

    def select_online(self, online: OnlineSet, n: int, generator: np.random.Generator, view: CoordinatorView | None = None) -> np.ndarray:
        """:meth:`select` by rank: numpy draws the same positions whether given the array or its
        length, so this picks the same clients while reading only those."""
        if n >= len(online):
            return online.members().astype(np.int64, copy=True)
        return np.sort(online.take(generator.choice(len(online), size=n, replace=False))).astype(np.int64)


def _weighted_draw(pool: np.ndarray, weights: np.ndarray, n: int, generator: np.random.Generator) -> np.ndarray:
    """``n`` distinct entries of ``pool``, each draw proportional to ``weights`` among those left.

    Uses exponential keys (the smallest ``E_j / w_j`` win), which gives exactly that
    successive-draw law in one vectorised pass. Zero weights are drawn last.
    """
    if n >= len(pool):
        return np.asarray(pool, dtype=np.int64).copy()
    with np.errstate(divide="ignore"):
        keys = generator.exponential(size=len(pool)) / weights
    return np.asarray(pool, dtype=np.int64)[np.argpartition(keys, n - 1)[:n]]


def battery_weights(battery_pct: np.ndarray, min_pct: float, floor: float) -> np.ndarray:
    """Battery-aware weight of each client: ``floor + (1 - floor) * clip((level - min) / (100 - min), 0, 1)``."""
    share = np.clip((np.asarray(battery_pct, dtype=np.float64) - min_pct) / (100.0 - min_pct), 0.0, 1.0)
    return floor + (1.0 - floor) * share


@dataclass(frozen=True)
class BatteryParams:
    """The battery-aware selector's parameters (``selector:`` with ``fl.selection: battery``)."""

    #: Weight of a client at the offline threshold (a full one has 1).
    floor: float = 0.1

    def __post_init__(self) -> None:
        check_ranges(self, floor="(0, 1]")


class BatterySelector(Selector):
    """Battery-aware: the more energy above the threshold, the likelier to be picked."""

    Params = BatteryParams

    def __init__(self, floor: float = 0.1) -> None:
        self.floor = float(floor)

    def select(self, online: np.ndarray, n: int, generator: np.random.Generator, view: CoordinatorView) -> np.ndarray:
        w = battery_weights(view.battery_pct_at(online), view.min_pct, self.floor)
        return np.sort(_weighted_draw(online, w, n, generator))


@dataclass(frozen=True)
class OortParams:
    """Oort's parameters (``selector:`` with ``fl.selection: oort``)."""

    #: Share of the slots for never-seen clients.
    exploration: float = 0.2
    #: Exponent of the system utility (T / t_i) ** straggler_penalty of a client slower than T.
    straggler_penalty: float = 2.0
    #: Preferred round duration T in seconds; null: the median reported duration.
    preferred_duration_s: Optional[float] = None

    def __post_init__(self) -> None:
        check_ranges(self, exploration="[0, 1]", straggler_penalty=">= 0", preferred_duration_s="> 0")


class OortSelector(Selector):
    """Oort-style: exploit clients with high statistical and system utility, explore the unseen."""

    Params = OortParams

    def __init__(self, exploration: float = 0.2, straggler_penalty: float = 2.0, preferred_duration_s: float | None = None) -> None:
        self.exploration = float(exploration)
        self.penalty = float(straggler_penalty)
        self.preferred_s = preferred_duration_s
        self.stat = np.zeros(0)  # n_i * loss_i of each client's last report
        self.duration_s = np.zeros(0)  # each client's last reported duration (NaN: never)

    def _grow(self, n: int) -> None:
        if len(self.stat) < n:
            self.stat = np.concatenate([self.stat, np.zeros(n - len(self.stat))])
            self.duration_s = np.concatenate([self.duration_s, np.full(n - len(self.duration_s), np.nan)])

    def utility(self, clients: np.ndarray) -> np.ndarray:
        """Statistical times system utility of seen ``clients``."""
        seen = ~np.isnan(self.duration_s)
        t_pref = self.preferred_s if self.preferred_s is not None else float(np.median(self.duration_s[seen]))
        t = self.duration_s[clients]
        system = np.where(t > t_pref, power(t_pref / t, self.penalty), 1.0)  # libm's pow: the same on every CPU
        return self.stat[clients] * system

    def select(self, online: np.ndarray, n: int, generator: np.random.Generator, view: CoordinatorView) -> np.ndarray:
        online = np.asarray(online, dtype=np.int64)
        if n >= len(online):
            return online.copy()
        self._grow(view.n_clients)
        seen_mask = ~np.isnan(self.duration_s[online])
        seen, unseen = online[seen_mask], online[~seen_mask]
        n_explore = min(len(unseen), max(n - len(seen), math.ceil(self.exploration * n)))
        explore = generator.choice(unseen, size=n_explore, replace=False) if n_explore else np.zeros(0, np.int64)
        exploit = _weighted_draw(seen, self.utility(seen), n - n_explore, generator) if n > n_explore else np.zeros(0, np.int64)
        return np.sort(np.concatenate([explore, exploit])).astype(np.int64)

    def observe(self, round: int, clients: np.ndarray, n_samples: np.ndarray, train_loss: np.ndarray, duration_s: np.ndarray) -> None:
        if len(clients) == 0:
            return
        self._grow(int(np.max(clients)) + 1)
        self.stat[clients] = np.asarray(n_samples, dtype=np.float64) * np.asarray(train_loss, dtype=np.float64)
        self.duration_s[clients] = duration_s

    def state_dict(self) -> dict[str, Any]:
        return {"stat": self.stat.copy(), "duration_s": self.duration_s.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stat = np.asarray(state["stat"], dtype=np.float64).copy()
        self.duration_s = np.asarray(state["duration_s"], dtype=np.float64).copy()


#: The shipped selectors by name; import paths and entry points (group ``flamingo_sim.selectors``) find the rest.
SELECTORS = Registry(SELECTOR, {"uniform": UniformSelector, "battery": BatterySelector, "oort": OortSelector})


def make_selector(name: str, params: Mapping[str, Any] | None = None, source: str = "", *, search: Sequence[Path] = ()) -> Selector:
    """The selector ``fl.selection`` names (a shipped name, an installed entry point or an import path
    ``package.module:Class``), built with the ``selector:`` section ``params`` (checked by its
    ``Params``); ``source`` is the experiment file the errors name, ``search`` folders for an
    import path's module."""
    selector: Selector = SELECTORS.build(name, params, source=source, key="fl.selection", params_key="selector", search=search)
    return selector
