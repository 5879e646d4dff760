"""A wheel (``pip install .``, not editable) carries everything a run needs and works from any
directory: the shipped experiments by name, the profiles and the trace set as package data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP = shutil.ignore_patterns(".git", ".venv", "runs", "site", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".ipynb_checkpoints")


def _pip(*args: str | Path, cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *map(str, args)], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_wheel_runs_a_shipped_experiment_from_another_directory(tmp_path):
    src = tmp_path / "src"  # build from a copy: setuptools writes build/ and *.egg-info beside the sources
    shutil.copytree(ROOT, src, symlinks=True, ignore=SKIP)
    _pip("wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path / "dist", ".", cwd=src)
    (wheel,) = (tmp_path / "dist").glob("flamingo_sim-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for shipped in ("flamingo_sim/data/experiments/openimage_mobilenet.yaml", "flamingo_sim/data/profiles/phones.yaml",
                    "flamingo_sim/data/profiles/pixel_3/mobilenet_v2.yaml", "flamingo_sim/data/traces/synthetic/clients.parquet",
                    "flamingo_sim/data/traces/synthetic/devices.parquet"):
        assert shipped in names, shipped
    site = tmp_path / "site"
    _pip("install", "--no-deps", "-q", "--target", site, wheel, cwd=tmp_path)

    elsewhere = tmp_path / "elsewhere"  # no experiments/, profiles/ or traces/ here
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "FLAMINGO_SIM_QUIET": "1", "FLAMINGO_SIM_HOME": str(tmp_path / "home"),
           "OMP_NUM_THREADS": "1"}
    where = subprocess.run([sys.executable, "-c", "import flamingo_sim; print(flamingo_sim.__file__)"], cwd=elsewhere, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(site)  # the installed copy, not the checkout
    cmd = [str(site / "bin" / "flamingo-sim"), "run", "openimage_mobilenet", "--out", "run", "--set", "fl.rounds=2",
           "--set", "fl.participants_per_round=4", "--set", "fl.local_steps=2", "--set", "fl.eval_every=1",
           "--set", "data.proxy.n_clients=200"]
    done = subprocess.run(cmd, cwd=elsewhere, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((elsewhere / "run" / "summary.json").read_text())
    assert summary["experiment"] == "openimage_mobilenet" and set(summary["policies"]) == {"baseline", "flamingo"}
    assert sorted(p.name for p in elsewhere.iterdir()) == ["run"]  # nothing else written where it ran
    bad = subprocess.run([str(site / "bin" / "flamingo-sim"), "run", "no_such_experiment"], cwd=elsewhere, env=env,
                         capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip() == ("flamingo-sim run: error: no_such_experiment: no such experiment file, and no shipped "
                                  "experiment of that name (shipped: fedscale_openimage_mobilenet, fedscale_speech_resnet34, openimage_mobilenet, "
                                  "openimage_shufflenet, speech_resnet34, "
                                  "toolkit_arrays, toolkit_battery_selection, toolkit_fedbuff, toolkit_fedprox, toolkit_fedyogi, "
                                  "toolkit_leaf_femnist, toolkit_leaf_shakespeare, toolkit_least_energy, toolkit_oort, toolkit_tracking)")
