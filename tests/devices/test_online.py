"""The online index answers exactly what the whole-population flag array would."""

import numpy as np
import pytest

from flamingo_sim.devices.battery import PopulationBudget
from flamingo_sim.devices.online import OnlineClients, OnlineIndex


def _flags(pair_of, pair_online, dev, dev_online):
    out = pair_online[pair_of].copy()
    out[dev] = dev_online
    return out


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 14])
def test_count_take_rank_match_flatnonzero(block):
    gen = np.random.default_rng(block)
    n, n_pairs = 1000, 37
    pair_of = gen.integers(0, n_pairs, n)
    index = OnlineIndex(pair_of, n_pairs, block=block)
    for _ in range(12):  # pairs flip back and forth; deviated clients come and go
        pair_online = gen.random(n_pairs) < 0.6
        index.update(pair_online)
        dev = np.unique(gen.integers(0, n, gen.integers(0, 50)))
        dev_online = gen.random(len(dev)) < 0.5
        members = np.flatnonzero(_flags(pair_of, pair_online, dev, dev_online))
        assert index.count(dev, dev_online) == len(members)
        assert np.array_equal(index.members(dev, dev_online), members)
        assert np.array_equal(index.take(np.arange(len(members)), dev, dev_online), members)
        picks = gen.permutation(len(members))[:9]
        assert np.array_equal(index.take(picks, dev, dev_online), members[picks])
        probe = gen.integers(0, n, 20)
        assert np.array_equal(index.rank(probe, dev, dev_online), np.searchsorted(members, probe))


def test_take_out_of_range_is_an_index_error():
    index = OnlineIndex(np.zeros(10, dtype=np.int64), 1, block=4)
    index.update(np.array([True]))
    empty = np.zeros(0, dtype=np.int64)
    with pytest.raises(IndexError, match=r"\[0, 10\)"):
        index.take(np.array([10]), empty, np.zeros(0, dtype=bool))


def test_online_clients_leave_out_the_excluded():
    gen = np.random.default_rng(3)
    n, n_pairs = 500, 11
    pair_of = gen.integers(0, n_pairs, n)
    index = OnlineIndex(pair_of, n_pairs, block=16)
    pair_online = gen.random(n_pairs) < 0.7
    index.update(pair_online)
    dev = np.array([3, 40, 41, 300])
    dev_online = np.array([True, False, True, False])
    exclude = np.array([0, 3, 41, 42, 299, 300, 499])  # some online, some not
    expected = np.setdiff1d(np.flatnonzero(_flags(pair_of, pair_online, dev, dev_online)), exclude)
    online = OnlineClients(index, dev, dev_online, exclude)
    assert len(online) == len(expected)
    assert np.array_equal(online.take(np.arange(len(expected))), expected)
    assert np.array_equal(online.take([len(expected) - 1, 0]), expected[[-1, 0]])
    assert np.array_equal(np.asarray(online), expected)


def test_population_budget_index_follows_draws_advances_and_resets():
    gen = np.random.default_rng(0)
    n_pairs, n = 6, 300
    pair_of = gen.integers(0, n_pairs, n)
    budget = PopulationBudget(np.full(n_pairs, 40_000.0), pair_of, min_pct=10, reentry_pct=20, block=32)
    level = np.array([50.0, 12.0, 9.0, 80.0, 30.0, 11.0])
    budget.reset(level)
    for _ in range(30):
        clients = np.unique(gen.integers(0, n, 8))
        budget.draw(level, clients, gen.uniform(0, 6000, len(clients)))
        budget.take_offline(clients[:1])
        now = np.clip(level + gen.normal(0, 4, n_pairs), 0, 100)
        budget.advance(level, now)
        level = now
        members = np.flatnonzero(budget.online)
        online = budget.online_clients()
        assert budget.online_count() == len(online) == len(members)
        assert np.array_equal(online.take(np.arange(len(members))), members)
    state = budget.state_dict()
    assert "pair_of" not in state and state["n_clients"] == n  # a checksum, not the whole array
    again = PopulationBudget(np.full(n_pairs, 40_000.0), pair_of, min_pct=10, reentry_pct=20, block=32)
    again.load_state_dict(state)
    assert np.array_equal(again.online_clients().members(), np.flatnonzero(budget.online))
    other = PopulationBudget(np.full(n_pairs, 40_000.0), np.roll(pair_of, 1), min_pct=10, reentry_pct=20)
    with pytest.raises(ValueError, match="another population"):
        other.load_state_dict(state)
