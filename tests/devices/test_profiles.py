from __future__ import annotations

import filecmp
import shutil

import numpy as np
import pytest

from flamingo_sim.devices.calibrate import TABLE1, calibrate_all
from flamingo_sim.devices.calibrate import main as calibrate_main
from flamingo_sim.devices.profiles import MODELS, ChoiceProfile, Profile, ProfileSet, load_profile, prune
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
def test_table1_within_5_percent(profiles_dir, phone, model, kind, target):
    prof = load_profile(profiles_dir, phone, model)
    assert prof.provenance == "calibrated"
    assert getattr(prof, kind) == pytest.approx(target, rel=0.05)


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
    assert min(prof.all_choices, key=lambda c: c.step_energy_j).label == "4"


@pytest.mark.parametrize("phone", sorted(SPEC_TABLE1))
@pytest.mark.parametrize("model", MODELS)
def test_profiles_are_physically_plausible(profiles_dir, phone, model):
    prof = load_profile(profiles_dir, phone, model)
    by = {c.label: c for c in prof.all_choices}
    assert len(by) == len(prof.phone.state_space())
    assert by["0"].power_w < by["4"].power_w  # a low-power core draws less than a big core
    lat = [c.step_latency_s for c in prof.choices]
    assert lat == sorted(lat) and len(set(lat)) == len(lat)  # viable: strictly faster toward the front
    assert prof.choices[-1].label == "0"
    for c in prof.all_choices:
        assert c.step_energy_j == pytest.approx(c.step_latency_s * c.power_w)
    if model != "resnet34":  # memory-bound: more threads do not help past two big cores
        assert by["4567"].step_latency_s > by["45"].step_latency_s


def test_calibration_regenerates_the_shipped_files(profiles_dir, tmp_path):
    shutil.copy(profiles_dir / "phones.yaml", tmp_path / "phones.yaml")
    assert calibrate_main(["--profiles-dir", str(tmp_path)]) == 0
    for phone in SPEC_TABLE1:
        for model in MODELS:
            rel = f"{phone}/{model}.yaml"
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
    assert len(written) == 14 and tmp_path / "pixel_3" / "resnet34.yaml" not in written
    assert load_profile(tmp_path, "pixel_3", "resnet34").provenance == "measured"
    assert hash(phones["pixel_3"]) == hash(load_phones(tmp_path)["pixel_3"])
