"""Helpers to build tiny GreenHub dumps by hand (imported by the trace tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DAY = 86400
T0 = 1546300800  # 2019-01-01 00:00:00 UTC


def write_samples(path: Path, rows: dict[str, list], *, fmt: str = "parquet", sep: str = ";") -> Path:
    """Write a tiny samples table (typed parquet, or a CSV with NULL for None)."""
    if fmt == "parquet":
        pq.write_table(pa.table(rows), path)
        return path
    names = list(rows)
    n = len(rows[names[0]])
    lines = [sep.join(names)]
    for i in range(n):
        lines.append(sep.join("NULL" if rows[c][i] is None else str(rows[c][i]) for c in names))
    path.write_text("\n".join(lines) + "\n")
    return path


def regular_device(device_id: int, days: float, per_day: int, start: int = T0, gaps: tuple[tuple[float, float], ...] = ()) -> dict[str, np.ndarray]:
    """Evenly spaced samples with a sawtooth level; ``gaps`` are (start_day, hours) holes."""
    n = int(days * per_day) + 1
    ts = start + np.round(np.linspace(0, days * DAY, n)).astype(np.int64)
    keep = np.ones(n, dtype=bool)
    for g_day, hours in gaps:
        a = start + g_day * DAY
        keep &= ~((ts > a) & (ts < a + hours * 3600))
    ts = ts[keep]
    level = 100.0 - (np.arange(ts.size) % 80)
    return {"device_id": np.full(ts.size, device_id, dtype=np.int64), "ts": ts, "level": level}


def table_of(devices: list[dict[str, np.ndarray]]) -> pa.Table:
    """A Kaggle-typed samples table (device_id, timestamp, battery_level) of ``devices``."""
    dev = np.concatenate([d["device_id"] for d in devices])
    ts = np.concatenate([d["ts"] for d in devices])
    lvl = np.concatenate([d["level"] for d in devices])
    return pa.table({
        "id": pa.array(np.arange(dev.size, dtype=np.int64)),
        "device_id": pa.array(dev),
        "timestamp": pa.array(ts, type=pa.int64()).cast(pa.timestamp("s")).cast(pa.timestamp("us")),
        "battery_level": pa.array(lvl),
    })
