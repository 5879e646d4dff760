"""The round rules on a scripted cohort whose outcome is known by hand."""

from __future__ import annotations

import numpy as np
import pytest

from flamingo_sim.fl.sim.rounds import (
    BATTERY_EXHAUSTED,
    DECLINED,
    EMPTY_ROUND_S,
    INTERRUPTED,
    KEPT,
    TOO_SLOW,
    UNAVAILABLE,
    settle_round,
)


def scripted():
    # client:            0      1      2      3      4      5      6
    return dict(
        accepted=np.array([True, False, True, True, True, True, True]),
        duration_s=np.array([100.0, 50.0, 300.0, 80.0, 200.0, 120.0, 60.0]),
        energy_j=np.array([40.0, 10.0, 90.0, 500.0, 60.0, 30.0, 20.0]),
        spare_energy_j=np.array([1000.0, 1000.0, 1000.0, 200.0, 1000.0, 1000.0, 1000.0]),
        online_at_finish=np.array([True, True, True, True, True, False, True]),
    )


def test_scripted_round_by_hand():
    s = settle_round(k=2, **scripted())
    # 1 declines; 3 needs 500 J with 200 J spare; 5's trace goes offline; 6 (60 s) and 0 (100 s)
    # are the two fastest of {0, 2, 4, 6}; 4 (200 s) and 2 (300 s) are too slow.
    assert s.reason.tolist() == [KEPT, DECLINED, TOO_SLOW, BATTERY_EXHAUSTED, TOO_SLOW, UNAVAILABLE, KEPT]
    assert s.kept.tolist() == [6, 0]
    assert s.duration_s == 100.0
    # spent: kept full; declined 0; too slow pro-rated by 100 s of their time; exhausted = spare.
    assert s.energy_spent_j.tolist() == pytest.approx([40.0, 0.0, 90.0 * 100 / 300, 200.0, 60.0 * 100 / 200, 30.0, 20.0])
    assert s.count(TOO_SLOW) == 2
    assert s.done_frac.tolist() == pytest.approx([1.0, 0.0, 1 / 3, 200 / 500, 0.5, 1.0, 1.0])


def test_deadline_drops_late_clients_and_bounds_the_round():
    s = settle_round(k=5, deadline_s=90.0, **scripted())
    assert s.kept.tolist() == [6]  # only 6 (60 s) beats 90 s among the survivors {0, 2, 4, 6}
    assert s.reason[0] == TOO_SLOW and s.reason[2] == TOO_SLOW and s.reason[4] == TOO_SLOW
    assert s.duration_s == 60.0


def test_interrupted_and_empty_rounds():
    args = scripted()
    s = settle_round(k=3, interrupted=np.array([True, False, False, False, False, False, False]), **args)
    assert s.reason[0] == INTERRUPTED
    assert s.kept.tolist() == [6, 4, 2]
    nobody = settle_round(
        k=2,
        accepted=np.zeros(2, bool),
        duration_s=np.array([10.0, 20.0]),
        energy_j=np.ones(2),
        spare_energy_j=np.ones(2) * 10,
        online_at_finish=np.ones(2, bool),
    )
    assert nobody.kept.size == 0 and nobody.duration_s == EMPTY_ROUND_S
    assert nobody.energy_spent_j.tolist() == [0.0, 0.0]
    none_selected = settle_round(
        k=2, accepted=np.zeros(0, bool), duration_s=np.zeros(0), energy_j=np.zeros(0),
        spare_energy_j=np.zeros(0), online_at_finish=np.zeros(0, bool),
    )
    assert none_selected.duration_s == EMPTY_ROUND_S


def test_ties_resolve_in_selection_order():
    s = settle_round(
        k=1,
        accepted=np.ones(3, bool),
        duration_s=np.array([5.0, 5.0, 5.0]),
        energy_j=np.ones(3),
        spare_energy_j=np.ones(3) * 10,
        online_at_finish=np.ones(3, bool),
    )
    assert s.kept.tolist() == [0]
