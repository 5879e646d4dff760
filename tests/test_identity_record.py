"""The identity checks of issue 42's runner refactor (benchmarks/identity.py) are recorded as identical, and the
benchmarks page says what they compared, as the results files have it."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def test_the_refactor_is_recorded_identical_byte_for_byte_and_main_value_for_value():
    strict = json.loads((RESULTS / "identity_refactor.json").read_text())
    lenient = json.loads((RESULTS / "identity_main_lenient.json").read_text())
    for record, is_lenient in ((strict, False), (lenient, True)):
        assert record["lenient"] is is_lenient and record["rounds"] == 5 and record["identical"] is True
        assert sorted(record["jobs"]) == ["openimage_mobilenet", "toolkit_fedbuff"]
        assert record["command"].startswith("PYTHONPATH=. python benchmarks/identity.py ")
        for job in record["jobs"].values():
            assert job["metrics.parquet"]["identical"] and job["summary.json"]["identical"]
    for job in strict["jobs"].values():  # byte for byte: the same SHA-256
        assert all(job[name]["base_sha256"] == job[name]["this_sha256"] for name in ("metrics.parquet", "summary.json"))
    assert lenient["jobs"]["openimage_mobilenet"]["too_hot_carried"] is True
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    for name in ("identity_refactor.json", "identity_main_lenient.json"):
        assert f"`benchmarks/results/{name}`" in page
    assert "both shortened to 5 rounds" in page


def test_issue_52s_eighth_session_is_recorded_identical_on_the_whole_main_job():
    """The eighth session's changes (the proxy's labels from a BLAS product, exactly; rngs; the unit's checkpoint save) against
    the commit before them, on the whole main job and the whole FedBuff job (100 rounds each): the same SHA-256."""
    record = json.loads((RESULTS / "identity_s8_2cores.json").read_text())
    assert record["rounds"] == 100 and record["lenient"] is False and record["identical"] is True
    assert record["base_commit"].startswith("b55fc6d") and sorted(record["jobs"]) == ["openimage_mobilenet", "toolkit_fedbuff"]
    for job in record["jobs"].values():
        assert all(job[name]["base_sha256"] == job[name]["this_sha256"] for name in ("metrics.parquet", "summary.json"))
    page = " ".join((ROOT / "docs" / "benchmarks.md").read_text().split())
    assert "`benchmarks/results/identity_s8_2cores.json`" in page and "identical byte for byte to a run of commit b55fc6d" in page
