"""SparseVector: the numbers of a dense array, holding only the non-zero entries."""

import numpy as np
import pytest

from flamingo_sim.devices.sparse import SparseVector


def test_adds_like_a_dense_array_bit_for_bit():
    gen = np.random.default_rng(1)
    n = 10_000
    dense = np.zeros(n)
    vec = SparseVector(n, np.float64)
    for _ in range(50):
        clients = gen.integers(0, n, 13)  # repeats included: added like np.add.at
        amounts = np.where(gen.random(13) < 0.3, 0.0, gen.exponential(500.0, 13))
        np.add.at(dense, clients, amounts)
        vec.add(clients, amounts)
    assert np.array_equal(vec.dense(), dense)
    assert np.array_equal(vec.nonzero(), np.flatnonzero(dense))
    assert np.array_equal(vec.values, dense[np.flatnonzero(dense)])  # only non-zero entries are held
    assert np.array_equal(vec[[5, 17, int(vec.idx[0])]], dense[[5, 17, int(vec.idx[0])]])
    assert vec[int(vec.idx[-1])] == dense[vec.idx[-1]] and vec[-1] == dense[-1]
    assert np.array_equal(vec[10:40], dense[10:40])


def test_state_round_trip_and_dense_legacy_form():
    vec = SparseVector(8, np.int64)
    vec.add([1, 6], [2, 3])
    vec.set([4], 7)
    again = SparseVector(8, np.int64)
    again.load_state_dict(vec.state_dict())
    assert again.dense().tolist() == [0, 2, 0, 0, 7, 0, 3, 0]
    legacy = SparseVector(8, np.int64)
    legacy.load_state_dict(np.array([0, 2, 0, 0, 7, 0, 3, 0]))
    assert legacy.idx.tolist() == [1, 4, 6] and legacy.values.tolist() == [2, 7, 3]


@pytest.mark.parametrize("state,match", [
    ({"n": 9, "idx": [1], "values": [1]}, "is for 9 clients, this simulation has 8"),
    ({"n": 8, "idx": [3, 1], "values": [1, 1]}, "times_kept: the saved client ids are malformed"),
    ({"n": 8, "idx": [8], "values": [1]}, "malformed"),
    (np.zeros(5), "is for 5 clients"),
])
def test_bad_state_is_one_clear_error(state, match):
    with pytest.raises(ValueError, match=match):
        SparseVector(8, np.int64).load_state_dict(state, "times_kept")
