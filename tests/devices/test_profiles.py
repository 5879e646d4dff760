from __future__ import annotations

import filecmp
import shutil

import numpy as np
import pytest

from flamingo_sim.devices.calibrate import (
    DNN_MODELS,
    MAX_CONTENTION,
    TABLE1,
    calibrate_all,
    contention_bound,
)
from flamingo_sim.devices.calibrate import main as calibrate_main
from flamingo_sim.devices.profiles import (
    MODELS,
    ChoiceProfile,
    Profile,
    ProfileSet,
    load_profile,
    prune,
)
from flamingo_sim.devices.soc import load_phones
from flamingo_sim.errors import ConfigError

# SPEC.md Table 1, restated here (not imported) so a change in calibrate.py cannot hide.
SPEC_TABLE1 = {
    "galaxy_tab_s6": ((1.9, 21, 14.5), (1.9, 12.2, 9.4)),
    "oneplus_8": ((2.1, 17, 13.9), (2.4, 8.5, 7.5)),
    "pixel_3": ((1, 1.8, 1.6), (1, 1.8, 2.3)),
    "galaxy_s10e": ((1.9, 39, 31.8), (2.1, 39, 17.4)),
    "mi_10": ((2.1, 17.2, 14), (2.2, 7.8, 5.8)),
}
CASES = [(ph, m, kind, vals[0 if kind == "speedup" else 1][i])
         for ph, vals in SPEC_TABLE1.items() for i, m in enumerate(MODELS) for kind in ("speedup", "energy_efficiency")]


def test_thirty_figures():
    assert len(CASES) == 30
    assert {(p, m): (s, e) for (p, m), (s, e) in TABLE1.items()} == {
        (p, m): (v[0][i], v[1][i]) for p, v in SPEC_TABLE1.items() for i, m in enumerate(MODELS)}


@pytest.mark.parametrize("phone,model,kind,target", CASES)
def test_the_paper_set_reproduces_table1_within_rounding(profiles_dir, phone, model, kind, target):
    """All 30 cells, speed and energy: each rounds to the paper's printed figure (one decimal). Table 1 is a
    measurement (idle phones, Appendix B); no rule of the model overrides it."""
    prof = load_profile(profiles_dir, phone, model)
    assert prof.provenance == "calibrated"
    assert round(getattr(prof, kind), 1) == target, (kind, getattr(prof, kind), prof.notes)


@pytest.mark.parametrize("pset", ("paper", "anchored", "public"))
def test_every_shipped_set_passes_the_checks(profiles_dir, pset):
    from flamingo_sim.devices.power import check_profile

    for phone in SPEC_TABLE1:
        for model in MODELS:
            assert check_profile(load_profile(profiles_dir, phone, model, profile_set=pset)) == []


def test_the_sd855_and_sd865_baselines_on_depthwise_nets_draw_under_one_prime_core_and_need_idle_states(profiles_dir):
    """Table 1's energy efficiency below its speedup: the baseline's four cores draw 0.41-0.65 of the one Prime core
    Flamingo picks (17.4 / 31.8 on the S10e's MobileNetV2), which only waiting cores in an idle state reach."""
    from flamingo_sim.devices.power import IDLE_STATES, waiting_mechanisms

    for phone in ("galaxy_s10e", "galaxy_tab_s6", "oneplus_8", "mi_10"):
        prof = load_profile(profiles_dir, phone, "mobilenet_v2")
        speedup, eff = TABLE1[(phone, "mobilenet_v2")]
        assert prof.best.label == "7"
        assert float(prof.baseline.power_w) / float(prof.best.power_w) == pytest.approx(eff / speedup, rel=2e-3)
        waiting = {w.choice: w for w in waiting_mechanisms(prof)}
        assert waiting["4567"].mechanism == IDLE_STATES
        assert waiting["4567"].share < waiting["4567"].lowest_opp_share
        assert "7" not in waiting  # Flamingo's one core computes all the step: its busy power


def _cp(label: str, lat: float, pw: float = 1.0) -> ChoiceProfile:
    return ChoiceProfile(tuple(int(c) for c in label), lat, pw)


def test_prune_hand_case():
    chs = [_cp("4567", 5.0), _cp("456", 3.0), _cp("45", 3.0), _cp("4", 4.0), _cp("0123", 9.0), _cp("012", 8.0), _cp("01", 10.0), _cp("0", 12.0)]
    # 456 ties with 45 (no gain from the larger footprint) -> pruned; 0123 is slower than 012.
    assert [c.label for c in prune(chs)] == ["45", "4", "012", "01", "0"]


def test_pixel3_shufflenet_prunes_4567(profiles_dir):
    prof = load_profile(profiles_dir, "pixel_3", "shufflenet_v2_x2")
    by = {c.label: c for c in prof.all_choices}
    assert by["4567"].step_latency_s > by["4"].step_latency_s
    assert by["4567"].step_energy_j > by["4"].step_energy_j
    assert "4567" in prof.pruned_labels and "4567" not in [c.label for c in prof.choices]


def test_pixel3_resnet_fastest_4567_most_efficient_single_big_core(profiles_dir):
    prof = load_profile(profiles_dir, "pixel_3", "resnet34")
    assert prof.best.label == "4567"
    assert min(prof.all_choices, key=lambda c: c.step_latency_s).label == "4567"
    big = [c for c in prof.all_choices if 4 in c.cores]  # the paper's Figures 2-3 compare big-core choices
    assert min(big, key=lambda c: c.step_energy_j).label == "4"


def test_pixel3_shufflenet_fastest_and_most_efficient_on_one_big_core(profiles_dir):
    prof = load_profile(profiles_dir, "pixel_3", "shufflenet_v2_x2")
    big = [c for c in prof.all_choices if 4 in c.cores]
    assert prof.best.label == "4"
    assert min(big, key=lambda c: c.step_energy_j).label == "4"


# Public anchors (SPEC.md section 3), restated here: forward GFLOP per sample at the trained
# input size, the Raspberry Pi 5's four-A76 training throughput per DNN class (GFLOP/s from
# 7.2 s/step MobileNetV2 and 11.0 s/step ResNet-34 at 224 px, batch 16), the SD845/SD855 speed
# ratio on big cores (TFLite 1.7x, AI-Benchmark 4046/2324 = 1.74x).
FWD_GFLOP = {"resnet34": 0.1496, "shufflenet_v2_x2": 1.1649, "mobilenet_v2": 0.6005}
PI5_4XA76_GFLOPS = {"resnet34": 3 * 16 * 7.3265 / 11.0, "shufflenet_v2_x2": 3 * 16 * 0.6005 / 7.2,
                    "mobilenet_v2": 3 * 16 * 0.6005 / 7.2}
SETS = ("paper", "anchored")


@pytest.mark.parametrize("pset", SETS)
@pytest.mark.parametrize("phone", sorted(SPEC_TABLE1))
@pytest.mark.parametrize("model", MODELS)
def test_absolute_values_within_public_bounds(profiles_dir, pset, phone, model):
    prof = load_profile(profiles_dir, phone, model, profile_set=pset)
    by = {c.label: c for c in prof.all_choices}
    work = 3 * 16 * FWD_GFLOP[model]
    # little cores slower and cheaper per second than big ones
    assert by["0"].step_latency_s > by["4"].step_latency_s and by["0"].power_w < by["4"].power_w
    # one big core: between a quarter of the Pi 5's four-A76 throughput (perfect scaling) and all
    # of it (none), scaled by the core's speed (SD845 0.58, SD865 A77 1.15) with 20 % margin
    speed = prof.phone.soc.core_types["big"].speed
    rate = work / by["4"].step_latency_s / speed
    assert PI5_4XA76_GFLOPS[model] / 4 * 0.8 <= rate <= PI5_4XA76_GFLOPS[model] * 1.2
    for c in prof.all_choices:
        assert work / c.step_latency_s <= 30.0  # CPU training kernels on Snapdragon 8-series: 15-30 GFLOP/s
        assert 0.1 <= c.power_w <= 8.0
    # contention: every low-power choice (every choice in the anchored set) within the bound
    bound = contention_bound(prof)
    for c in prof.all_choices:
        if pset == "anchored" or 4 not in c.cores:
            assert bound[c.label] <= MAX_CONTENTION * 1.001, c.label


# The public set's bounds, restated from SPEC.md: CoreMark power of one busy core above idle per
# SoC and core type, and the SoC of each phone.
COREMARK_W = {"sd855": {"big": 0.84, "prime": 1.08}, "sd845": {"big": 1.30}, "sd865": {"big": 0.71, "prime": 0.98}}
SOC = {"galaxy_tab_s6": "sd855", "galaxy_s10e": "sd855", "oneplus_8": "sd865", "mi_10": "sd865", "pixel_3": "sd845"}


# The public multi-thread measurements, restated from their sources (calibrate.PUBLIC_SCALING): the
# 4-thread speed-up over one thread (midpoint of the source's range), the 2-thread range, and which core
# the one-thread run used. Paddle-Lite (Mi 9 SD855, Mi 8 SD845); ncnn ResNet-18 on the SD855+.
MEASURED = {("sd855", "mobilenet_v2"): (2.89, (1.63, 1.83), "7"), ("sd855", "shufflenet_v2_x2"): (2.055, (1.41, 1.62), "7"),
            ("sd845", "mobilenet_v2"): (2.965, (1.75, 1.80), "4"), ("sd845", "shufflenet_v2_x2"): (2.33, (1.50, 1.69), "4"),
            ("sd855", "resnet34"): (2.02, None, "7")}


@pytest.mark.parametrize("phone", sorted(SPEC_TABLE1))
@pytest.mark.parametrize("model", MODELS)
def test_public_set_within_public_bounds(profiles_dir, phone, model):
    prof = load_profile(profiles_dir, phone, model, profile_set="public")
    paper = load_profile(profiles_dir, phone, model)
    by = {c.label: c for c in prof.all_choices}
    soc = SOC[phone]
    # big-core choices only (no public figure measures training on the A55 cores)
    assert set(by) == ({"4567", "457", "456", "47", "45", "7", "4"} if soc != "sd845" else {"4567", "456", "45", "4"})
    # one big core as in the paper set
    assert by["4"].step_latency_s == next(c.step_latency_s for c in paper.all_choices if c.label == "4")
    # all four big cores faster than one, by at most the thread count
    assert 1.5 <= by["4"].step_latency_s / by["4567"].step_latency_s <= 4.0
    # the measured 4-thread speed-up where a measurement exists (the SD865 takes the SD855's), the 2-thread one within
    # the measured range (a check the fit does not use), and the notes say which; elsewhere they say it is assumed
    measured = MEASURED.get(({"sd865": "sd855"}.get(soc, soc), model))
    if measured is None:
        assert "ASSUMED: no public multi-thread measurement" in prof.notes
    else:
        four, two, one = measured
        assert by[one].step_latency_s / by["4567"].step_latency_s == pytest.approx(four, rel=2e-3)
        pair = "47" if one == "7" else "45"
        if two is not None:
            assert two[0] * 0.97 <= by[one].step_latency_s / by[pair].step_latency_s <= two[1] * 1.03
        assert ("ASSUMED from sd855" in prof.notes) == (soc == "sd865")
    # power: the pinned cores' CoreMark power, nothing else
    for c in prof.all_choices:
        want = sum(COREMARK_W[soc]["prime" if core == prof.phone.layout.prime else "big"] for core in c.cores)
        assert c.power_w == pytest.approx(want, abs=1e-3), c.label
    # Flamingo's chosen execution is all big cores: measured scaling never makes a smaller choice faster
    assert prof.best.label == "4567" and prof.speedup == 1.0
    assert "Raspberry Pi 5" in prof.notes and "CoreMark" in prof.notes and "Table 1" in prof.notes


@pytest.mark.parametrize("model", MODELS)
def test_public_set_pixel3_four_big_cores_about_1_7x_slower_than_sd855(profiles_dir, model):
    # TFLite: the Pixel 3 (SD845) is about 1.7x slower than SD855 phones on four big cores (one network, inference).
    # Each set's per-model scaling moves it: 1.3x for ResNet-34 (the SD855's measured 2.02x at 4 threads against the
    # SD845's assumed Amdahl scaling) to 2.0x for MobileNetV2.
    pixel = load_profile(profiles_dir, "pixel_3", model, profile_set="public").baseline
    s10e = load_profile(profiles_dir, "galaxy_s10e", model, profile_set="public").baseline
    assert 1.25 <= pixel.step_latency_s / s10e.step_latency_s <= 2.1


@pytest.mark.parametrize("pset", SETS)
@pytest.mark.parametrize("model", MODELS)
def test_pixel3_is_slower_than_sd855_per_big_core(profiles_dir, pset, model):
    pixel = load_profile(profiles_dir, "pixel_3", model, profile_set=pset)
    s10e = load_profile(profiles_dir, "galaxy_s10e", model, profile_set=pset)
    def lat(p):
        return next(c.step_latency_s for c in p.all_choices if c.label == "4")

    assert 1.5 <= lat(pixel) / lat(s10e) <= 2.0


@pytest.mark.parametrize("phone,model,kind,target", CASES)
def test_anchored_set_matches_table1_where_the_bound_allows(profiles_dir, phone, model, kind, target):
    prof = load_profile(profiles_dir, phone, model, profile_set="anchored")
    value = getattr(prof, kind)
    if phone == "pixel_3" or model == "resnet34":
        assert value == pytest.approx(target, rel=0.05)
    elif kind == "speedup":  # SD855/SD865 depthwise rows: Table 1 exceeds the plausibility bound
        assert 1.0 < value < target
    else:  # their energy efficiency: matched where the bounded speedup still allows it, below Table 1 otherwise
        assert 1.0 < value <= target * 1.05


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_flop_counts_match_torch_flop_counter(model):
    torch = pytest.importorskip("torch")
    tvm = pytest.importorskip("torchvision.models")
    from torch.utils.flop_counter import FlopCounterMode

    net = {"resnet34": tvm.resnet34, "shufflenet_v2_x2": tvm.shufflenet_v2_x2_0, "mobilenet_v2": tvm.mobilenet_v2}[model]()
    net.eval()
    x = torch.zeros((1,) + DNN_MODELS[model].input_size)
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        net(x)
    assert fc.get_total_flops() / 1e9 == pytest.approx(DNN_MODELS[model].fwd_gflop, rel=0.01)
    assert DNN_MODELS[model].fwd_gflop == FWD_GFLOP[model]


def test_calibration_regenerates_the_shipped_files(profiles_dir, tmp_path):
    shutil.copy(profiles_dir / "phones.yaml", tmp_path / "phones.yaml")
    assert calibrate_main(["--profiles-dir", str(tmp_path)]) == 0
    for phone in SPEC_TABLE1:
        for model in MODELS:
            for rel in (f"{phone}/{model}.yaml", f"anchored/{phone}/{model}.yaml", f"public/{phone}/{model}.yaml"):
                assert filecmp.cmp(profiles_dir / rel, tmp_path / rel, shallow=False), rel


def test_bad_profile_file_names_file_and_key(profiles_dir, tmp_path):
    shutil.copy(profiles_dir / "phones.yaml", tmp_path / "phones.yaml")
    (tmp_path / "pixel_3").mkdir()
    text = (profiles_dir / "pixel_3" / "resnet34.yaml").read_text()
    (tmp_path / "pixel_3" / "resnet34.yaml").write_text(text.replace("power_w:", "power_W:", 1))
    with pytest.raises(ConfigError, match=r"resnet34\.yaml: unknown key 'choices\[0\]\.power_W'"):
        load_profile(tmp_path, "pixel_3", "resnet34")
    (tmp_path / "pixel_3" / "resnet34.yaml").write_text(text.replace("cores: [4, 5, 6]\n", "cores: [3, 4, 5]\n", 1))
    with pytest.raises(ConfigError, match=r"resnet34\.yaml: choice 345 is not an execution choice of pixel_3"):
        load_profile(tmp_path, "pixel_3", "resnet34")
    with pytest.raises(ConfigError, match="no profile for phone 'pixel_3' and model 'vgg'"):
        load_profile(tmp_path, "pixel_3", "vgg")


def test_measured_profile_round_trip(profiles_dir, tmp_path):
    from flamingo_sim.devices.profiles import save_profile

    phones = load_phones(profiles_dir)
    chs = tuple(_cp(c.label, 10.0 - i, 2.0) for i, c in enumerate(phones["pixel_3"].state_space()))
    prof = Profile(phones["pixel_3"], "resnet34", "measured", 16, chs, "by hand")
    shutil.copy(profiles_dir / "phones.yaml", tmp_path / "phones.yaml")
    save_profile(tmp_path, prof)
    back = load_profile(tmp_path, "pixel_3", "resnet34")
    assert back.provenance == "measured" and back.all_choices == chs
    assert [c.label for c in back.choices] == ["0"]  # each larger choice is slower here
    assert back.speedup == pytest.approx(10.0 / 3.0)


def test_profile_set_arrays(profiles_dir):
    ps = ProfileSet.load(profiles_dir, ["pixel_3", "mi_10"], "mobilenet_v2")
    assert ps.labels == ("4567", "457", "456", "47", "45", "7", "4", "0123", "012", "01", "0")
    pixel = load_profile(profiles_dir, "pixel_3", "mobilenet_v2")
    mi = load_profile(profiles_dir, "mi_10", "mobilenet_v2")
    assert list(ps.n_viable) == [len(pixel.choices), len(mi.choices)]
    assert ps.latency_s.shape == (2, max(ps.n_viable))
    assert [ps.labels[i] for i in ps.label_idx[1, : ps.n_viable[1]]] == [c.label for c in mi.choices]
    assert np.isnan(ps.latency_s[1, ps.n_viable[1]:]).all() and (ps.label_idx[1, ps.n_viable[1]:] == -1).all()
    assert list(ps.n_space) == [8, 11]
    assert ps.baseline_latency_s[0] == pixel.baseline.step_latency_s
    # fancy indexing prices a cohort
    cohort = np.array([1, 0, 1])
    assert np.allclose(ps.latency_s[cohort, 0], [mi.best.step_latency_s, pixel.best.step_latency_s, mi.best.step_latency_s])


def test_calibration_keeps_measured_profiles(profiles_dir, tmp_path):
    from flamingo_sim.devices.profiles import save_profile

    shutil.copy(profiles_dir / "phones.yaml", tmp_path / "phones.yaml")
    phones = load_phones(tmp_path)
    chs = tuple(_cp(c.label, 1.0 + i, 2.0) for i, c in enumerate(phones["pixel_3"].state_space()))
    save_profile(tmp_path, Profile(phones["pixel_3"], "resnet34", "measured", 16, chs))
    written = calibrate_all(tmp_path)
    assert len(written) == 3 * 15 - 1 and tmp_path / "pixel_3" / "resnet34.yaml" not in written
    assert load_profile(tmp_path, "pixel_3", "resnet34").provenance == "measured"
    assert hash(phones["pixel_3"]) == hash(load_phones(tmp_path)["pixel_3"])
