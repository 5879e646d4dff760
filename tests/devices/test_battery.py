from __future__ import annotations

import numpy as np
import pytest

from flamingo_sim.devices.battery import EnergyBudget, PopulationBudget, discharge_intervals

TIMES = [0, 100, 250, 400, 700]
LEVELS = [50, 49, 49, 48, 47]
VOLTS = [3.9, 3.88, 3.87, 3.86, 3.84]


def test_discharge_intervals_hand_computed():
    # 3000 mAh -> 10800 C; 1 % = 108 C. Intervals between drops: [100, 400] and [400, 700].
    iv = discharge_intervals(TIMES, LEVELS, VOLTS, 3000)
    assert list(iv["start_s"]) == [100, 400] and list(iv["end_s"]) == [400, 700]
    assert iv["energy_j"] == pytest.approx([3.87 * 108, 3.85 * 108])  # 417.96, 415.8 J
    assert iv["power_w"] == pytest.approx([417.96 / 300, 415.8 / 300])


def test_discharge_intervals_skip_charging_and_multi_percent_drops():
    # 50 -> 49 (drop), 50 (charging), 49 (drop), 47 (a 2 % drop)
    t, lv, v = [0, 100, 200, 300, 400], [50, 49, 50, 49, 47], [3.9, 3.8, 3.9, 3.8, 3.7]
    iv = discharge_intervals(t, lv, v, 1000)  # 1 % = 36 C
    assert list(iv["start_s"]) == [300] and list(iv["end_s"]) == [400]
    assert iv["energy_j"] == pytest.approx([3.75 * 36 * 2])
    with pytest.raises(ValueError, match="increasing"):
        discharge_intervals([0, 0], [1, 1], [3.8, 3.8], 1000)


def _scalar_budget(cap, steps, min_pct=10.0, reentry_pct=20.0):
    """A plain per-client re-statement of the documented model."""
    out = []
    deficit, online = 0.0, steps[0][0] >= min_pct
    for prev, now, _state, train in steps[1:]:
        deficit = max(deficit - max(now - prev, 0) / 100 * cap, 0) + train
        deficit = min(deficit, now / 100 * cap)
        lvl = 100 * (now / 100 * cap - deficit) / cap
        online = lvl >= min_pct if online else lvl >= reentry_pct
        out.append((lvl, online))
    return out


def test_energy_budget_hand_scenario():
    b = EnergyBudget(np.array([1000.0]), min_pct=10, reentry_pct=20)
    b.reset([50])
    expect = [  # (prev, now, state, training J) -> (available J, online)
        ((50, 40, -1, 100), (300, True)),
        ((40, 20, -1, 50), (50, False)),  # 5 % < 10 %: offline
        ((20, 25, 1, 0), (150, False)),  # charging repays 50 J; 15 % < re-entry 20 %
        ((25, 35, 1, 0), (350, True)),  # repays the last 100 J; 35 % >= 20 %
        ((35, 30, -1, 400), (0, False)),  # draws more than it holds: stops at 0
        ((30, 100, 1, 0), (1000, True)),
    ]
    for args, (avail, online) in expect:
        b.advance(*[np.array([a]) for a in args])
        assert b.available_j[0] == pytest.approx(avail) and bool(b.online[0]) is online, args
    assert b.deficit_j[0] == 0


def test_energy_budget_vectorised_matches_scalar_and_resumes():
    gen = np.random.default_rng(3)
    n, steps = 500, 60
    cap = gen.uniform(3e4, 1e5, n)
    lv = np.clip(np.cumsum(gen.normal(0, 6, (steps, n)), axis=0) + 60, 0, 100)
    train = gen.uniform(0, 3000, (steps, n)) * (gen.random((steps, n)) < 0.3)
    b = EnergyBudget(cap, 10, 20)
    b.reset(lv[0])
    snapshot = None
    levels = []
    for s in range(1, steps):
        b.advance(lv[s - 1], lv[s], np.sign(lv[s] - lv[s - 1]).astype(int), train[s])
        levels.append((b.level_pct.copy(), b.online.copy()))
        if s == 30:
            snapshot = b.state_dict()
    for i in range(0, n, 50):
        ref = _scalar_budget(cap[i], [(lv[0, i], None, None, None)] + [(lv[s - 1, i], lv[s, i], 0, train[s, i]) for s in range(1, steps)])
        assert [round(x, 9) for x, _ in ref] == [round(lvl[0][i], 9) for lvl in levels]
        assert [o for _, o in ref] == [bool(lvl[1][i]) for lvl in levels]
    assert (b.level_pct >= 0).all() and (b.available_j <= cap + 1e-9).all()
    c = EnergyBudget(cap, 10, 20)
    c.load_state_dict(snapshot)
    for s in range(31, steps):
        c.advance(lv[s - 1], lv[s], 0, train[s])
    assert np.array_equal(c.level_pct, b.level_pct) and np.array_equal(c.online, b.online)


def test_energy_budget_validation():
    with pytest.raises(ValueError, match="min_pct <= reentry_pct"):
        EnergyBudget(np.array([1.0]), min_pct=30, reentry_pct=20)
    b = EnergyBudget(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="training_energy_j"):
        b.advance([50, 50], [40, 40], [0, 0], [-1, 0])
    with pytest.raises(ValueError, match="level_now_pct"):
        b.advance([50, 50], [140, 40], [0, 0], [0, 0])


def _population_scenario(seed: int, n_pairs: int = 7, n_clients: int = 60, steps: int = 120):
    """Random trace steps, draws and take-offlines on clients sharing (trace, capacity) pairs."""
    gen = np.random.default_rng(seed)
    pair_cap = gen.uniform(20_000.0, 60_000.0, n_pairs)
    pair_of = gen.integers(0, n_pairs, n_clients)
    level = gen.uniform(5.0, 100.0, n_pairs)
    events = []
    for _ in range(steps):
        kind = gen.integers(0, 3)
        if kind == 0:  # a round's training draw: a few clients, some drawing nothing (on the charger);
            # the round starts between two trace ticks, where a client's own grid may read another level
            clients = np.sort(gen.choice(n_clients, size=5, replace=False))
            energy = np.where(gen.random(5) < 0.3, 0.0, gen.uniform(0.0, 8_000.0, 5))
            level = np.where(gen.random(n_pairs) < 0.3, np.clip(level + gen.normal(0.0, 4.0, n_pairs), 0.0, 100.0), level)
            events.append(("draw", level.copy(), clients, energy))
        elif kind == 1:
            new = np.clip(level + gen.normal(0.0, 6.0, n_pairs), 0.0, 100.0)
            events.append(("advance", level.copy(), new.copy(), None))
            level = new
        else:
            events.append(("offline", gen.choice(n_clients, size=2, replace=False), None, None))
    return pair_cap, pair_of, events


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_population_budget_equals_a_whole_population_budget_bit_for_bit(seed):
    pair_cap, pair_of, events = _population_scenario(seed)
    n = len(pair_of)
    start = np.linspace(8.0, 95.0, len(pair_cap))
    sparse = PopulationBudget(pair_cap, pair_of, min_pct=10.0, reentry_pct=20.0)
    full = EnergyBudget(pair_cap[pair_of], min_pct=10.0, reentry_pct=20.0)
    sparse.reset(start)
    full.reset(start[pair_of])
    peak_dev = 0
    for kind, a, b, c in events:
        if kind == "draw":
            drawn = np.zeros(n)
            drawn[b] = c
            full.advance(a[pair_of], a[pair_of], 0, drawn)
            sparse.draw(a, b, c)
        elif kind == "advance":
            full.advance(a[pair_of], b[pair_of], 0, 0.0)
            sparse.advance(a, b)
        else:
            full.take_offline(a)
            sparse.take_offline(a)
        peak_dev = max(peak_dev, len(sparse.dev))
        assert np.array_equal(sparse.online, full.online)
        assert np.array_equal(sparse.deficit_j, full.deficit_j)
        assert np.array_equal(sparse.level_pct, full.level_pct)
        probe = np.array([0, n // 2, n - 1])
        assert np.array_equal(sparse.available_j_at(probe), full.available_j_at(probe))
    assert 0 < peak_dev < n  # the scenario made clients deviate, and not all of them
    # round trip through the checkpoint form
    again = PopulationBudget(pair_cap, pair_of, min_pct=10.0, reentry_pct=20.0)
    again.load_state_dict(sparse.state_dict())
    assert np.array_equal(again.online, sparse.online) and np.array_equal(again.deficit_j, sparse.deficit_j)


def test_population_budget_rejoins_twin_once_repaid_and_reports_lost_clients():
    budget = PopulationBudget(np.array([36_000.0]), np.array([0, 0, 0]), min_pct=10.0, reentry_pct=20.0)
    budget.reset(np.array([30.0]))  # 30 % of 36 kJ = 10.8 kJ
    budget.draw(np.array([30.0]), np.array([1]), np.array([7_200.0]))  # client 1: 30 % - 20 % = 10 %, still online
    assert budget.dev.tolist() == [1]
    assert budget.level_pct_at(np.array([0, 1])).tolist() == pytest.approx([30.0, 10.0])
    budget.advance(np.array([30.0]), np.array([29.0]))  # the trace drops 1 %: client 1 at 9 % goes offline
    assert budget.online.tolist() == [True, False, True]
    assert budget.lost().tolist() == [1]  # its trace alone would keep it online
    budget.advance(np.array([29.0]), np.array([45.0]))  # charging +16 % = 5,760 J repays part of 7,200 J
    assert budget.deficit_j[1] == pytest.approx(1_440.0) and budget.dev.tolist() == [1]
    assert budget.level_pct_at(np.array([1]))[0] == pytest.approx(41.0) and budget.online[1]
    budget.advance(np.array([45.0]), np.array([50.0]))  # +5 % = 1,800 J: repaid, online like its twin
    assert budget.lost().tolist() == [] and budget.deficit_j.tolist() == [0.0, 0.0, 0.0]
    assert budget.online.tolist() == [True, True, True] and budget.level_pct.tolist() == pytest.approx([50.0] * 3)
    budget.draw(np.array([50.0]), np.array([0]), np.array([0.0]))  # the next round: client 1 rejoins its twin
    assert budget.dev.tolist() == []


def test_population_budget_refuses_another_population_and_old_checkpoints():
    budget = PopulationBudget(np.array([1_000.0, 2_000.0]), np.array([0, 1, 1]))
    other = PopulationBudget(np.array([1_000.0, 2_000.0]), np.array([1, 1, 0]))
    with pytest.raises(ValueError, match="another population"):
        budget.load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="older flamingo-sim"):
        budget.load_state_dict(EnergyBudget(np.full(3, 1_000.0)).state_dict())
    with pytest.raises(ValueError, match="pair_of must index the 2 pairs"):
        PopulationBudget(np.array([1_000.0, 2_000.0]), np.array([0, 2]))


def test_a_client_that_never_trained_is_never_lost_to_training():
    """The round starts between two trace ticks at a level below the threshold: every client
    reads it, the twin too, so a client that drew nothing stays in step with its twin."""
    budget = PopulationBudget(np.array([36_000.0]), np.array([0, 0]), min_pct=10.0, reentry_pct=20.0)
    budget.reset(np.array([12.0]))
    budget.draw(np.array([9.0]), np.array([1]), np.array([0.0]))  # on the charger: draws nothing
    assert budget.online.tolist() == [False, False] and not budget.twin.online[0]
    budget.advance(np.array([9.0]), np.array([12.0]))  # back above 10 %, below the 20 % re-entry level
    assert budget.online.tolist() == [False, False] and budget.lost().tolist() == [] and budget.dev.tolist() == []  # never deviated


# -- what mutation testing found unchecked (docs/install.md, "Mutation testing") -------------------
def test_discharge_intervals_take_integers_and_one_second_steps_and_name_bad_shapes():
    ints = discharge_intervals([0, 1, 2, 3], [50, 49, 48, 47], [4, 4, 4, 4], 1000)  # 1 s apart: strictly increasing
    assert ints["start_s"].dtype == np.float64 and ints["energy_j"].dtype == np.float64
    floats = discharge_intervals([0.0, 1.0, 2.0, 3.0], [50.0, 49.0, 48.0, 47.0], [4.0] * 4, 1000)
    for key in ("start_s", "end_s", "energy_j", "power_w"):
        assert np.array_equal(ints[key], floats[key]), key
    assert ints["power_w"].tolist() == [4.0 * 36, 4.0 * 36]  # 1 % of 1000 mAh = 36 C at 4 V, over 1 s
    message = r"^times_s, level_pct and voltage_v must be 1-D arrays of one length$"
    with pytest.raises(ValueError, match=message):
        discharge_intervals([0, 1], [50, 49, 48], [4, 4], 1000)
    with pytest.raises(ValueError, match=message):  # equal lengths, but not 1-D
        discharge_intervals([[0, 1]], [[50, 49]], [[4, 4]], 1000)
    with pytest.raises(ValueError, match=r"^times_s must be strictly increasing$"):
        discharge_intervals([0, 2, 1], [50, 49, 48], [4, 4, 4], 1000)


def test_a_population_budget_state_of_the_old_layout_is_refused_by_name():
    budget = PopulationBudget(np.array([36_000.0]), np.array([0, 0]), min_pct=10.0, reentry_pct=20.0)
    with pytest.raises(ValueError, match=r"^the energy budget was saved by an older flamingo-sim \(one array per client\); start the run afresh$"):
        budget.load_state_dict({"deficit_j": np.zeros(2), "online": np.ones(2, dtype=bool)})


# --- what mutation testing found (.ci/mutation.py core): survivors these tests kill ---


def test_discharge_intervals_of_unsigned_levels_and_a_bad_capacity():
    """Levels stored as unsigned bytes (0-100 fits one) give the float answer: the level is made
    float before it is differenced (an unsigned 49 - 50 wraps to 255 and hides every drop)."""
    t, v = [0.0, 60.0, 130.0, 200.0], [3.9, 3.85, 3.8, 3.75]
    as_bytes = discharge_intervals(t, np.array([50, 49, 48, 47], dtype=np.uint8), v, 1000)
    as_floats = discharge_intervals(t, [50.0, 49.0, 48.0, 47.0], v, 1000)
    assert len(as_floats["energy_j"]) == 2
    for key in as_floats:
        assert as_bytes[key].tolist() == as_floats[key].tolist(), key
    for bad in (0, -1000):
        with pytest.raises(ValueError, match="^capacity_mah must be positive$"):
            discharge_intervals(t, [50, 49, 48, 47], v, bad)


def test_energy_budget_refuses_a_2d_capacity_and_takes_a_floor_of_zero():
    with pytest.raises(ValueError, match="^capacity_j must be a 1-D array of positive energies$"):
        EnergyBudget(np.full((2, 2), 1000.0), min_pct=10.0, reentry_pct=20.0)  # finite and positive, but not 1-D
    budget = EnergyBudget(np.array([1000.0, 2000.0]), min_pct=0.0, reentry_pct=0.0)  # no floor: never offline for the battery
    assert budget.online.tolist() == [True, True]
    with pytest.raises(ValueError, match=r"^level_pct must be within \[0, 100\]$"):
        budget.reset([50.0, 101.0])


def _tick_levels(gen, n: int, steps: int, start: np.ndarray) -> np.ndarray:
    """(steps + 1, n) trace levels: a walk that crosses both thresholds, with flat stretches (steps that decide nothing)."""
    rows = [start]
    for _ in range(steps):
        move = np.where(gen.random(n) < 0.4, 0.0, gen.normal(0.0, 7.0, n))
        rows.append(np.clip(rows[-1] + move, 0.0, 100.0))
    return np.array(rows)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_advance_steps_is_advance_once_per_step_bit_for_bit(seed):
    """A round's trace ticks in one call (what the round loop does) leave every deficit, flag and level exactly as one
    call per tick would: deficits being repaid, clients crossing min_pct and reentry_pct both ways, one step, no step."""
    gen = np.random.default_rng(seed)
    pair_cap = gen.uniform(20_000.0, 60_000.0, 40)
    pair_of = gen.integers(0, 40, 300)
    stepwise = PopulationBudget(pair_cap, pair_of, min_pct=10.0, reentry_pct=20.0)
    batched = PopulationBudget(pair_cap, pair_of, min_pct=10.0, reentry_pct=20.0)
    start = gen.uniform(5.0, 60.0, 40)
    for b in (stepwise, batched):
        b.reset(start)
    level = start
    for round_ in range(12):
        levels = _tick_levels(gen, 40, int(gen.integers(0, 9)), level)
        clients = np.sort(gen.choice(300, size=20, replace=False))
        energy = np.where(gen.random(20) < 0.2, 0.0, gen.uniform(0.0, 9_000.0, 20))
        for b in (stepwise, batched):
            b.draw(levels[0], clients, energy)
        for prev, now in zip(levels[:-1], levels[1:]):
            stepwise.advance(prev, now)
        batched.advance_steps(levels[1:])
        if round_ % 4 == 3:
            gone = gen.choice(300, size=3, replace=False)
            stepwise.take_offline(gone)
            batched.take_offline(gone)
        level = levels[-1]
        assert np.array_equal(batched.dev, stepwise.dev)
        assert np.array_equal(batched.deficit_j, stepwise.deficit_j)
        assert np.array_equal(batched.online, stepwise.online)
        assert np.array_equal(batched.twin.online, stepwise.twin.online)
        assert np.array_equal(batched.twin.trace_pct, stepwise.twin.trace_pct)
        assert batched.online_count() == stepwise.online_count()
        assert np.array_equal(batched.lost(), stepwise.lost())
    assert len(stepwise.dev) and stepwise.dev_deficit_j.any()  # the scenario left deficits to repay across ticks


def test_advance_steps_of_a_whole_population_budget_with_deficits_and_a_nan_free_flat_walk():
    """EnergyBudget.advance_steps with some clients owing energy: the deficit carried step by step, the flags resolved at once."""
    gen = np.random.default_rng(7)
    cap = gen.uniform(20_000.0, 60_000.0, 50)
    a, b = EnergyBudget(cap, min_pct=15.0, reentry_pct=25.0), EnergyBudget(cap, min_pct=15.0, reentry_pct=25.0)
    start = gen.uniform(10.0, 40.0, 50)
    for x in (a, b):
        x.reset(start)
        x.advance(start, start, 0, np.where(gen.random(50) < 0.5, 3_000.0, 0.0) if x is a else 0.0)
    b.deficit_j, b.online = a.deficit_j.copy(), a.online.copy()
    levels = _tick_levels(gen, 50, 6, start)
    for prev, now in zip(levels[:-1], levels[1:]):
        a.advance(prev, now, 0, 0.0, check=False)
    b.advance_steps(levels[1:])
    assert np.array_equal(a.deficit_j, b.deficit_j) and np.array_equal(a.online, b.online) and np.array_equal(a.trace_pct, b.trace_pct)
    b.advance_steps(levels[:0])  # no step: nothing moves
    assert np.array_equal(a.online, b.online)
    with pytest.raises(ValueError, match="steps"):
        b.advance_steps(levels[:, :3])


@pytest.mark.parametrize("pct", [0.0, 10.0, 20.0, 33.3, 99.99, 100.0])
def test_level_thresholds_decide_exactly_as_the_effective_levels(pct):
    """A trace level reaches pct with nothing owed exactly when it is at least the battery's threshold: at the threshold,
    the float below it, the float32 levels around pct and random ones, for capacities whose roundings differ."""
    from flamingo_sim.devices.battery import _effective_pct, _level_threshold

    gen = np.random.default_rng(int(pct * 100))
    cap = np.concatenate([gen.uniform(5_000.0, 80_000.0, 400), [36_000.0, 3.0 * 3.85 * 3600, 1e-3]])
    at = _level_threshold(cap, pct)
    if at is None:  # a level no trace level reaches on some battery (100 % may round below itself): computed instead
        assert pct == 100.0 and not np.all(_effective_pct(cap, 0.0, np.full(len(cap), 100.0)) >= pct)
        return
    near = np.float32(pct) + np.arange(-4, 5, dtype=np.float32) * np.spacing(np.float32(max(pct, 1.0)))
    xs = [at, np.nextafter(at, -np.inf), np.nextafter(at, np.inf), *[np.full(len(cap), float(v)) for v in near],
          gen.uniform(0.0, 100.0, len(cap)), np.full(len(cap), np.nan), np.zeros(len(cap)), np.full(len(cap), 100.0)]
    with np.errstate(over="ignore"):  # the float above -inf (pct 0's threshold) overflows to -inf on the way: still below
        for x in xs:
            assert np.array_equal(_effective_pct(cap, 0.0, x) >= pct, x >= at)
    if pct > 0:
        assert np.all(_effective_pct(cap, 0.0, at) >= pct) and not np.any(_effective_pct(cap, 0.0, np.nextafter(at, -np.inf)) >= pct)


def test_advance_steps_on_levels_at_the_thresholds_is_advance_once_per_step():
    """Trace levels that sit on min_pct and reentry_pct and on the float32 values around them (where an effective level
    rounds either way, battery by battery): the batched twin decides as the step-by-step one."""
    gen = np.random.default_rng(11)
    cap = gen.uniform(20_000.0, 60_000.0, 300)
    values = np.array([v for c in (10.0, 20.0) for v in np.float32(c) + np.arange(-3, 4, dtype=np.float32) * np.spacing(np.float32(c))]
                      + [5.0, 15.0, 50.0], dtype=np.float32).astype(np.float64)
    a, b = EnergyBudget(cap, min_pct=10.0, reentry_pct=20.0), EnergyBudget(cap, min_pct=10.0, reentry_pct=20.0)
    start = gen.choice(values, 300)
    a.reset(start)
    b.reset(start)
    for _ in range(20):
        levels = gen.choice(values, (int(gen.integers(1, 6)), 300))
        for now in levels:
            a.advance(a.trace_pct, now, 0, 0.0, check=False)
        b.advance_steps(levels)
        assert np.array_equal(a.online, b.online) and np.array_equal(a.deficit_j, b.deficit_j)
    assert b.level_thresholds() is not None
