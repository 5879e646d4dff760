"""What a selector and an aggregator return is held to the contract at its seam (issue 49): each
violation (wrong count, duplicates, floats, offline ids; a missing entry, a wrong shape or dtype,
non-finite values) is one PluginError line naming the plug-in, the contract and what came back,
and what keeps the contract comes back as it was returned (the same object, nothing computed on it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flamingo_sim.errors import FlamingoError, PluginError
from flamingo_sim.fl.config import AggregationConfig
from flamingo_sim.fl.strategy.aggregators import FedAvg, check_aggregate, checked_aggregate, make_aggregator
from flamingo_sim.fl.strategy.base import Aggregator, CoordinatorView, Selector
from flamingo_sim.fl.strategy.selection import UniformSelector, make_selector, select_online
from flamingo_sim.plugins import plugin_label

HERE = __name__
ONLINE = np.array([2, 3, 5, 8, 13, 21, 34, 55])  # the sorted online clients
VIEW = CoordinatorView(round=3, battery_pct=np.full(60, 80.0))


class Returns(Selector):
    """A selector that returns what the test gives it."""

    def __init__(self, value=None) -> None:
        self.value = value

    def select(self, online, n, generator, view):
        return self.value


class LazyReturns(Returns):
    """The same through the lazy path: it reads ranks 0 and 1 of the set, then returns its value."""

    def select_online(self, online, n, generator, view):
        online.take(np.array([0, 1]))
        return self.value


class Sorted:
    """An OnlineSet over a plain sorted array, which must not be listed whole."""

    def __init__(self, members: np.ndarray, whole: bool = True) -> None:
        self.m, self.whole = members, whole

    def __len__(self) -> int:
        return len(self.m)

    def take(self, positions):
        return self.m[np.asarray(positions)]

    def members(self) -> np.ndarray:
        assert self.whole, "a lazy draw of a few must not list every online client"
        return self.m


def pick(value, n=4, lazy=False):
    selector = make_selector(f"{HERE}:{'LazyReturns' if lazy else 'Returns'}")
    selector.value = value  # type: ignore[attr-defined]
    return select_online(selector, Sorted(ONLINE, whole=not lazy), n, np.random.default_rng(0), VIEW)


def contract(n=4, method="select", lazy=False):
    cls = "LazyReturns" if lazy else "Returns"
    return f"selector '{HERE}:{cls}' broke its contract at round 3: {method} must return at most {n} unique online integer client ids, got "


@pytest.mark.parametrize("value, got", [
    (np.array([2, 3, 5, 8, 13, 21, 34]), "7 ids"),  # more than asked
    (np.array([2, 3, 3, 8]), "4 ids, 1 duplicated"),
    (np.array([2, 3, 5, 5, 8, 8, 13]), "7 ids, 2 duplicated"),
    (np.array([2.0, 3.0, 5.0]), "3 float64 ids"),
    (np.array([True, False]), "2 bool ids"),
    (np.array([2, 4, 60]), "3 ids, 2 not online (e.g. 4, 60)"),
    (np.array([-1, 2]), "2 ids, 1 not online (e.g. -1)"),
    (np.array([[2, 3], [5, 8]]), "a 2-D array of shape (2, 2)"),
    ({"ids": [2, 3]}, "a dict"),
    (None, "None"),
    ([2.5, 3.0], "2 float64 ids"),
])
def test_a_selectors_pick_that_breaks_the_contract_is_one_line(value, got):
    with pytest.raises(PluginError) as exc:
        pick(value)
    assert str(exc.value) == contract() + got
    assert isinstance(exc.value, FlamingoError)  # the CLI prints it as one line, never a traceback


def test_the_lazy_path_is_held_to_the_clients_it_read():
    assert pick(np.array([2, 3]), lazy=True).tolist() == [2, 3]  # ranks 0 and 1, read through take
    with pytest.raises(PluginError) as exc:
        pick(np.array([2, 5]), lazy=True)  # 5 is online, but the selector never read it: it made it up
    assert str(exc.value) == contract(method="select_online", lazy=True) + "2 ids, 1 not online (e.g. 5)"
    with pytest.raises(PluginError, match=r"select_online must return at most 4 unique online integer client ids, got 2 float64 ids$"):
        pick(np.array([2.0, 3.0]), lazy=True)


def test_a_pick_that_keeps_the_contract_comes_back_as_it_was_returned():
    ids = np.array([3, 8, 21], dtype=np.int32)  # fewer than asked is allowed
    assert pick(ids) is ids
    assert pick([2, 3]).tolist() == [2, 3]  # a list of ints: the engine gets it as an array
    none = pick(np.zeros(0))  # nobody (an empty array is float by default)
    assert none.dtype == np.int64 and none.size == 0
    # the shipped uniform selector, both paths, at any size; its lazy path still reads only its picks
    for n in (1, 4, 8, 20):
        got = select_online(UniformSelector(), Sorted(ONLINE, whole=n >= len(ONLINE)), n, np.random.default_rng(n), VIEW)
        want = UniformSelector().select(ONLINE, n, np.random.default_rng(n), VIEW)
        assert np.array_equal(got, want) and got.dtype == np.int64


def test_a_plug_in_is_named_as_the_experiment_names_it():
    assert plugin_label(make_selector("uniform")) == "uniform"
    assert plugin_label(make_selector(f"{HERE}:Returns")) == f"{HERE}:Returns"
    assert plugin_label(Returns()) == f"{HERE}:Returns"  # built by hand: its class
    broken = make_selector("uniform")
    broken.select_online = lambda online, n, generator, view: np.array([2, 2])  # type: ignore[attr-defined]
    with pytest.raises(PluginError) as exc:
        select_online(broken, Sorted(ONLINE), 2, np.random.default_rng(0), VIEW)
    assert str(exc.value).startswith("selector 'uniform' broke its contract at round 3: select_online must return at most 2 ")


# -- the aggregator ------------------------------------------------------------------------------------------------
def _global() -> dict:
    """The global state (built when a test runs: collecting the suite runs no torch kernel)."""
    return {"w": torch.zeros(2, 3), "b": torch.zeros(3), "bn.num_batches_tracked": torch.tensor(4)}


class Gives(Aggregator):
    """An aggregator that returns what the test gives it."""

    def __init__(self, value=None) -> None:
        self.value = value

    def aggregate(self, global_state, stacked, n_samples):
        return self.value


def aggregate(value):
    agg = make_aggregator(AggregationConfig(name=f"{HERE}:Gives"))
    agg.value = value  # type: ignore[attr-defined]
    stacked = {k: torch.stack([v, v]) for k, v in _global().items()}
    return checked_aggregate(agg, _global(), stacked, torch.tensor([1.0, 2.0]), 7)


AGG = (f"aggregator '{HERE}:Gives' broke its contract at round 7: aggregate must return the global state's 3 entries with their "
       "shapes and dtypes, all values finite, got ")


def _with(**changes):
    return {**{k: v.clone() for k, v in _global().items()}, **changes}


@pytest.mark.parametrize("value, got", [
    (lambda: torch.zeros(3), "a Tensor"),
    (lambda: None, "None"),
    (lambda: {"w": torch.zeros(2, 3), "b": torch.zeros(3)}, "2 entries, 1 missing (e.g. 'bn.num_batches_tracked')"),
    (lambda: {**_global(), "extra": torch.zeros(1)}, "4 entries, 1 unexpected (e.g. 'extra')"),
    (lambda: _with(w=torch.zeros(3, 2)), "'w' of shape (3, 2), not (2, 3)"),
    (lambda: _with(b=torch.zeros(1, 3)), "'b' of shape (1, 3), not (3,)"),
    (lambda: _with(w=torch.zeros(2, 3, dtype=torch.float64)), "'w' as torch.float64, not torch.float32"),
    (lambda: _with(**{"bn.num_batches_tracked": torch.tensor(4.0)}), "'bn.num_batches_tracked' as torch.float32, not torch.int64"),
    (lambda: _with(w=[[0.0] * 3] * 2), "'w' as a list"),
    (lambda: _with(w=torch.tensor([[0.0, float("nan"), 1.0], [2.0, 3.0, float("nan")]])), "'w' with 2 non-finite values (nan)"),
    (lambda: _with(b=torch.tensor([float("inf"), 0.0, float("-inf")])), "'b' with 2 non-finite values (-inf, inf)"),
])
def test_an_aggregate_that_breaks_the_contract_is_one_line(value, got):
    with pytest.raises(PluginError) as exc:
        aggregate(value())
    assert str(exc.value) == AGG + got


def test_an_aggregate_that_keeps_the_contract_comes_back_as_it_was_returned():
    state = _with()
    assert aggregate(state) is state
    # a half-precision entry whose sum overflows is still finite: no false alarm
    big = {"h": torch.full((1000,), 60000.0, dtype=torch.float16)}
    assert check_aggregate(FedAvg(), big, big) is big
    # the shipped FedAvg's aggregate is the engine's, unchanged
    stacked = {k: torch.stack([v + 1, v + 3]) if v.is_floating_point() else torch.stack([v, v]) for k, v in _global().items()}
    want = FedAvg().aggregate(_global(), stacked, torch.tensor([1.0, 1.0]))
    got = checked_aggregate(FedAvg(), _global(), stacked, torch.tensor([1.0, 1.0]))
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
