"""Android's scheduling of training beside the owner's app: placements by hand, the step's price, the physics as properties."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from flamingo_sim.devices.execution import InterferenceModel
from flamingo_sim.devices.profiles import MODELS, PROFILE_SETS, load_profile
from flamingo_sim.devices.scheduling import (
    CFS_WEIGHTS,
    REGIONS_PER_STEP,
    TOP_APP_BOOST_NICE,
    App,
    apps,
    contention,
    dram_utilisation,
    place,
    schedule,
    spin_s,
    stall_share,
)
from flamingo_sim.devices.soc import AndroidScheduling, load_phones, state_space

ANDROID = InterferenceModel()
FAIR = InterferenceModel(model="fair")
MAINLINE = InterferenceModel(scheduler="mainline")
SLOWEST = InterferenceModel(step="slowest_thread", owner_memory_share=0.0)  # the CPU's share only: memory has its own test
APART = InterferenceModel(owner_memory_share=0.0)


@pytest.fixture(scope="module")
def phones(profiles_dir):
    return load_phones(profiles_dir)


def test_the_unpinned_baseline_rotates_with_the_owner_and_a_pinned_choice_pushes_it_to_little_cores(phones):
    # Galaxy S10e, every cpuset 0-7. PyTorch's four threads start first on the highest-capacity cores 7 (Prime), 6, 5, 4;
    # the owner's two busy threads wake on the highest-capacity idle CPUs: the little 3 and 2 (prefer_idle takes any
    # idle CPU). No big CPU is free, so they stay misfits, and WALT rotates the six busy threads over 7-2
    pl = place(phones["galaxy_s10e"], (4, 5, 6, 7), False, ANDROID)
    assert (pl.idle, pl.train, pl.foreground, pl.alone) == ((7, 6, 5, 4), (7, 6, 5, 4), (3, 2), (7, 6))
    assert pl.rotation == (7, 6, 5, 4, 3, 2) and pl.train_share == (1.0,) * 4 and pl.foreground_share == (1.0, 1.0)
    # pinned (Flamingo's 4567): its mask keeps it off the little cores, so no swap is allowed: the owner stays there
    pinned = place(phones["galaxy_s10e"], (4, 5, 6, 7), True, ANDROID)
    assert pinned.train == (7, 6, 5, 4) and pinned.foreground == (3, 2) and pinned.rotation == ()
    # mainline (no rotation): the unpinned baseline leaves the owner on the little cores too
    assert place(phones["galaxy_s10e"], (4, 5, 6, 7), False, MAINLINE).rotation == ()
    # Flamingo's one Prime core: the owner takes the next idle big cores, 6 and 5
    assert place(phones["galaxy_s10e"], (7,), True, ANDROID).foreground == (6, 5)


def test_the_owners_loss_and_the_step_by_hand(phones, profiles_dir):
    prof = load_profile(profiles_dir, "galaxy_s10e", "mobilenet_v2")
    lat = prof.baseline.step_latency_s
    # rotation over Prime 1.17, three A76 1.0 and two A55 0.29: each of the six threads runs at the mean, 4.75 / 6
    mean = (1.17 + 3 * 1.0 + 2 * 0.29) / 6
    got = contention(prof.phone, (4, 5, 6, 7), False, SLOWEST, lat, "mobilenet_v2")
    assert got.latency_factor == pytest.approx(1.0 / mean, rel=1e-12)  # alone the slowest thread ran at 1.0
    # alone the owner's threads would run on 7 (1.17) and 6 (1.0)
    assert got.foreground_loss == pytest.approx(((1 - mean / 1.17) + (1 - mean)) / 2, rel=1e-12)
    assert got.foreground_loss == pytest.approx(0.2658, abs=1e-4)
    # pinned 4567: training keeps its cores (no change to the step); the owner runs on two A55s
    pin = contention(prof.phone, (4, 5, 6, 7), True, APART, lat, "mobilenet_v2")
    assert (pin.latency_factor, pin.energy_factor) == (1.0, 1.0)
    assert pin.foreground_loss == pytest.approx(((1 - 0.29 / 1.17) + (1 - 0.29)) / 2, rel=1e-12)
    # Flamingo's 7: the owner loses the Prime for one thread: 1 - 1.0 / 1.17 on it, nothing on the other
    one = contention(prof.phone, (7,), True, APART, prof.best.step_latency_s, "mobilenet_v2")
    assert one.foreground_loss == pytest.approx((1 - 1.0 / 1.17) / 2, rel=1e-12) and one.latency_factor == 1.0
    # mainline: no rotation, the unpinned baseline costs the owner as much as the pinned one
    main = contention(prof.phone, (4, 5, 6, 7), False, dataclasses.replace(SLOWEST, scheduler="mainline"), lat, "mobilenet_v2")
    assert main.foreground_loss == pytest.approx(pin.foreground_loss, rel=1e-12) and main.latency_factor == 1.0
    assert spin_s("pthreadpool", 2419.2) == pytest.approx(1.6534e-3, rel=1e-4) and spin_s("libomp", 1000.0) == 0.2


def test_the_amdahl_step_by_hand(phones, profiles_dir):
    """``step: amdahl``: 20 % of a MobileNetV2 step serial on the calling thread, 80 % parallel; the rotation's six
    threads each at the mean speed m = 4.75 / 6 of 7-2. pthreadpool steals work (the parallel part over the sum of the
    rates), OpenMP splits it statically (over the slowest rate); a memory stall ``k`` per unit of work that no core
    speed changes shrinks what the little cores cost."""
    prof = load_profile(profiles_dir, "galaxy_s10e", "mobilenet_v2")
    lat, m = prof.baseline.step_latency_s, 4.75 / 6
    got = contention(prof.phone, (4, 5, 6, 7), False, ANDROID, lat, "mobilenet_v2")
    assert got.latency_factor == pytest.approx((0.2 / m + 0.8 / (4 * m)) / (0.2 / 1.17 + 0.8 / 4.17), rel=1e-12)
    omp = contention(prof.phone, (4, 5, 6, 7), False, dataclasses.replace(ANDROID, runtime="libomp"), lat, "mobilenet_v2")
    assert omp.latency_factor == pytest.approx((0.2 / m + 0.2 / m) / (0.2 / 1.17 + 0.2 / 1.0), rel=1e-12)
    # with the profile's stall: 1 - T0 / L, T0 = X (0.2 / 1.17 + 0.8 / 4) and X one A76's step
    x = next(c for c in prof.all_choices if c.label == "4").step_latency_s
    stall = stall_share(prof, (4, 5, 6, 7))
    assert stall == pytest.approx(1 - x * (0.2 / 1.17 + 0.2) / lat, rel=1e-12) and stall == pytest.approx(0.9863, abs=1e-4)
    k = (0.2 / 1.17 + 0.2) * (1 / (1 - stall) - 1) / 0.4
    alone = [1 / (1 / 1.17 + k)] + [1 / (1 + k)] * 3
    pool = (1 / (1 / 1.17 + k) + 3 / (1 + k) + 2 / (1 / 0.29 + k)) / 6
    real = contention(prof.phone, (4, 5, 6, 7), False, ANDROID, lat, "mobilenet_v2", stall)
    assert real.latency_factor == pytest.approx((0.2 / pool + 0.2 / pool) / (0.2 / alone[0] + 0.8 / sum(alone)), rel=1e-12)
    assert 1.0 < real.latency_factor < 1.02 < got.latency_factor  # 98.6 % stall: the little cores barely matter
    # a one-thread choice has no stall and no serial/parallel split to change
    assert stall_share(prof, (7,)) == pytest.approx(0.0, abs=1e-3)


def test_the_energy_of_a_rotating_step_by_hand(phones, profiles_dir):
    # the baseline's rotation: every training thread spends 1/6 of its time on each of 7-2; its power per CPU-second is
    # the mean of the six cores' CoreMark power (no core shared: each holds its CPU whole), its busy time 1/mean of a
    # profiled step, and no thread waits (they all run at the same rate)
    prof = load_profile(profiles_dir, "galaxy_s10e", "mobilenet_v2")
    lat = prof.baseline.step_latency_s
    got = contention(prof.phone, (4, 5, 6, 7), False, SLOWEST, lat, "mobilenet_v2")
    mean = (1.17 + 3 * 1.0 + 2 * 0.29) / 6
    power = (1.08 + 3 * 0.84 + 2 * 0.15) / 6
    used = 4 * power / mean
    spin_prime = 1e6 * 4 / 2841.6e6 * REGIONS_PER_STEP["mobilenet_v2"] / lat  # in profiled steps, at 2.84 GHz
    idle = 1.08 * (1 / 1.17 + min(spin_prime, 1 - 1 / 1.17)) + 3 * 0.84  # alone: the Prime waits for the A76s
    assert got.energy_factor == pytest.approx(used / idle, rel=1e-12)


def test_the_pixel_3s_foreground_cpuset_keeps_cores_4_and_5_for_the_top_app(phones):
    # crosshatch init.hardware.rc: foreground 0-3,6-7, top-app 0-7. The unpinned baseline sits on 7, 6 and two little
    # cores (rotating among themselves: a misfit on 3 may swap with a thread on 7 or 6, not with the owner's on 5 or 4,
    # where training may not run); the owner's app finds 5 and 4 idle: nothing is shared or moved
    pl = place(phones["pixel_3"], (4, 5, 6, 7), False, ANDROID)
    assert pl.idle == (7, 6, 3, 2) and pl.train == pl.idle and pl.foreground == (5, 4) and pl.rotation == (7, 6, 3, 2)
    # Flamingo's "4" pinned: core 4 is outside the cpuset, so its thread runs on a free big core inside it (6)
    assert place(phones["pixel_3"], (4,), True, ANDROID).idle == (6,)
    # a background app (cpuset 0-1) doubles its four threads up on two little cores
    bg = place(phones["pixel_3"], (4, 5, 6, 7), False, dataclasses.replace(ANDROID, app_state="background"))
    assert sorted(bg.idle) == [0, 0, 1, 1]


def test_a_shared_core_split_by_group_load_from_android_12_and_by_nice_weights_before(phones):
    # both apps confined to 6 and 7 (cpusets), training pinned there too: four training threads and the owner's two
    crowded = {"top_app": (6, 7), "foreground": (6, 7), "background": (0, 1)}
    s10e = dataclasses.replace(phones["galaxy_s10e"], android=AndroidScheduling(12, crowded))
    # Android 12: calc_group_shares gives each group's 1024 to its CPUs by its load there: training (4 x 1024 over two
    # CPUs) 512 on each, the owner (2 x 9548, one on each) 512 on each: a training thread 512/1024 x 1/2, an owner's 1/2
    pl = place(s10e, (4, 5, 6, 7), False, ANDROID)
    assert pl.train == (7, 6, 7, 6) and pl.foreground == (7, 6)
    assert pl.train_share == pytest.approx((0.25,) * 4) and pl.foreground_share == pytest.approx((0.5, 0.5))
    # one owner thread only: the owner's group weighs 1024 on 7, training's 512 there: 1/3 and 2/3
    one = place(s10e, (4, 5, 6, 7), False, dataclasses.replace(ANDROID, foreground_threads=1))
    assert one.foreground == (7,) and one.foreground_share == pytest.approx((2 / 3,))
    assert one.train_share == pytest.approx((1 / 6, 0.5, 1 / 6, 0.5))
    # Android 11: one cgroup, CFS weights: training nice 0 (1024) against the top app's boost, nice -10 (9548)
    old = dataclasses.replace(s10e, android=AndroidScheduling(11, crowded))
    pl = place(old, (4, 5, 6, 7), False, ANDROID)
    w_t, w_f = CFS_WEIGHTS[0], CFS_WEIGHTS[TOP_APP_BOOST_NICE]
    assert (w_t, w_f) == (1024, 9548)
    assert pl.train_share == pytest.approx((w_t / (2 * w_t + w_f),) * 4) and pl.foreground_share == pytest.approx((w_f / (2 * w_t + w_f),) * 2)


def _random_app(rng) -> App:
    cpus = tuple(sorted(int(c) for c in rng.choice(8, size=int(rng.integers(1, 9)), replace=False)))
    return App(int(rng.integers(0, 6)), cpus, str(rng.choice(["foreground", "top_app", "background"])), int(rng.integers(-20, 20)),
               bool(rng.integers(0, 2)))


def test_one_scheduler_for_both_apps_every_share_in_range_and_roles_exchanged(phones):
    """400 random pairs of apps (threads, cpus, cgroup, nice, pinning) on three phones, Android 11 and 12, with and
    without rotation: every share in (0, 1], every CPU shared out exactly once, every thread's time spread over its
    slots exactly once; and the contention model builds both apps by the same rules: with training set up exactly as
    the owner's app (the top app, the same cpuset, threads and nice, unpinned), ``place`` puts training where the first
    of two such apps goes and the owner where the second goes, so exchanging the roles exchanges the placements."""
    rng = np.random.default_rng(48)
    exchanged = 0
    for k in range(400):
        phone = phones[("galaxy_s10e", "pixel_3", "mi_10")[k % 3]]
        version = (11, 12)[k % 2]
        ph = dataclasses.replace(phone, android=dataclasses.replace(phone.android, version=version))
        a, b = _random_app(rng), _random_app(rng)
        rotate = bool(k % 4 < 2)
        first, second = schedule(ph, (a, b), rotate)
        total: dict[int, float] = {}
        for th, app in ((first, a), (second, b)):
            assert len(th.home) == app.threads and all(c in app.cpus for c in th.home)
            for c, sh in zip(th.home, th.share):
                total[c] = total.get(c, 0.0) + sh
            assert all(0.0 < x <= 1.0 for x in th.share)
            for sl in th.slots:
                assert sum(f for _, f, _ in sl) == pytest.approx(1.0, rel=1e-12)
        assert total == pytest.approx(dict.fromkeys(total, 1.0), rel=1e-12), (k, a, b)
        # the symmetric set-up: training given the owner's app state, cpuset, threads and nice
        top = dataclasses.replace(ph, android=dataclasses.replace(ph.android, cpusets={**ph.android.cpusets, "top_app": b.cpus}))
        twin = InterferenceModel(app_state="top_app", foreground_threads=max(b.threads, 1), training_nice=b.nice, foreground_nice=b.nice,
                                 scheduler="walt" if rotate else "mainline")
        cores = tuple(sorted(b.cpus, reverse=True))[: twin.foreground_threads]
        if len(cores) < twin.foreground_threads:
            continue
        like = App(twin.foreground_threads, b.cpus, "top_app", b.nice, False)
        one, two = schedule(top, (like, like), rotate)
        pl = place(top, cores, False, twin)
        assert (pl.train, pl.train_share, pl.foreground, pl.foreground_share) == (one.home, one.share, two.home, two.share), k
        exchanged += 1
    assert exchanged >= 200  # most pairs have a cpuset with cores for the owner's threads: the exchange was checked on them


def test_exchanging_the_apps_roles_in_a_symmetric_setup_exchanges_their_placements(phones):
    """Training made to look like the owner's app (the top app, two unpinned threads at the top app's nice) and the
    owner's like training: the contention model's apps, exchanged, give the same threads the same places."""
    s10e = phones["galaxy_s10e"]
    as_owner = dataclasses.replace(ANDROID, app_state="top_app", training_nice=TOP_APP_BOOST_NICE, foreground_nice=TOP_APP_BOOST_NICE,
                                   foreground_threads=2)
    training, owner = apps(s10e, (6, 7), False, as_owner)
    assert dataclasses.replace(training, pinned=False) == owner  # the symmetric set-up: the two apps are alike
    t, o = schedule(s10e, (training, owner), True)
    o2, t2 = schedule(s10e, (owner, training), True)
    assert (t, o) == (o2, t2)
    # and the first to start takes the fastest cores whichever role it has
    assert t.home == (7, 6) and o.home == (5, 4)


def _every_case(phones, profiles_dir):
    for pset in PROFILE_SETS:
        for name, phone in phones.items():
            for model in MODELS:
                prof = load_profile(profiles_dir, name, model, phones=phones, profile_set=pset)
                for c in prof.all_choices:
                    yield pset, phone, model, c


@pytest.mark.parametrize("model", [ANDROID, FAIR, dataclasses.replace(ANDROID, app_state="background"),
                                   dataclasses.replace(ANDROID, app_state="top_app"), dataclasses.replace(ANDROID, runtime="libomp"),
                                   dataclasses.replace(ANDROID, foreground_threads=4), MAINLINE, SLOWEST], ids=str)
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
            assert 0.0 <= got.foreground_loss <= 1.0
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
    assert s10e[("4567", False, "android")]["latency_factor"] == pytest.approx(1.0127, abs=1e-4)
    assert s10e[("4567", True, "android")]["foreground_loss"] == pytest.approx((2 - 0.29 / 1.17 - 0.29) / 2, abs=1e-3)
    assert s10e[("7", True, "android")]["foreground_loss"] == pytest.approx((1 - 1 / 1.17) / 2, abs=5e-3)


def test_table3_as_input_sets_the_owners_loss_per_phone_and_policy(profiles_dir):
    """``owner_loss: paper``: every rung of a Table 3 phone costs the owner the paper's measured PCMark loss, the
    baseline's for the unpinned (PyTorch's default) table and Flamingo's for the pinned one; the Mi 10 (not in the
    table) keeps the model's; the step's latency and energy are the model's either way."""
    from flamingo_sim.devices.execution import TABLE3_PCMARK_PCT
    from flamingo_sim.devices.profiles import ProfileSet
    from flamingo_sim.devices.scheduling import contention_table

    names = ("galaxy_s10e", "pixel_3", "mi_10")
    ps = ProfileSet.load(profiles_dir, names, "mobilenet_v2")
    given = dataclasses.replace(ANDROID, owner_loss="paper")
    for pinned, col in ((False, 0), (True, 1)):
        model, paper = contention_table(ps, ANDROID, pinned), contention_table(ps, given, pinned)
        assert np.array_equal(model.latency_factor, paper.latency_factor) and np.array_equal(model.energy_factor, paper.energy_factor)
        for p, name in enumerate(names):
            if name in TABLE3_PCMARK_PCT:
                assert np.all(paper.foreground_loss[p] == -TABLE3_PCMARK_PCT[name][col] / 100.0)
            else:
                assert np.array_equal(paper.foreground_loss[p], model.foreground_loss[p])
    assert contention_table(ps, given, False).foreground_loss[1, 0] == pytest.approx(0.27)  # Pixel 3's baseline, -27.0 %


def test_shared_dram_slows_the_owner_by_the_queue_of_trainings_traffic(phones, profiles_dir):
    """Pixel 3, ResNet-34, PyTorch's default 4567: the owner's threads run on 5 and 4, apart from training, so only the
    shared memory costs it: (4 x 96.1 + 6 x 81.24) MiB a step over the profiled step against LPDDR4X at 3733 MT/s x 8
    bytes; the owner's memory share 0.25 waits u / (1 - u) longer."""
    prof = load_profile(profiles_dir, "pixel_3", "resnet34")
    lat = prof.baseline.step_latency_s
    u = (4 * 96.1 + 6 * 81.24) * 2**20 / lat / (3733e6 * 8)
    assert dram_utilisation(prof.phone, "resnet34", lat) == pytest.approx(u, rel=1e-12) and u == pytest.approx(0.0609, abs=1e-4)
    got = contention(prof.phone, (4, 5, 6, 7), False, ANDROID, lat, "resnet34")
    assert got.placement.foreground == (5, 4)
    assert got.foreground_loss == pytest.approx(1 - 1 / (1 + 0.34 * u / (1 - u)), rel=1e-12)
    assert got.foreground_loss == pytest.approx(0.0216, abs=1e-4)
    assert contention(prof.phone, (4, 5, 6, 7), False, dataclasses.replace(ANDROID, owner_memory_share=0.0), lat,
                      "resnet34").foreground_loss == 0.0
    assert dram_utilisation(prof.phone, "some_other_net", lat) == 0.0  # no traffic figure: no term


def test_a_run_with_table3_as_input_says_so_in_its_summary_and_printed_block(tmp_path):
    """``owner_loss: paper`` on a 2-round main job: summary.json carries the note and the printed block repeats it."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "flamingo_sim", "run", str(root / "experiments" / "openimage_mobilenet.yaml"), "--out",
                           str(out), "--set", "fl.rounds=2", "--set", "fl.eval_every=1", "--set", "policy.interference.owner_loss=paper",
                           "--allow-untrained"], capture_output=True, text=True, cwd=root, timeout=600)
    assert proc.returncode == 0, proc.stderr
    from flamingo_sim.devices.execution import OWNER_LOSS_PAPER_NOTE

    assert json.loads((out / "summary.json").read_text())["owner_loss_input"] == OWNER_LOSS_PAPER_NOTE
    assert f"note: {OWNER_LOSS_PAPER_NOTE}" in proc.stdout


def test_the_modelling_notes_quote_the_contention_table():
    """Every figure docs/modelling-notes.md's "One scheduler" paragraphs quote is the committed contention table's
    (docs/results/contention/paper.json, MobileNetV2, android), rounded as printed."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    rows = json.loads((root / "docs" / "results" / "contention" / "paper.json").read_text())["rows"]
    at = {(r["phone"], r["choice"], r["pinned"]): r for r in rows if r["model"] == "mobilenet_v2" and r["interference"] == "android"}
    notes = (root / "docs" / "modelling-notes.md").read_text()

    def pct(phone, choice, pinned):
        return f"{100 * at[(phone, choice, pinned)]['foreground_loss']:.1f} %"

    quoted = [
        f"The owner loses {pct('galaxy_s10e', '4567', False)} of its rate on the S10e and Tab S6, {pct('oneplus_8', '4567', False)} on the",
        f"OnePlus 8 and {pct('mi_10', '4567', False)} on the Mi 10",
        f"shared DRAM slows the owner ({pct('pixel_3', '4567', False)})",
        f"the owner stays on them: {pct('galaxy_s10e', '4567', True)}",
        f"(SD855), {pct('oneplus_8', '4567', True)} (SD865)",
        f"stretches {at[('galaxy_s10e', '4567', False)]['latency_factor']:.4f}x on the S10e",
    ]
    assert pct("galaxy_tab_s6", "4567", False) == pct("galaxy_s10e", "4567", False)
    flat = " ".join(notes.split())
    for q in quoted:
        assert " ".join(q.split()) in flat, q
    base = [at[(p, "4567", False)] for p in ("galaxy_s10e", "galaxy_tab_s6", "oneplus_8", "mi_10")]
    lat, en = sorted(r["latency_factor"] for r in base), sorted(r["energy_factor"] for r in base)
    assert f"{lat[0]:.2f}-{lat[-1]:.2f}x on MobileNetV2 at {en[0]:.2f}-{en[-1]:.2f}x the energy" in flat
    seven = sorted({pct(p, "7", True) for p in ("galaxy_s10e", "galaxy_tab_s6", "oneplus_8", "mi_10")})
    assert f"Prime's speed on one thread: {seven[0][:-2]}-{seven[-1]}" in flat


def test_the_paper_pages_table3_prose_quotes_the_contention_table():
    """docs/paper.md under Table 3: Flamingo's `7` costing the owner the Prime, and mainline's baseline leaving the owner
    on little cores (the same loss as a pinned `4567` under WALT: ``test_the_owners_loss_and_the_step_by_hand``), each as
    docs/results/contention/paper.json has it (MobileNetV2, the four SD855/SD865 phones)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    rows = json.loads((root / "docs" / "results" / "contention" / "paper.json").read_text())["rows"]
    at = {(r["phone"], r["choice"], r["pinned"]): r["foreground_loss"] for r in rows
          if r["model"] == "mobilenet_v2" and r["interference"] == "android"}
    big = ("galaxy_s10e", "galaxy_tab_s6", "oneplus_8", "mi_10")
    seven = sorted(100 * at[(p, "7", True)] for p in big)
    pinned = sorted(100 * at[(p, "4567", True)] for p in big)
    flat = " ".join((root / "docs" / "paper.md").read_text().split())
    assert f"loses its speed advantage ({seven[0]:.1f}-{seven[-1]:.1f} % of the rate)" in flat
    assert f"little cores, about {pinned[0]:.0f}-{pinned[-1]:.0f} % of its rate lost" in flat
    quarter = [100 * at[(p, "4567", False)] for p in ("galaxy_s10e", "galaxy_tab_s6", "oneplus_8")]
    assert all(24 < q < 30 for q in quarter) and "losing about a quarter of their rate" in flat


# -- the survivors of .ci/mutation.py over the device model (benchmarks/results/mutation_device_model_2cores.json) ---------

def test_the_stall_share_reads_the_parallel_fraction_of_the_profiles_dnn(profiles_dir):
    """The Galaxy S10e's MobileNetV2 profile read as another DNN: ResNet-34's parallel fraction 0.9 gives
    T0 = X (0.1 / 1.17 + 0.9 / 4) for 4567 (X one A76's step, 1.17 the Prime's speed over an A76's); a DNN the table does
    not name takes the default 0.8, MobileNetV2's: T0 = X (0.2 / 1.17 + 0.8 / 4); the stall is 1 - T0 / L."""
    prof = load_profile(profiles_dir, "galaxy_s10e", "mobilenet_v2")
    lat = prof.baseline.step_latency_s
    x = next(c for c in prof.all_choices if c.label == "4").step_latency_s
    as_resnet = stall_share(dataclasses.replace(prof, model="resnet34"), (4, 5, 6, 7))
    assert as_resnet == pytest.approx(1 - x * (0.1 / 1.17 + 0.9 / 4) / lat, rel=1e-12)
    unnamed = stall_share(dataclasses.replace(prof, model="my_net"), (4, 5, 6, 7))
    assert unnamed == pytest.approx(1 - x * (0.2 / 1.17 + 0.8 / 4) / lat, rel=1e-12)


def test_contention_reads_the_parallel_fraction_of_its_dnn_and_keeps_the_owners_cores_alone(phones, profiles_dir):
    """A DNN the table does not name takes the default parallel fraction 0.8, MobileNetV2's: the same step as
    test_the_amdahl_step_by_hand's, (0.2 / m + 0.8 / (4 m)) / (0.2 / 1.17 + 0.8 / 4.17) with m = 4.75 / 6; ResNet-34's
    0.9 gives (0.1 / m + 0.9 / (4 m)) / (0.1 / 1.17 + 0.9 / 4.17). The placement it reports keeps where the owner's two
    busy threads run without training (7 and 6 on the S10e, as ``place`` puts them)."""
    prof = load_profile(profiles_dir, "galaxy_s10e", "mobilenet_v2")
    lat, m = prof.baseline.step_latency_s, 4.75 / 6
    unnamed = contention(prof.phone, (4, 5, 6, 7), False, ANDROID, lat, "my_net")
    assert unnamed.latency_factor == pytest.approx((0.2 / m + 0.8 / (4 * m)) / (0.2 / 1.17 + 0.8 / 4.17), rel=1e-12)
    resnet = contention(prof.phone, (4, 5, 6, 7), False, ANDROID, lat, "resnet34")
    assert resnet.latency_factor == pytest.approx((0.1 / m + 0.9 / (4 * m)) / (0.1 / 1.17 + 0.9 / 4.17), rel=1e-12)
    assert unnamed.placement.alone == place(prof.phone, (4, 5, 6, 7), False, ANDROID).alone == (7, 6)


def test_schedule_on_a_phone_without_an_android_entry_takes_android_12s_groups(phones):
    """``schedule`` itself (``apps`` refuses such a phone for the ``android`` model) reads a phone with no android entry
    as Android 12: a foreground-service training thread and the top app's thread on the one core 7 split it by their
    groups, 1/2 each, whatever their nice values (Android 11 would split 110 : 9548 at nice 10 against -10)."""
    bare = dataclasses.replace(phones["galaxy_s10e"], android=None)
    both = (App(1, (7,), "foreground", 10, True), App(1, (7,), "top_app", -10, False))
    train, owner = schedule(bare, both, False)
    assert train.home == owner.home == (7,)
    assert train.share == pytest.approx((0.5,), rel=1e-12) and owner.share == pytest.approx((0.5,), rel=1e-12)
