"""Shared fixtures of the trace tests: a small synthetic dump in every layout."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flamingo_sim.traces.synth import SynthOptions, write_synthetic_dump


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trace tests run quiet; set per test (set at import, it leaked into every other test of the
    session, and silenced the Flower wait line that tests/integrations checks on a terminal)."""
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")

ALL_LAYOUTS = ("parquet", "csv-pages", "csv-tables", "csv-2019", "csv-2018")


@pytest.fixture(scope="session")
def synth_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 simulated devices (16 good, 2 of each failing kind) in every layout, plus one parquet file."""
    root = tmp_path_factory.mktemp("synth")
    write_synthetic_dump(root, SynthOptions(n_devices=24, seed=7, n_parts=3, layouts=ALL_LAYOUTS))
    parts = sorted((root / "kaggle" / "samples").glob("part-*.parquet"))
    pq.write_table(pa.concat_tables([pq.read_table(p) for p in parts]), root / "single.parquet")
    return root

