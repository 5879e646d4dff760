"""``flamingo-sim profile`` run for real on this machine (small model, few steps), and its refusals."""

from __future__ import annotations

import os
import shutil
import time

import pytest
import torch

from flamingo_sim.cli import main
from flamingo_sim.devices import profiler
from flamingo_sim.devices.cores import discover_cores
from flamingo_sim.devices.energy import Detection, Reading
from flamingo_sim.devices.profiler import MIN_POWER_W, ProfileRequest, run_profile
from flamingo_sim.devices.profiles import ChoiceProfile, Profile, ProfileSet, load_profile
from flamingo_sim.devices.soc import baseline_cores, load_phones, state_space
from flamingo_sim.errors import ConfigError, FlamingoError

FAST = ["--steps", "2", "--warmup-steps", "1", "--idle-s", "0"]


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")


@pytest.fixture
def catalogue_dir(tmp_path, profiles_dir):
    """A profiles directory with the shipped catalogue and Pixel 3 profiles."""
    d = tmp_path / "profiles"
    d.mkdir()
    shutil.copy(profiles_dir / "phones.yaml", d / "phones.yaml")
    shutil.copytree(profiles_dir / "pixel_3", d / "pixel_3")
    return d


class CpuCounter:
    """A fake energy counter: 1 W of background plus 2 W per busy core (process CPU time)."""

    name = "rapl"

    def read(self) -> Reading:
        t = time.monotonic()
        return Reading(t, energy_j=1.0 * t + 2.0 * time.process_time())

    def describe(self) -> str:
        return "fake counter: 1 W + 2 W per busy core"


@pytest.mark.slow
def test_cli_profile_on_this_machine_round_trips(tmp_path, capsys):
    """The real command: one measured latency per choice of the discovered state space."""
    out_dir = tmp_path / "mine"
    rc = main(["profile", "--model", "mobilenet_v2", "--image-size", "32", *FAST, "--profiles-dir", str(out_dir), "--phone", "box"])
    assert rc == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert f"wrote {out_dir / 'box' / 'mobilenet_v2.yaml'} and {out_dir / 'phones.yaml'}" in printed
    layout = discover_cores().layout
    prof = load_profile(out_dir, "box", "mobilenet_v2")  # the simulator's loader, unchanged
    assert prof.provenance == "measured" and prof.batch_size == 16
    assert prof.phone.layout == layout
    assert [c.label for c in prof.all_choices] == [c.label for c in state_space(layout)]
    assert all(c.step_latency_s > 0 and c.n_steps == 2 for c in prof.all_choices)
    assert prof.baseline.cores == baseline_cores(layout)
    assert prof.machine and "torch" in prof.machine
    if not prof.has_power:  # this machine exposes no energy reading: latency only, and why
        assert all(c.power_w is None for c in prof.all_choices)
        assert "not readable" in prof.energy_note
        assert prof.energy_efficiency is None
        with pytest.raises(ConfigError, match="latency only"):
            ProfileSet.load(out_dir, ["box"], "mobilenet_v2")
    # and the Table 1 view shows it
    assert main(["profiles", "--profiles-dir", str(out_dir)]) == 0
    assert "box / mobilenet_v2 (measured)" in capsys.readouterr().out


@pytest.mark.slow
def test_measured_power_goes_into_a_profile_the_simulator_accepts(catalogue_dir):
    """With a (fake) energy counter: power above idle per choice; loads beside a shipped phone."""
    before_mask, before_threads = os.sched_getaffinity(0), torch.get_num_threads()
    req = ProfileRequest("mobilenet_v2", steps=2, warmup_steps=1, image_size=32, idle_s=0.3)
    summary = run_profile(req, catalogue_dir, phone_name="box", detection=Detection(CpuCounter()))
    assert os.sched_getaffinity(0) == before_mask and torch.get_num_threads() == before_threads  # restored
    assert summary["catalogue"] == str(catalogue_dir / "phones.d" / "box.yaml")
    assert 0.5 < summary["idle_power_w"] < 1.5  # ~1 W background, almost no CPU while sleeping
    assert all(c["threads_pinned"] >= 1 for c in summary["choices"])
    assert all(c["power_w"] >= MIN_POWER_W for c in summary["choices"])
    assert "box" in load_phones(catalogue_dir) and "pixel_3" in load_phones(catalogue_dir)
    prof = load_profile(catalogue_dir, "box", "mobilenet_v2")
    assert prof.has_power and prof.energy_source.startswith("fake counter") and "minus idle power" in prof.energy_note
    ps = ProfileSet.load(catalogue_dir, ["pixel_3", "box"], "mobilenet_v2")
    assert ps.labels[ps.baseline_label_idx[0]] == "4567"
    assert ps.labels[ps.baseline_label_idx[1]] == prof.baseline.label
    # a second model on the same machine reuses the catalogue entry
    summary = run_profile(ProfileRequest("mlp", steps=2, warmup_steps=1, idle_s=0), catalogue_dir, phone_name="box")
    assert summary["catalogue"] is None
    assert load_profile(catalogue_dir, "box", "mlp").model == "mlp"


def test_out_path_and_alias(tmp_path):
    out = tmp_path / "x.yaml"
    summary = run_profile(ProfileRequest("logreg", steps=2, warmup_steps=0, idle_s=0), tmp_path / "p", phone_name="box", out=out)
    assert summary["profile"] == str(out) and out.is_file()
    assert "provenance: measured" in out.read_text()
    assert profiler.resolve_model("shufflenet_v2_x2_0") == ("shufflenet_v2_x2", "shufflenet_v2_x2_0")


def test_pin_pins_every_thread():
    mask = os.sched_getaffinity(0)
    core = min(mask)
    torch.set_num_threads(len(mask))
    torch.ones(1000, 1000) @ torch.ones(1000, 1000)  # make sure the worker pool exists
    try:
        n = profiler._pin((core,))
        tids = [int(t) for t in os.listdir("/proc/self/task")]
        assert n >= 1 and all(os.sched_getaffinity(t) == {core} for t in tids)
    finally:
        profiler._pin(mask)
    assert os.sched_getaffinity(0) == mask


def test_refuses_unknown_model(tmp_path, capsys):
    assert main(["profile", "--model", "vgg16", *FAST, "--profiles-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'vgg16'; known models: mobilenet_v2, shufflenet_v2_x2, resnet34, mlp, logreg" in err
    assert not any(tmp_path.iterdir())


def test_refuses_non_linux(monkeypatch, tmp_path):
    monkeypatch.setattr(profiler.sys, "platform", "darwin")
    with pytest.raises(FlamingoError, match="needs Linux"):
        run_profile(ProfileRequest("mlp"), tmp_path)


def test_refuses_when_affinity_not_permitted(monkeypatch, tmp_path, capsys):
    def denied(pid, cores):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(profiler.os, "sched_setaffinity", denied)
    assert main(["profile", "--model", "mlp", *FAST, "--profiles-dir", str(tmp_path)]) == 2
    assert "setting CPU affinity is not permitted here" in capsys.readouterr().err


def test_refuses_bad_options_and_a_clashing_phone(catalogue_dir):
    with pytest.raises(FlamingoError, match=r"^steps must be >= 1, got 0$"):
        ProfileRequest("mlp", steps=0)
    with pytest.raises(FlamingoError, match="another core layout"):  # pixel_3 is 0-3/4-7, not this machine
        run_profile(ProfileRequest("mlp", steps=1, warmup_steps=0, idle_s=0), catalogue_dir, phone_name="pixel_3")


def test_schema_power_all_or_none(profiles_dir):
    phone = load_phones(profiles_dir)["pixel_3"]
    labels = [c.cores for c in state_space(phone.layout)]
    with pytest.raises(ValueError, match="every choice or for none"):
        Profile(phone, "mlp", "measured", 16, tuple(ChoiceProfile(c, 1.0, None if i else 2.0) for i, c in enumerate(labels)))
    prof = Profile(phone, "mlp", "measured", 16, tuple(ChoiceProfile(c, 1.0, None, 3) for c in labels), energy_note="why")
    m = prof.to_mapping()
    assert m["energy_note"] == "why" and "machine" not in m and m["choices"][0] == {
        "cores": [4, 5, 6, 7], "step_latency_s": 1.0, "power_w": None, "n_steps": 3}


def test_battery_capacity_comes_from_the_energy_source(tmp_path):
    class Battery(CpuCounter):
        name = "battery-sysfs"
        capacity_mah = 2915.0

    run_profile(ProfileRequest("logreg", steps=1, warmup_steps=0, idle_s=0), tmp_path, phone_name="box",
                detection=Detection(Battery()))
    assert load_phones(tmp_path)["box"].capacity_mah == 2915.0


def test_phones_d_catalogue_files(catalogue_dir):
    extra = catalogue_dir / "phones.d"
    extra.mkdir()
    (extra / "a.yaml").write_text("socs: {}\nphones:\n  my_pixel: {soc: sd845, capacity_mah: 2915}\n")
    phones = load_phones(catalogue_dir)
    assert phones["my_pixel"].soc.name == "sd845" and "oneplus_8" in phones  # may use phones.yaml's SoCs
    (extra / "b.yaml").write_text("socs: {}\nphones:\n  pixel_3: {soc: sd845, capacity_mah: 2915}\n")
    with pytest.raises(ConfigError, match=r"b\.yaml: phones\.pixel_3: already defined"):
        load_phones(catalogue_dir)


def test_profile_goes_to_the_user_folder_and_experiments_find_it(tmp_path, monkeypatch, capsys, profiles_dir):
    """By default nothing is written into the shipped profiles; the user's folder is searched first."""
    from flamingo_sim.config import from_mapping
    from flamingo_sim.devices.catalogue import ProfileDirs
    from flamingo_sim.fl.compose import profile_dirs
    from flamingo_sim.fl.config import ExperimentConfig

    home = tmp_path / "home"
    monkeypatch.setenv("FLAMINGO_SIM_HOME", str(home))
    shipped_before = sorted(p.relative_to(profiles_dir) for p in profiles_dir.rglob("*"))
    assert main(["profile", "--model", "mlp", *FAST, "--phone", "box"]) == 0, capsys.readouterr().err
    assert f"wrote {home / 'profiles' / 'box' / 'mlp.yaml'} and {home / 'profiles' / 'phones.yaml'}" in capsys.readouterr().out
    assert sorted(p.relative_to(profiles_dir) for p in profiles_dir.rglob("*")) == shipped_before
    search = profile_dirs(from_mapping(ExperimentConfig, {"name": "x"}), None)
    assert search.dirs[0] == home / "profiles" and search.dirs[-1].resolve() == profiles_dir.resolve()
    phones = search.phones()
    assert {"box", "pixel_3"} <= set(phones)  # the user's phone beside the shipped ones
    assert search.path("box", "mlp") == home / "profiles" / "box" / "mlp.yaml"
    assert search.load("box", "mlp").provenance == "measured"
    assert search.path("pixel_3", "mobilenet_v2").resolve() == (profiles_dir / "pixel_3" / "mobilenet_v2.yaml").resolve()
    # a phone the user measured under a shipped name hides the shipped profile of that model
    (home / "profiles" / "pixel_3").mkdir()
    shutil.copy(profiles_dir / "pixel_3" / "resnet34.yaml", home / "profiles" / "pixel_3" / "resnet34.yaml")
    assert ProfileDirs.of([home / "profiles", profiles_dir]).path("pixel_3", "resnet34") == home / "profiles" / "pixel_3" / "resnet34.yaml"


def test_profile_with_out_registers_no_phone_unless_asked(tmp_path, monkeypatch, capsys):
    """Issue 44: ``profile --out FILE`` also wrote the phone into the user's profiles directory, without a word,
    and later error messages listed it among the known phones."""
    home = tmp_path / "home"
    monkeypatch.setenv("FLAMINGO_SIM_HOME", str(home))
    out = tmp_path / "mine.yaml"
    assert main(["profile", "--model", "logreg", *FAST, "--phone", "box", "--out", str(out)]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert out.is_file() and not home.exists()  # nothing written but the file asked for
    assert f"wrote {out}\n" in printed
    assert "phone 'box' not registered (--out without --profiles-dir): to run it, give --profiles-dir DIR, or leave out --out" in printed
    mine = tmp_path / "catalogue"  # asked for: --profiles-dir says where
    assert main(["profile", "--model", "logreg", *FAST, "--phone", "box", "--out", str(tmp_path / "b.yaml"), "--profiles-dir", str(mine)]) == 0
    printed = capsys.readouterr().out
    assert f"registered this machine as phone 'box' in {mine / 'phones.yaml'}: runs find it there" in printed
    assert (mine / "phones.yaml").is_file()
