"""Android's scheduling of training beside the owner's app: placements by hand, the step's price, the physics as properties."""

from __future__ import annotations

import dataclasses

import pytest

from flamingo_sim.devices.execution import InterferenceModel
from flamingo_sim.devices.profiles import MODELS, PROFILE_SETS, load_profile
from flamingo_sim.devices.scheduling import CFS_WEIGHTS, REGIONS_PER_STEP, contention, place, spin_s
from flamingo_sim.devices.soc import AndroidScheduling, load_phones, state_space

ANDROID = InterferenceModel()
FAIR = InterferenceModel(model="fair")


@pytest.fixture(scope="module")
def phones(profiles_dir):
    return load_phones(profiles_dir)


def test_the_unpinned_baseline_yields_the_owners_cores_where_its_cpuset_has_free_ones(phones):
    # Galaxy S10e, foreground cpuset 0-7: PyTorch's four threads on the highest-capacity cores 7 (Prime), 6, 5, 4; the
    # owner's two busy threads take the two highest-capacity big cores, 7 and 6, and the kernel moves the training
    # threads there to free CPUs of the cpuset: the little cores 3 and 2
    pl = place(phones["galaxy_s10e"], (4, 5, 6, 7), False, ANDROID)
    assert (pl.idle, pl.train, pl.foreground) == ((7, 6, 5, 4), (3, 2, 5, 4), (7, 6))
    assert pl.train_share == (1.0,) * 4 and pl.foreground_share == (1.0, 1.0)
    # the same threads pinned (Flamingo's 4567) cannot move: two cores shared, on Android 12 by two cgroups of 1024 each
    pinned = place(phones["galaxy_s10e"], (4, 5, 6, 7), True, ANDROID)
    assert pinned.train == (4, 5, 6, 7) and pinned.foreground == (7, 6)
    assert pinned.train_share == (1.0, 1.0, 0.5, 0.5) and pinned.foreground_share == (0.5, 0.5)


def test_the_pixel_3s_foreground_cpuset_keeps_cores_4_and_5_for_the_top_app(phones):
    # crosshatch init.hardware.rc: foreground 0-3,6-7, top-app 0-7. The unpinned baseline sits on 7, 6 and two little
    # cores; the owner's app finds 5 and 4 idle: nothing is shared or moved
    pl = place(phones["pixel_3"], (4, 5, 6, 7), False, ANDROID)
    assert pl.idle == (7, 6, 3, 2) and pl.train == pl.idle and pl.foreground == (5, 4)
    # Flamingo's "4" pinned: core 4 is outside the cpuset, so its thread runs on a free big core inside it (6)
    assert place(phones["pixel_3"], (4,), True, ANDROID).idle == (6,)
    # a background app (cpuset 0-1) doubles its four threads up on two little cores
    bg = place(phones["pixel_3"], (4, 5, 6, 7), False, dataclasses.replace(ANDROID, app_state="background"))
    assert sorted(bg.idle) == [0, 0, 1, 1]


def test_a_shared_core_split_by_group_shares_from_android_12_and_by_nice_weights_before(phones):
    pixel = phones["pixel_3"]
    nice10 = dataclasses.replace(ANDROID, training_nice=10)
    # Android 12: two cgroups with the kernel's default shares split the core equally whatever the nice values. On the
    # S10e (every cpuset 0-7) Flamingo's pinned 4567 and the owner's two threads meet on cores 7 and 6 (on the Pixel 3 the
    # foreground cpuset keeps them apart, so nothing is split and the rule never ran: issue 50)
    s10e = phones["galaxy_s10e"]
    for model in (ANDROID, nice10):
        pl = place(s10e, (4, 5, 6, 7), True, model)
        assert pl.foreground == (7, 6) and pl.train == (4, 5, 6, 7)
        assert pl.train_share == (1.0, 1.0, 0.5, 0.5) and pl.foreground_share == (0.5, 0.5)
    # Android 11: one cgroup, CFS weights 110 (nice 10) against 1024 (nice 0)
    old = dataclasses.replace(pixel, android=AndroidScheduling(11, {"top_app": tuple(range(8)), "foreground": tuple(range(8)),
                                                                   "background": (0, 1)}))
    pl = place(old, (4, 5, 6, 7), True, nice10)
    w_t, w_f = CFS_WEIGHTS[10], CFS_WEIGHTS[0]
    assert pl.train_share == pytest.approx((1.0, 1.0, w_t / (w_t + w_f), w_t / (w_t + w_f)))
    assert pl.foreground_share == pytest.approx((w_f / (w_t + w_f),) * 2)


def test_the_price_of_a_moved_step_by_hand(phones, profiles_dir):
    # Galaxy S10e MobileNetV2 baseline, android: threads from 7 and 6 move to little cores 3 and 2 (speed 0.29 of an A76).
    prof = load_profile(profiles_dir, "galaxy_s10e", "mobilenet_v2")
    lat = prof.baseline.step_latency_s
    got = contention(prof.phone, (4, 5, 6, 7), False, ANDROID, lat, "mobilenet_v2")
    # the step ends with the moved threads: 1/0.29 of the profiled step (whose slowest thread ran on a 1.0 core)
    assert got.latency_factor == pytest.approx(1 / 0.29)
    assert got.foreground_loss == 0.0
    # energy: each thread's CPU time at its core's CoreMark power, plus its wait spun at most 1e6 x 4 cycles a region;
    # idle: Prime (1.08 W) busy 1/1.17 of the step and spinning, three A76 (0.84 W) busy all of it
    spin = 1e6 * 4 / 2419.2e6 * REGIONS_PER_STEP["mobilenet_v2"] / lat  # in profiled steps, at 2.42 GHz
    spin_prime = 1e6 * 4 / 2841.6e6 * REGIONS_PER_STEP["mobilenet_v2"] / lat
    idle = 1.08 * (1 / 1.17 + min(spin_prime, 1 - 1 / 1.17)) + 3 * 0.84
    used = 2 * 0.84 * (1 + min(spin, 1 / 0.29 - 1)) + 2 * 0.15 * (1 / 0.29)
    assert got.energy_factor == pytest.approx(used / idle)
    assert spin_s("pthreadpool", 2419.2) == pytest.approx(1.6534e-3, rel=1e-4) and spin_s("libomp", 1000.0) == 0.2


def _every_case(phones, profiles_dir):
    for pset in PROFILE_SETS:
        for name, phone in phones.items():
            for model in MODELS:
                prof = load_profile(profiles_dir, name, model, phones=phones, profile_set=pset)
                for c in prof.all_choices:
                    yield pset, phone, model, c


@pytest.mark.parametrize("model", [ANDROID, FAIR, dataclasses.replace(ANDROID, app_state="background"),
                                   dataclasses.replace(ANDROID, app_state="top_app"), dataclasses.replace(ANDROID, runtime="libomp"),
                                   dataclasses.replace(ANDROID, foreground_threads=4)], ids=str)
def test_physics_over_every_phone_choice_and_set(phones, profiles_dir, model):
    """Every share in [0, 1]; a contended step never faster; its cpu_time energy at most the earlier full-power
    accounting's (the latency factor) and at least half of the cheapest core's energy per unit of work over the dearest's
    (the half: a profiled step's own waits, spun, which a moved step may not have); the owner loses a share in [0, 1)."""
    n = 0
    for pset, phone, dnn, c in _every_case(phones, profiles_dir):
        types = phone.soc.core_types.values()
        per_work = [t.power_w / t.speed for t in types]
        lo = 0.5 * min(per_work) / max(per_work)
        for pinned in (True, False):
            got = contention(phone, c.cores, pinned, model, c.step_latency_s, dnn)
            pl = got.placement
            assert all(0.0 < s <= 1.0 for s in pl.train_share) and all(0.0 < s <= 1.0 for s in pl.foreground_share)
            assert 0.0 <= got.foreground_loss < 1.0
            assert got.latency_factor >= 1.0 - 1e-12
            full = contention(phone, c.cores, pinned, dataclasses.replace(model, energy="full_power"), c.step_latency_s, dnn)
            assert full.energy_factor == pytest.approx(got.latency_factor)
            assert lo * (1 - 1e-9) <= got.energy_factor <= max(1.0, got.latency_factor) * (1 + 1e-9), (pset, phone.name, dnn, c.label)
            n += 1
    assert n == 2 * sum(len(load_profile(profiles_dir, p, m, phones=phones, profile_set=s).all_choices)
                        for s in PROFILE_SETS for p in phones for m in MODELS)


def test_without_the_owners_use_nothing_changes(phones, profiles_dir):
    # no owner threads: every thread keeps its core, the step keeps its profiled latency and energy
    quiet = dataclasses.replace(ANDROID, foreground_threads=0)
    for name, phone in phones.items():
        for c in state_space(phone.layout):
            for pinned in (True, False):
                got = contention(phone, c.cores, pinned, quiet, 10.0, "mobilenet_v2")
                assert (got.latency_factor, got.energy_factor, got.foreground_loss) == pytest.approx((1.0, 1.0, 0.0)), (name, c.label)


def test_the_contention_table_is_its_results_file_and_the_model(profiles_dir):
    """``flamingo-sim profiles --contention --json`` regenerates docs/results/contention/paper.json exactly (what the
    modelling notes quote), and its rows are :func:`contention`'s."""
    import json
    from pathlib import Path

    from flamingo_sim.devices.cli import contention_report

    rows = contention_report([profiles_dir], "paper")
    saved = json.loads((Path(__file__).resolve().parents[2] / "docs" / "results" / "contention" / "paper.json").read_text())
    assert saved["rows"] == json.loads(json.dumps(rows))
    s10e = {(r["choice"], r["pinned"], r["interference"]): r for r in rows if (r["phone"], r["model"]) == ("galaxy_s10e", "mobilenet_v2")}
    assert s10e[("4567", False, "android")]["latency_factor"] == pytest.approx(1 / 0.29)
    assert s10e[("4567", True, "android")]["foreground_loss"] == 0.5 and s10e[("7", True, "android")]["foreground_loss"] == 0.0
