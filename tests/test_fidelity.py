"""``flamingo-sim fidelity``: a measured profile against the shipped one, error by hand; the headline with it in place."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flamingo_sim.devices.profiles import ChoiceProfile, load_profile, save_profile
from flamingo_sim.errors import ConfigError
from flamingo_sim.report.fidelity import compare_profiles, format_fidelity, parse_as

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "profiles"


def _measured(tmp_path: Path, latency_x: float, power_x: float, name: str = "pixel_3") -> Path:
    """The shipped Pixel 3 MobileNetV2 profile, measured `latency_x` slower at `power_x` the power."""
    prof = load_profile(SHIPPED, "pixel_3", "mobilenet_v2")
    choices = tuple(ChoiceProfile(c.cores, c.step_latency_s * latency_x, None if c.power_w is None else c.power_w * power_x, 5)
                    for c in prof.all_choices[:-1])  # the last choice (0) left unmeasured
    save_profile(tmp_path, dataclasses.replace(prof, provenance="measured", all_choices=choices))
    return tmp_path


def test_errors_per_choice_by_hand(tmp_path):
    measured = _measured(tmp_path, latency_x=1.25, power_x=0.8)
    [r] = compare_profiles(measured, SHIPPED, {})
    assert r.shipped_phone == "pixel_3" and r.only_shipped == ("0",) and not r.only_measured
    base = next(c for c in r.choices if c.label == "4567")
    assert base.sim_latency_s == 49.7 and base.measured_latency_s == pytest.approx(49.7 * 1.25)
    assert base.latency_error == pytest.approx(1 / 1.25 - 1)  # -20 %: the simulator is faster than measured
    assert base.energy_error == pytest.approx(1 / (1.25 * 0.8) - 1, abs=1e-12)  # 0: slower and lower power cancel
    assert r.measured_speedup == pytest.approx(r.sim_speedup)  # a uniform factor keeps Table 1's ratios
    text = format_fidelity([r])
    assert "4567" in text and "-20.0 %" in text and "not measured: 0" in text


def test_a_phone_without_counterpart_is_one_line(tmp_path):
    measured = _measured(tmp_path, 1.0, 1.0)
    (measured / "pixel_3").rename(measured / "my_box")
    with pytest.raises(ConfigError, match=r"phone 'my_box' has no shipped counterpart; name one with --as my_box=SHIPPED"):
        compare_profiles(measured, SHIPPED, {})
    with pytest.raises(ConfigError, match="expected MEASURED=SHIPPED"):
        parse_as(["pixel_3"])
    with pytest.raises(ConfigError, match="no measured profile"):
        compare_profiles(tmp_path / "my_box", SHIPPED, {})


@pytest.mark.slow
def test_headline_with_the_measured_profile_in_place(tmp_path):
    measured = _measured(tmp_path / "m", latency_x=2.0, power_x=1.0)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLAMINGO_SIM_QUIET": "1"}
    args = [sys.executable, "-m", "flamingo_sim", "fidelity", str(measured), "--headline", "openimage_mobilenet", "--out", str(tmp_path / "h"),
            "--set", "fl.rounds=3", "--set", "fl.eval_every=1", "--set", "fl.participants_per_round=10"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    assert "headline with the measured profiles in place of the shipped ones for pixel_3" in done.stdout
    import pandas as pd

    shipped = pd.read_parquet(tmp_path / "h" / "run-shipped" / "metrics.parquet")
    slower = pd.read_parquet(tmp_path / "h" / "run-measured" / "metrics.parquet")
    # every Pixel 3 step takes twice as long at the same power: each policy's training energy grows, no round gets shorter
    for policy in ("baseline", "flamingo"):
        a, b = shipped[shipped["policy"] == policy], slower[slower["policy"] == policy]
        assert b["energy_cum_j"].iloc[-1] > a["energy_cum_j"].iloc[-1]
        assert (b["time_s"].to_numpy() >= a["time_s"].to_numpy()).all()


HEADLINE_REFUSED = [
    ("unknown experiment", ["--headline", "nonexistent"], "nonexistent: no such experiment file, and no shipped experiment of that name"),
    ("unknown key", ["--headline", "openimage_mobilenet", "--set", "fl.roundz=3"], "openimage_mobilenet: unknown key 'fl.roundz'"),
    ("bad value", ["--headline", "openimage_mobilenet", "--set", "fl.rounds=-3"], "openimage_mobilenet: fl.rounds: expected an integer >= 1, got -3"),
    ("refused as the parts are built", ["--headline", "openimage_mobilenet", "--set", "phones.mix={nophone: 1.0}"],
     "openimage_mobilenet: phones.mix: unknown phone 'nophone'"),
    ("out is a file", ["--headline", "openimage_mobilenet", "--out", "{tmp}/file"], "{tmp}/file: Not a directory (ENOTDIR)"),
]


@pytest.mark.parametrize("args, error", [c[1:] for c in HEADLINE_REFUSED], ids=[c[0] for c in HEADLINE_REFUSED])
def test_a_refused_headline_is_the_only_line_and_comes_before_the_table(tmp_path, monkeypatch, capsys, args, error):
    """Issue 50: the fidelity table (12 lines on stdout) was printed before the --headline's experiment, --set and --out
    were read, so a typo in them came after it; now they are checked first, and nothing is written."""
    from flamingo_sim.cli import main

    measured = _measured(tmp_path / "m", 1.0, 1.0)
    (tmp_path / "file").write_text("x")
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    assert main(["fidelity", str(measured), *[a.replace("{tmp}", str(tmp_path)) for a in args]]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.count("\n") == 1 and printed.err.startswith(f"flamingo-sim fidelity: error: {error.replace('{tmp}', str(tmp_path))}")
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("flag, args", [("--set", ["--set", "fl.rounds=3"]), ("--out", ["--out", "{tmp}/h"])])
def test_headline_flags_without_a_headline_are_refused(tmp_path, capsys, flag, args):
    """Issue 50: ``--set`` and ``--out`` without ``--headline`` were ignored (the table printed, exit 0)."""
    from flamingo_sim.cli import main

    measured = _measured(tmp_path / "m", 1.0, 1.0)
    assert main(["fidelity", str(measured), *[a.replace("{tmp}", str(tmp_path)) for a in args]]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == (f"flamingo-sim fidelity: error: {flag}: applies to the --headline runs, and no --headline EXPERIMENT was given: "
                           f"add one, or drop {flag}\n")
    assert not (tmp_path / "h").exists()
