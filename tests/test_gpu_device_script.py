"""``benchmarks/gpu_device.sh --dry-run``: the GPU script's every piece, tiny, on the CPU, into a folder of its own; each
writes its results file with the command, the commit and the machine (what the lead's GPU call will write)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_gpu_script_runs_every_piece_on_a_cpu(tmp_path):
    before = sorted(p.name for p in (ROOT / "benchmarks" / "results").iterdir())
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["bash", "benchmarks/gpu_device.sh", "--dry-run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["cuda_tests_dry.json", "gpu_device_dry.log", "gpu_round_dry.json", "provenance.json", "reproduce_real_dry.json"]
    stamped = json.loads((tmp_path / "provenance.json").read_text())["files"]  # the folder's record of who wrote what
    assert "gpu_round_dry.json" in stamped and set(stamped) <= set(names)  # gpu_round.py stamps what it writes
    assert all(entry["commit"] == commit for entry in stamped.values())
    names.remove("provenance.json")
    docs = {n: json.loads((tmp_path / n).read_text()) for n in names if n.endswith(".json")}
    for name, doc in docs.items():
        assert doc["commit"] == commit and doc["command"] and doc["machine"], name
        assert doc["complete"] is True, name
    tests = docs["cuda_tests_dry.json"]
    assert tests["gpu"] is None and tests["tests"] and tests["counts"]["failed"] == tests["counts"]["error"] == 0
    assert all(t["id"].startswith("tests/fl/training/test_") and "::test_" in t["id"] and t["outcome"] in ("passed", "skipped")
               for t in tests["tests"])
    assert any(t["id"].endswith("::test_the_tuner_on_a_gpu_checks_and_times_every_candidate") and t["outcome"] == "skipped" for t in tests["tests"])
    rounds = docs["gpu_round_dry.json"]
    assert [r["row"] for r in rounds["rows"]] == ["MobileNetV2, 32 px", "ShuffleNetV2 x2, 32 px", "ResNet-34, 3x32x32 (speech)"]
    assert all(r["auto"]["chosen"] and r["auto"]["bound"]["factor"] == 4.0 and len(r["auto"]["trials"]) >= 5 for r in rounds["rows"])
    real = docs["reproduce_real_dry.json"]
    assert real["packed_once"] and real["real_data"] and real["full_estimate_s"] > 0 and len(real["s_per_round"]) == 3
    assert sorted(p.name for p in (ROOT / "benchmarks" / "results").iterdir()) == before
