"""Tests for hand mutations of the device model that no other test killed (issue 50, "Survivors that show missing
tests"): a core's shares summing above 1, Android 12's split where the nice values differ from 0, the heat of a task
stopped part way through its throttled phase, and the radio's tail when the upload runs on another radio than the
download. Every expected number is worked out by hand in the comments."""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

import numpy as np
import pytest

from flamingo_sim.devices.execution import InterferenceModel
from flamingo_sim.devices.scheduling import Placement, contention, place
from flamingo_sim.devices.soc import AndroidScheduling, load_phones, state_space
from flamingo_sim.devices.thermal import excess_after, throttled_task

ANDROID = InterferenceModel(owner_memory_share=0.0)  # the CPU's shares only (the shared memory has its own test)


@pytest.fixture(scope="module")
def phones(profiles_dir):
    return load_phones(profiles_dir)


def _per_core(pl: Placement) -> dict[int, float]:
    """Each core's shares added up over every thread on it, training's and the owner's."""
    total: dict[int, float] = defaultdict(float)
    for core, share in zip(pl.train + pl.foreground, pl.train_share + pl.foreground_share):
        total[core] += share
    return dict(total)


def _crowded(phone, version: int):
    """The phone with both apps confined to the big cores 6 and 7 (cpusets foreground and top_app ``6,7``): PyTorch's
    four unpinned threads double up on 7 and 6 and the owner's two threads find no idle core, so each of the two cores
    holds two training threads and one of the owner's."""
    return dataclasses.replace(phone, android=AndroidScheduling(version, {"top_app": (6, 7), "foreground": (6, 7), "background": (0, 1)}))


@pytest.mark.parametrize("version,model,train,owner", [
    # Android 12, a foreground service: two cgroups of 1024 each; the training group's half split by its two threads
    (12, ANDROID, 0.25, 0.5),
    # the same with training at nice 10: the groups' shares decide, not the nice values
    (12, dataclasses.replace(ANDROID, training_nice=10), 0.25, 0.5),
    # Android 12 but training as the top app: one cgroup with the owner's app, so the nice weights split the core:
    # 110 per training thread (nice 10) against 9548 (the top app's boost, nice -10): 110 / (2 x 110 + 9548) = 110 / 9768
    # each, the owner 9548 / 9768
    (12, dataclasses.replace(ANDROID, app_state="top_app", training_nice=10), 110 / 9768, 9548 / 9768),
    # Android 11: one cgroup; nice 0 everywhere (the owner's boost off): three equal weights of 1024
    (11, dataclasses.replace(ANDROID, foreground_nice=0), 1 / 3, 1 / 3),
    # Android 11, the owner's threads at nice -5 (weight 3121) and training at nice 0 (1024): 1024 / (2 x 1024 + 3121) each
    (11, dataclasses.replace(ANDROID, foreground_nice=-5), 1024 / 5169, 3121 / 5169),
], ids=["a12", "a12-nice10", "a12-top_app-nice10", "a11", "a11-owner-nice-5"])
def test_two_training_threads_and_the_owner_on_one_core_by_hand(phones, version, model, train, owner):
    pl = place(_crowded(phones["pixel_3"], version), (4, 5, 6, 7), False, model)
    assert pl.train == (7, 6, 7, 6) and pl.foreground == (7, 6)
    assert pl.train_share == pytest.approx((train,) * 4, rel=1e-12)
    assert pl.foreground_share == pytest.approx((owner,) * 2, rel=1e-12)
    assert _per_core(pl) == pytest.approx({6: 1.0, 7: 1.0}, rel=1e-12)  # 2 x train + owner: the whole core, never more
    # the step ends with its slowest thread, 1 / share of a profiled step on the same cores (all four on big cores)
    got = contention(_crowded(phones["pixel_3"], version), (4, 5, 6, 7), False, dataclasses.replace(model, energy="full_power"), 10.0,
                     "mobilenet_v2")
    assert got.latency_factor == pytest.approx(0.5 / train, rel=1e-12)  # without the owner each thread holds half its core
    assert got.foreground_loss == pytest.approx(1.0 - owner, rel=1e-12)


@pytest.mark.parametrize("model", [ANDROID, dataclasses.replace(ANDROID, training_nice=10),
                                   dataclasses.replace(ANDROID, app_state="top_app", training_nice=10),
                                   dataclasses.replace(ANDROID, app_state="background", foreground_nice=-5),
                                   dataclasses.replace(ANDROID, foreground_threads=4)], ids=str)
def test_every_used_core_is_shared_out_exactly_once(phones, model):
    """On every phone, choice, pinning and Android release (12, and 11 for the nice weights), the shares of a core that
    training or the owner uses add up to exactly 1."""
    n = 0
    for phone in phones.values():
        for version in (12, 11):
            ph = dataclasses.replace(phone, android=dataclasses.replace(phone.android, version=version))
            for c in state_space(phone.layout):
                for pinned in (True, False):
                    totals = _per_core(place(ph, c.cores, pinned, model))
                    assert totals == pytest.approx(dict.fromkeys(totals, 1.0), rel=1e-12), (phone.name, version, c.label, pinned)
                    n += 1
    assert n == 2 * 2 * sum(len(state_space(p.layout)) for p in phones.values())


def test_the_heat_of_a_task_stopped_inside_its_throttled_phase_by_hand():
    """600 s at 2 W, R = 5 K/W, tau = 500 s, the cluster capped 4 K above ambient at half speed and a quarter of the power.

    The excess heads for 2 x 5 = 10 K and reaches 4 K at 500 ln(10 / 6) = 255.413 s; the remaining 344.587 s of work run
    at half speed, 689.174 s, at 0.5 W, whose steady state is 2.5 K: the excess falls back from 4 K towards 2.5 K."""
    tasks = throttled_task(np.array([600.0]), np.array([1200.0]), np.array([0.0]), np.array([4.0]), np.array([0.5]), np.array([0.25]),
                           np.array([5.0]), np.array([500.0]))
    onset = 500.0 * math.log(10.0 / 6.0)
    assert onset == pytest.approx(255.413, abs=1e-3)
    assert tasks.duration_s[0] == pytest.approx(onset + 2 * (600.0 - onset), rel=1e-12)

    def at(t: float, x0: float = 0.0) -> float:
        return float(excess_after(np.array([t]), np.array([x0]), tasks, np.array([2.0]), np.array([0.25]), np.array([5.0]),
                                  np.array([500.0]))[0])

    # stopped 300 s after the onset: 2.5 + (4 - 2.5) exp(-300 / 500) = 3.323 K (the full power's law would give 7.3 K)
    assert at(onset + 300.0) == pytest.approx(2.5 + 1.5 * math.exp(-0.6), rel=1e-12)
    assert at(onset + 300.0) == pytest.approx(3.3232, abs=1e-4)
    # stopped at 40 % of the task's priced time, 377.8 s: 122.4 s past the onset
    part = 0.4 * float(tasks.duration_s[0])
    assert at(part) == pytest.approx(2.5 + 1.5 * math.exp(-(part - onset) / 500.0), rel=1e-12)
    # stopped before the onset, at 100 s: the full power's law, 10 (1 - exp(-0.2)) = 1.813 K
    assert at(100.0) == pytest.approx(10.0 * (1 - math.exp(-0.2)), rel=1e-12)
    # a task stopped at its start leaves the excess it started with (none here)
    assert at(0.0) == 0.0


def test_the_radio_closed_form_by_hand():
    """One isolated transfer, numbers from Huang et al.'s tables and the power profiles (radio.py's docstring) typed out:
    80 Mbit up on LTE at 4 Mbit/s: promotion 0.2601 s at the receive bound 0.77308 W, 20 s at min(0.43839 x 4 + 1.28804,
    2.49018) = 2.49018 W, the tail 11.576 s at 0.77308 W; down on WiFi at 40 Mbit/s: 0.0791 s at 0.1244 W, 2 s at
    min(0.13701 x 40 + 0.13286, 0.5841) = 0.5841 W, 0.2381 s at 0.1193 W."""
    from flamingo_sim.devices.radio import LTE, WIFI, transfer_energy_j

    lte_rx, lte_tx, wifi_rx = 0.2008 * 3.85, 0.6468 * 3.85, 0.177 * 3.3
    assert transfer_energy_j(LTE, 80.0, 4.0, up=True) == pytest.approx(lte_rx * 0.2601 + lte_tx * 20.0 + lte_rx * 11.576, rel=1e-12)
    assert transfer_energy_j(WIFI, 80.0, 40.0, up=False) == pytest.approx(0.1244 * 0.0791 + wifi_rx * 2.0 + 0.1193 * 0.2381, rel=1e-12)


# -- the heat booked where a task stopped (devices/pricing.py DevicePricing.settle) -------------------------------------

class _Fixed:
    """A policy stub: every request accepted, 12 steps of MobileNetV2's 4567 in 600 s for 1200 J (2 W)."""

    def __init__(self, labels: tuple[str, ...]) -> None:
        self.labels = labels

    def run_tasks(self, request):
        from flamingo_sim.devices.policies import TaskOutcome

        k = request.k
        steps = np.zeros((k, len(self.labels)), dtype=np.int64)
        steps[:, self.labels.index("4567")] = 12
        return TaskOutcome(accepted=np.ones(k, dtype=bool), decline_reason=np.array([""] * k, dtype=object), duration_s=np.full(k, 600.0),
                           energy_j=np.full(k, 1200.0), interference_s=np.zeros(k), steps_by_choice=steps, labels=self.labels,
                           mode=np.array(["baseline"] * k, dtype=object))


def _links(comm_s: float, download_s: float, radio_j: float, k: int):
    from types import SimpleNamespace

    return SimpleNamespace(comm_s=np.full(k, comm_s), download_s=np.full(k, download_s), radio_energy_j=np.full(k, radio_j),
                           abandoned=np.zeros(k, dtype=bool), download_abandoned=np.zeros(k, dtype=bool))


def _pixel3(profiles_dir, radio: bool):
    """Four Pixel 3 clients, the heat model on with the threshold at 33 degC; R and tau typed out from the Pixel 3's body
    (148 g, 145.6 x 68.2 x 7.9 mm): R = 1 / (10 W/m^2/K x its area) K/W, tau = R x 148 g x 0.9 J/g/K."""
    from flamingo_sim.devices.pricing import DevicePricing, HeatModel
    from flamingo_sim.devices.profiles import ProfileSet

    profiles = ProfileSet.load(profiles_dir, ["pixel_3"], "mobilenet_v2")
    rule = profiles.profiles[0].phone.soc.throttle_rule((4, 5, 6, 7))
    assert (rule.speed_frac, rule.power_frac) == (0.6, 0.5)  # the catalogue's big-cluster rule (an input here)
    pricing = DevicePricing(_Fixed(profiles.labels), np.zeros(4, dtype=np.int64), ("pixel_3",), 16,
                            heat=HeatModel.of(profiles, 1.0, 33.0), radio=radio)
    area = 2 * (0.1456 * 0.0682 + 0.1456 * 0.0079 + 0.0682 * 0.0079)
    r = 1.0 / (10.0 * area)
    return pricing, r, r * 148.0 * 0.9


def _price(pricing, transfers):
    k = 4
    return pricing.price(1000.0, np.arange(k), n_steps=12, battery_pct=np.full(k, 80.0), charging=np.zeros(k, dtype=bool),
                         trace_temperature_c=np.full(k, 30.0), in_use=np.zeros((k, 1), dtype=bool), slot_s=600.0, transfers=transfers)


def test_the_heat_booked_where_each_task_stopped_by_hand(profiles_dir):
    """From 1,000 s, 600 s at 2 W heading for 2R = 8.6 K, the trace at 30 degC: the cluster is capped 3 K above it at
    onset = tau ln(2R / (2R - 3)) (~260 s), the rest of the work at 0.6 of the speed and half the power (1 W, towards R).
    The throttled task lasts D = onset + (600 - onset) / 0.6; the clients stop at 25 %, 75 %, all and none of it."""
    pricing, r, tau = _pixel3(profiles_dir, radio=False)
    cohort = _price(pricing, lambda compute_s: _links(0.0, 0.0, 0.0, 4))
    onset = tau * math.log(2.0 * r / (2.0 * r - 3.0))
    length = onset + (600.0 - onset) / 0.6
    assert cohort.outcome.duration_s == pytest.approx([length] * 4, rel=1e-12)
    pricing.settle(cohort, 1000.0, np.array([0.25, 0.75, 1.0, 0.0]))

    def by_hand(t: float) -> float:
        if t <= onset:  # 2 W from no excess
            return 2.0 * r * (1.0 - math.exp(-t / tau))
        return 3.0 + (1.0 * r - 3.0) * (1.0 - math.exp(-(t - onset) / tau))  # capped: 1 W from 3 K towards R

    stops = [0.25 * length, 0.75 * length, length]
    assert stops[0] < onset < stops[1]  # one before the onset, two past it
    assert pricing.excess_c[np.arange(3)] == pytest.approx([by_hand(t) for t in stops], rel=1e-12)
    assert pricing.at_s[np.arange(3)] == pytest.approx([1000.0 + t for t in stops], rel=1e-12)
    assert pricing.excess_c.idx.tolist() == [0, 1, 2]  # the client that ran nothing books nothing
    # an hour after client 1 stopped, its excess has decayed by exp(-3600 / tau)
    later = pricing.excess_c_at(1000.0 + stops[1] + 3600.0, np.array([1]))
    assert later[0] == pytest.approx(by_hand(stops[1]) * math.exp(-3600.0 / tau), rel=1e-12)


def test_the_heat_of_a_task_stopped_with_the_radio_on_by_hand(profiles_dir):
    """``network.model: traces``: download 10 s, compute, upload 10 s, the radio's 20 J spread over its 20 s (1 W). The
    compute's onset is priced from the excess at the request (none), as above. Stopped at 4 s into the download: R (1 -
    exp(-4 / tau)) at 1 W; 10 + 100 s in: the download's excess x1 then 100 s at 2 W; 5 s into the upload: the compute's
    end excess then 5 s at 1 W."""
    pricing, r, tau = _pixel3(profiles_dir, radio=True)
    cohort = _price(pricing, lambda compute_s: _links(20.0, 10.0, 20.0, 4))
    onset = tau * math.log(2.0 * r / (2.0 * r - 3.0))
    compute = onset + (600.0 - onset) / 0.6
    total = 20.0 + compute
    assert cohort.duration_s == pytest.approx([total] * 4, rel=1e-12)
    stops = np.array([4.0, 110.0, 10.0 + compute + 5.0, 0.0])
    pricing.settle(cohort, 1000.0, stops / total)

    def rc(x0: float, p: float, t: float) -> float:
        return p * r + (x0 - p * r) * math.exp(-t / tau)

    x_down = rc(0.0, 1.0, 10.0)
    x_onset = rc(x_down, 2.0, onset)
    x_end = rc(x_onset, 1.0, compute - onset)  # throttled: half of the 2 W
    expected = [rc(0.0, 1.0, 4.0), rc(x_down, 2.0, 100.0), rc(x_end, 1.0, 5.0)]
    assert pricing.excess_c[np.arange(3)] == pytest.approx(expected, rel=1e-12)
    assert pricing.at_s[np.arange(3)] == pytest.approx(1000.0 + stops[:3], rel=1e-12)
    assert pricing.excess_c.idx.tolist() == [0, 1, 2]


# -- the survivors of .ci/mutation.py over thermal.py and radio.py (benchmarks/results/mutation_thermal_radio_2cores.json) --

def test_the_onset_from_a_phone_still_warm_by_hand():
    """2 W into R = 5 K/W (steady 10 K), tau = 500 s, from 2 K of excess left by an earlier task, to 5 K:
    t = 500 ln((10 - 2) / (10 - 5)) = 500 ln 1.6 = 235.0 s (from no excess it would be 500 ln 2 = 346.6 s)."""
    from flamingo_sim.devices.thermal import time_to_excess_s

    t = time_to_excess_s(np.array([5.0, 5.0]), np.array([2.0, 0.0]), np.array([2.0, 2.0]), np.array([5.0, 5.0]), np.array([500.0, 500.0]))
    assert t.tolist() == pytest.approx([500.0 * math.log(1.6), 500.0 * math.log(2.0)], rel=1e-12)
    # exactly at the target already, with a steady state below it: 0 (there now), not "never"
    assert time_to_excess_s(np.array([5.0]), np.array([5.0]), np.array([0.5]), np.array([5.0]), np.array([500.0]))[0] == 0.0


def test_a_task_shorter_than_a_second_is_throttled_when_it_crosses_the_threshold():
    """0.5 s at 1,000 W (500 J) from 0.9 K to a 1 K threshold, R = 5 K/W, tau = 500 s: the onset is 500 ln((5000 - 0.9) /
    (5000 - 1)) = 0.010 s, and the rest, 0.490 s, runs at half speed: 0.010 + 0.980 s."""
    tasks = throttled_task(np.array([0.5]), np.array([500.0]), np.array([0.9]), np.array([1.0]), np.array([0.5]), np.array([0.5]),
                           np.array([5.0]), np.array([500.0]))
    onset = 500.0 * math.log((5000.0 - 0.9) / (5000.0 - 1.0))
    assert tasks.onset_s[0] == pytest.approx(onset, rel=1e-9)
    assert tasks.duration_s[0] == pytest.approx(onset + (0.5 - onset) / 0.5, rel=1e-12)


def test_a_task_of_no_length_is_never_throttled_and_warns_nothing():
    """A task with no compute (declined, or every step dropped) above its threshold already: no throttled time, no
    onset (inf), its energy as given, and no floating-point warning from its 0 / 0 or 5 J / 0 s power or a steady state
    equal to the target (the divisions are guarded)."""
    import warnings

    from flamingo_sim.devices.thermal import time_to_excess_s

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tasks = throttled_task(np.array([0.0, 600.0, 0.0]), np.array([0.0, 1200.0, 5.0]), np.array([6.0, 0.0, 6.0]),
                               np.array([5.0, 10.0, 5.0]), np.full(3, 0.5), np.full(3, 0.5), np.full(3, 5.0), np.full(3, 500.0))
        at = time_to_excess_s(np.array([10.0, 12.0]), np.array([0.0, 0.0]), np.array([2.0, 2.0]), np.array([5.0, 5.0]),
                              np.array([500.0, 500.0]))
    assert (tasks.duration_s[0], tasks.energy_j[0], tasks.throttled_s[0], tasks.onset_s[0]) == (0.0, 0.0, 0.0, math.inf)
    assert (tasks.duration_s[1], tasks.onset_s[1]) == (600.0, math.inf)  # the steady state only just reaches 10 K: never
    # energy booked on a task of no time (5 J / 0 s): kept as given, never throttled
    assert (tasks.duration_s[2], tasks.energy_j[2], tasks.throttled_s[2], tasks.onset_s[2]) == (0.0, 5.0, 0.0, math.inf)
    assert at.tolist() == [math.inf, math.inf]


@pytest.mark.parametrize("field", ["mass_g", "length_mm", "width_mm", "thickness_mm"])
def test_a_body_with_a_size_of_0_is_refused(field):
    from flamingo_sim.devices.thermal import ThermalBody

    good = {"mass_g": 148.0, "length_mm": 145.6, "width_mm": 68.2, "thickness_mm": 7.9}
    with pytest.raises(ValueError, match=field):
        ThermalBody(**{**good, field: 0.0})


def test_a_throttle_threshold_out_of_its_range_is_refused():
    from flamingo_sim.devices.thermal import ThrottleRule

    with pytest.raises(ValueError, match="threshold_c"):
        ThrottleRule(threshold_c=200.0)


def test_the_radio_at_a_low_rate_by_hand():
    """Below the bounds Huang et al.'s line holds each way: WiFi down at 1 Mbit/s 0.13701 + 0.13286 = 0.26987 W, up
    0.28317 + 0.13286 = 0.41603 W; LTE down at 0.5 Mbit/s 0.025985 + 1.28804 = 1.314 W, bounded at the receive 0.77308 W.
    A transfer at 0.5 Mbit/s is priced (only a rate of 0 or less is refused), and one direction's power is a float."""
    from flamingo_sim.devices.radio import LTE, WIFI, transfer_energy_j

    assert WIFI.active_w(1.0, up=False) == pytest.approx(0.26987, rel=1e-12)
    assert WIFI.active_w(1.0, up=True) == pytest.approx(0.41603, rel=1e-12)
    assert type(WIFI.active_w(1.0, up=True)) is float and WIFI.active_w(np.array([1.0, 2.0]), up=True).shape == (2,)
    assert transfer_energy_j(WIFI, 1.0, 0.5, up=False) == pytest.approx(0.1244 * 0.0791 + (0.13701 * 0.5 + 0.13286) * 2.0 + 0.1193 * 0.2381,
                                                                        rel=1e-12)
    assert transfer_energy_j(LTE, 1.0, 0.5, up=False) == pytest.approx(0.77308 * (0.2601 + 2.0 + 11.576), rel=1e-12)


# -- the survivors of .ci/mutation.py over the device model (benchmarks/results/mutation_device_model_2cores.json) ---------

def test_the_owners_cpu_loss_of_one_thread_on_a_shared_prime_core(phones):
    """The Galaxy S10e crowded onto 6 and 7 (``_crowded``), Android 12, the owner with one busy thread: it runs on the Prime
    core 7 with or without training and holds 2/3 of it beside two training threads (1/6 each), so its CPU loss is
    1 - 2/3 = 1/3 (its rate with training over alone, both at the Prime's speed 1.17). The shared memory adds to the owner's
    loss, not to the CPU part: with ``owner_memory_share`` 0.5 the loss grows and the CPU loss stays 1/3."""
    s10e = _crowded(phones["galaxy_s10e"], 12)
    for memory_share in (0.0, 0.5):
        got = contention(s10e, (4, 5, 6, 7), False, dataclasses.replace(ANDROID, foreground_threads=1, owner_memory_share=memory_share),
                         10.0, "mobilenet_v2")
        assert got.placement.foreground == got.placement.alone == (7,)
        assert got.placement.foreground_share == pytest.approx((2 / 3,), rel=1e-12)
        assert got.owner_cpu_loss == pytest.approx(1 / 3, rel=1e-12)
        if memory_share == 0:
            assert got.foreground_loss == pytest.approx(1 / 3, rel=1e-12)
        else:
            assert got.foreground_loss > 1 / 3 + 1e-3
