from __future__ import annotations

import json

import pytest

from flamingo_sim.cli import main

SHIPPED_PHONES = {"galaxy_tab_s6", "oneplus_8", "pixel_3", "galaxy_s10e", "mi_10"}


def test_profiles_json(profiles_dir, capsys):
    assert main(["profiles", "--json", "--profiles-dir", str(profiles_dir)]) == 0
    data = [r for r in json.loads(capsys.readouterr().out) if r["phone"] in SHIPPED_PHONES]
    assert len(data) == 15
    rec = next(r for r in data if r["phone"] == "pixel_3" and r["model"] == "shufflenet_v2_x2")
    assert {"phone", "model", "choices", "speedup", "energy_efficiency"} <= set(rec)
    assert [c["cores"] for c in rec["choices"]] == [[4], [0, 1], [0]]
    assert set(rec["choices"][0]) >= {"cores", "step_latency_s", "power_w", "step_energy_j"}
    assert rec["speedup"] == pytest.approx(1.8, rel=0.05)


def test_profiles_table_and_error(profiles_dir, tmp_path, capsys):
    assert main(["profiles", "--profiles-dir", str(profiles_dir)]) == 0
    out = capsys.readouterr().out
    assert "pixel_3 / resnet34 (calibrated): speedup 1.00x, energy efficiency 1.00x" in out
    assert main(["profiles", "--profiles-dir", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == f"flamingo-sim profiles: error: --profiles-dir {tmp_path / 'nowhere'}: not a directory"
    (tmp_path / "phones.yaml").write_text("socs: {}\nphones: {x: {soc: nope, capacity_mah: 1}}\n")
    assert main(["profiles", "--profiles-dir", str(tmp_path)]) == 2
    assert "phones.yaml: phones.x.soc: unknown SoC 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("pset", ["paper", "anchored", "public"])
def test_profiles_lists_each_set_with_its_sources(profiles_dir, capsys, pset):
    assert main(["profiles", "--json", "--profiles-dir", str(profiles_dir), "--profile-set", pset]) == 0
    data = [r for r in json.loads(capsys.readouterr().out) if r["phone"] in SHIPPED_PHONES]
    assert len(data) == 15 and {r["profile_set"] for r in data} == {pset}
    assert all(r["notes"] for r in data)
    assert all((f"/{pset}/" in r["file"]) == (pset != "paper") for r in data)
    rec = next(r for r in data if r["phone"] == "galaxy_s10e" and r["model"] == "mobilenet_v2")
    want = {"paper": "profile set 'paper'", "anchored": "profile set 'anchored'", "public": "Raspberry Pi 5"}[pset]
    assert want in rec["notes"]
    assert main(["profiles", "--profiles-dir", str(profiles_dir), "--profile-set", pset]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"profile set {pset} (others: ")
    if pset == "public":  # all four big cores are the fastest choice: nothing to gain over 4567 when idle
        assert "galaxy_s10e / mobilenet_v2 (calibrated): speedup 1.00x, energy efficiency 1.00x" in out


def test_profiles_unknown_set_is_one_line(profiles_dir, capsys):
    assert main(["profiles", "--profiles-dir", str(profiles_dir), "--profile-set", "nope"]) == 2
    assert capsys.readouterr().err.strip() == (
        "flamingo-sim profiles: error: --profile-set: expected one of paper, anchored, public, got 'nope'")


@pytest.mark.parametrize("target,expected", [
    ("adir", "--out {d}/adir: a directory; expected the path of a JSON file to write"),
    ("afile/t.json", "--out {d}/afile/t.json: {d}/afile is not a writable directory"),
])
def test_thermal_refuses_its_out_before_the_table(tmp_path, capsys, target, expected):
    """Issue 50: ``thermal --out`` a directory or under a file printed the 33-line table, then the error; now the refusal
    is the only line, and nothing is written."""
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["thermal", "--out", str(tmp_path / target)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"flamingo-sim thermal: error: {expected.format(d=tmp_path)}\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("flags", [["--image-size", "100000"], ["--batch", "100000000"]], ids=["image", "batch"])
def test_profile_refuses_a_step_the_memory_cannot_hold_in_one_line(tmp_path, capsys, flags):
    """Issue 50: ``profile --image-size 100000`` printed its ``cores:`` and ``energy:`` lines, then a 30-line allocation
    traceback; now one line, before anything is measured or written: 16 x 3 x 10^10 x 4 bytes x 131 is 234,246 GiB."""
    assert main(["profile", "--model", "mobilenet_v2", *flags, "--out", str(tmp_path / "p.yaml")]) == 2
    out, err = capsys.readouterr()
    size = 100000 if flags[0] == "--image-size" else 224
    batch = 16 if flags[0] == "--image-size" else 100000000
    need = batch * 3 * size**2 * 4 * 131 / 2**30
    assert out == "" and err.startswith(f"flamingo-sim profile: error: --batch {batch} --image-size {size}: a training step needs "
                                        f"about {need:,.0f} GiB") and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
