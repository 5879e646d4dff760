"""``reproduce --data-root DIR``: each task finds its data set by FedScale's folder names, each data set is packed once
into ``OUT/packs`` and shared by the tasks (both OpenImage tasks read one pack) and seeds, and the same command again
reuses the packs (:mod:`flamingo_sim.studies.reproduce.data`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from flamingo_sim.cli import main
from tests.layouts import write_openimage, write_speech

ROOT = Path(__file__).resolve().parents[3]
SETS = ["fl.rounds=2", "fl.participants_per_round=2", "fl.local_steps=1", "fl.eval_every=1", "fl.batch_size=4", "data.filter_less=1", "fl.device=cpu",
        "openimage_mobilenet:data.image_size=32", "openimage_shufflenet:data.image_size=32"]


def _argv(data: Path, out: Path) -> list[str]:
    return ["reproduce", "--data-root", str(data), "--out", str(out), "--seeds", "1", "--jobs", "1", *[a for s in SETS for a in ("--set", s)]]


def test_a_data_root_without_a_tasks_folder_is_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    data = tmp_path / "data"
    write_openimage(data / "open_images", {"a": 4, "b": 4})
    out = tmp_path / "study"
    assert main(_argv(data, out)) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"flamingo-sim reproduce: error: --data-root: {data}: no google_speech folder for task speech_resnet34 "
                   "(google_speech data in FedScale's layout)")
    assert not out.exists()
    assert main(["reproduce", "--data-root", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"flamingo-sim reproduce: error: --data-root: {tmp_path / 'nowhere'}: not a directory"


@pytest.mark.slow
def test_each_data_set_is_packed_once_shared_and_reused(tmp_path):
    data, out = tmp_path / "data", tmp_path / "study"
    write_openimage(data / "open_images", {f"c{i}": 6 for i in range(6)})
    write_speech(data / "google_speech", {f"s{i}": 6 for i in range(6)})
    env = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "PYTHONPATH": str(ROOT)}
    first = subprocess.run([sys.executable, "-m", "flamingo_sim", *_argv(data, out)], capture_output=True, text=True, env=env, timeout=900)
    assert first.returncode == 0, first.stderr
    packs = sorted((out / "packs").iterdir())
    assert [p.name.rsplit("-", 1)[0] for p in packs] == ["google_speech-32", "openimage-32"]
    packing = [line for line in first.stderr.splitlines() if line.startswith("data: packing ")]
    assert packing == [f"data: packing {data / 'open_images'} once for openimage_mobilenet, openimage_shufflenet into {packs[1]}",
                       f"data: packing {data / 'google_speech'} once for speech_resnet34 into {packs[0]}"]
    roots = {t: yaml.safe_load((out / "runs" / t / "config.yaml").read_text())["data"]["root"]
             for t in ("openimage_mobilenet", "openimage_shufflenet", "speech_resnet34")}
    assert roots == {"openimage_mobilenet": str(packs[1]), "openimage_shufflenet": str(packs[1]), "speech_resnet34": str(packs[0])}
    assert "All tasks trained on real data" in (out / "report.md").read_text()
    again = subprocess.run([sys.executable, "-m", "flamingo_sim", *_argv(data, out)], capture_output=True, text=True, env=env, timeout=900)
    assert again.returncode == 0, again.stderr
    assert not [line for line in again.stderr.splitlines() if line.startswith("data: packing ")]
    assert f"data: {data / 'open_images'} is packed already in {packs[1]}; reusing it" in again.stderr.splitlines()
