"""Writing a synthetic samples table in each GreenHub layout (docs/traces.md), quirks included.

Layouts (each in its own sub-directory of the output):

``kaggle/``    ``samples/part-NNNN.parquet`` (38 typed columns) and ``devices/part-0000.parquet``
``aug2020/``   ``samples.query.N.csv`` pages: ``;``, unquoted, header on every page, ``NULL``;
               two rows whose ``timezone`` holds a ``;`` (shifted rows)
``weekly/``    ``samples.csv`` + ``battery_details.csv`` (``sample_id``, ``charger``, ``health``,
               ``voltage``, ``temperature``) + ``network_details.csv`` (``sample_id``,
               ``network_type``, ``mobile_network_type``, ``mobile_data_status``,
               ``mobile_data_activity``, ``roaming_enabled``, ``wifi_status``,
               ``wifi_signal_strength``, ``wifi_link_speed``; ``network_status`` stays in
               ``samples``, as in the server's schema) + ``devices.csv``: ``;``, ``NULL``, 0-1 levels
``csv2019/``   the same tables comma-separated, header line repeated every 5000 rows
``csv2018/``   the same tables as ``SELECT ... INTO OUTFILE ... ENCLOSED BY '"'`` wrote them: every
               value double-quoted, NULL as a bare ``\\N``, under a header line of bare column
               names (written separately); some ``0000-00-00 00:00:00`` timestamps

Every layout carries a devices table (``id, model, manufacturer, brand, os_version, is_root,
created_at``): device ``i`` gets the ``i``-th entry of :data:`SYNTH_PHONES`, cyclically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from flamingo_sim.io import atomic_dir, atomic_path
from flamingo_sim.rng import rng

__all__ = ["write_layouts", "write_csv", "LAYOUT_DIRS", "SYNTH_PHONES"]

#: The kind of output a synthetic dump layout directory is (its manifest).
DUMP = "synthetic-greenhub-dump"
LAYOUT_DIRS = {"parquet": "kaggle", "csv-pages": "aug2020", "csv-tables": "weekly", "csv-2019": "csv2019", "csv-2018": "csv2018"}
_DETAILS = ("charger", "health", "voltage", "temperature")
#: network_details' columns (greenhub-project/farmer, migration create_network_details_table), as far as the samples table has them.
_NETWORK = ("network_type", "mobile_network_type", "mobile_data_status", "mobile_data_activity", "roaming_enabled", "wifi_status",
            "wifi_signal_strength", "wifi_link_speed")


def _as_text(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    t = col.type
    if pa.types.is_timestamp(t):
        return pc.strftime(pc.cast(col, pa.timestamp("s")), format="%Y-%m-%d %H:%M:%S")
    if pa.types.is_floating(t):
        # integral floats as "57", others as their shortest repr
        return pc.cast(col, pa.string())
    return pc.cast(col, pa.string())


def write_csv(table: pa.Table, path: Path, *, delim: str = ";", quote_all: bool = False, null: str = "NULL",
              header_every: int | None = None) -> Path:
    """Write ``table`` as a mysql-style CSV (atomic); the header line is always the bare column names."""
    header = delim.join(table.column_names)
    cols = []
    for name in table.column_names:
        text = _as_text(table.column(name))
        if quote_all:
            text = pc.binary_join_element_wise('"', text, '"', "")
        cols.append(pc.fill_null(text, null))
    lines = pc.binary_join_element_wise(*cols, delim).to_pylist() if cols else []
    with atomic_path(path) as tmp, open(tmp, "w", newline="\n") as fh:
        fh.write(header + "\n")
        step = header_every or max(len(lines), 1)
        for i in range(0, len(lines), step):
            if i and header_every:
                fh.write(header + "\n")
            fh.write("\n".join(lines[i : i + step]) + "\n")
    return path


#: (model, manufacturer, brand) as Android's Build fields name them: the five profiled phones
#: under several model codes, phones of their SoC classes, and phones no rule knows.
SYNTH_PHONES = (
    ("SM-G970F", "samsung", "samsung"),  # Galaxy S10e
    ("Pixel 3", "Google", "google"),
    ("IN2013", "OnePlus", "OnePlus"),  # OnePlus 8
    ("Mi 10", "Xiaomi", "Xiaomi"),
    ("SM-T860", "samsung", "samsung"),  # Galaxy Tab S6 (Wi-Fi)
    ("GM1913", "OnePlus", "OnePlus"),  # OnePlus 7 Pro: SD855
    ("ONEPLUS A6003", "OnePlus", "OnePlus"),  # OnePlus 6: SD845
    ("Redmi Note 7", "Xiaomi", "xiaomi"),  # SD660: no rule
    ("SM-G970U", "samsung", "samsung"),  # Galaxy S10e (US)
    ("Pixel 3 XL", "Google", "google"),
    ("M2001J2G", "Xiaomi", "Xiaomi"),  # Mi 10
    ("moto g(7) power", "motorola", "motorola"),  # SD632: no rule
    ("SM-G981U", "samsung", "samsung"),  # Galaxy S20 5G (US): SD865
)  # 13 entries: coprime with the 12 device kinds of synth.KINDS, so every kind meets every phone


def _devices_table(devices: list[Any]) -> pa.Table:
    ids = np.array([d.device_id for d in devices], dtype=np.int64)
    n = ids.size
    phones = [SYNTH_PHONES[i % len(SYNTH_PHONES)] for i in range(n)]
    return pa.table({
        "id": pa.array(ids),
        "model": pa.array([p[0] for p in phones]),
        "manufacturer": pa.array([p[1] for p in phones]),
        "brand": pa.array([p[2] for p in phones]),
        "os_version": pa.array(["9"] * n),
        "is_root": pa.array(np.zeros(n, dtype=np.int64)),
        "created_at": pa.array(np.full(n, 1551398400 * 1_000_000, dtype=np.int64), type=pa.timestamp("us")),
    })


def _fraction(table: pa.Table) -> pa.Table:
    """Older dumps store battery_level as a 0-1 fraction."""
    i = table.column_names.index("battery_level")
    return table.set_column(i, "battery_level", pc.divide(table.column("battery_level"), 100.0))


def _split_tables(table: pa.Table) -> tuple[pa.Table, pa.Table, pa.Table]:
    """samples, battery_details and network_details of the per-table dumps (both keyed by sample_id)."""
    samples = table.drop_columns(list(_DETAILS) + list(_NETWORK))
    details = pa.table({"id": table.column("id"), "sample_id": table.column("id"), **{c: table.column(c) for c in _DETAILS}})
    network = pa.table({"id": table.column("id"), "sample_id": table.column("id"), **{c: table.column(c) for c in _NETWORK}})
    return samples, details, network


def _shift_rows(path: Path, row_numbers: list[int], column: str, delim: str) -> None:
    """Put a ``delim`` inside ``column`` of the given data rows (1-based) of a written CSV."""
    lines = path.read_text().split("\n")
    k = lines[0].split(delim).index(column)
    for r in row_numbers:
        fields = lines[r].split(delim)
        fields[k] = fields[k].replace("/", delim, 1) if "/" in fields[k] else fields[k] + delim + "x"
        lines[r] = delim.join(fields)
    path.write_text("\n".join(lines))


def write_layouts(out_dir: str | Path, table: pa.Table, devices: list[Any], opts: Any) -> list[Path]:
    """Write every layout in ``opts.layouts`` under ``out_dir``; return the layout directories."""
    out_dir = Path(out_dir)
    written: list[Path] = []
    dev_table = _devices_table(devices)
    r = rng(opts.seed, "synth.write")
    for layout in opts.layouts:
        if layout not in LAYOUT_DIRS:
            from flamingo_sim.errors import InputDataError

            raise InputDataError(f"layouts: {layout!r} unknown; expected some of {', '.join(LAYOUT_DIRS)}")
        target = out_dir / LAYOUT_DIRS[layout]
        with atomic_dir(target, DUMP) as stage:
            if layout == "parquet":
                (stage / "samples").mkdir()
                (stage / "devices").mkdir()
                bounds = np.linspace(0, table.num_rows, opts.n_parts + 1).astype(int)
                for p in range(opts.n_parts):
                    part = table.slice(bounds[p], bounds[p + 1] - bounds[p])
                    pq.write_table(part, stage / "samples" / f"part-{p:04d}.parquet", compression="snappy")
                pq.write_table(dev_table, stage / "devices" / "part-0000.parquet")
            elif layout == "csv-pages":
                n_pages = max(2, opts.n_parts)
                bounds = np.linspace(0, table.num_rows, n_pages + 1).astype(int)
                for p in range(n_pages):
                    page = table.slice(bounds[p], bounds[p + 1] - bounds[p])
                    write_csv(page, stage / f"samples.query.{p + 1}.csv")
                rows = sorted(int(x) for x in r.choice(np.arange(2, bounds[1] - bounds[0]), size=2, replace=False))
                _shift_rows(stage / "samples.query.1.csv", rows, "timezone", ";")
                write_csv(dev_table, stage / "devices.query.1.csv")
            else:
                samples, details, network = _split_tables(_fraction(table))
                delim = ";" if layout == "csv-tables" else ","
                kw: dict[str, Any] = {"delim": delim}
                if layout == "csv-2019":
                    kw["header_every"] = 5000
                if layout == "csv-2018":
                    kw.update(quote_all=True, null="\\N")
                    ts = _as_text(samples.column("timestamp"))
                    zero = pa.array(r.random(samples.num_rows) < 0.001)
                    ts = pc.if_else(zero, "0000-00-00 00:00:00", ts)
                    samples = samples.set_column(samples.column_names.index("timestamp"), "timestamp", ts)
                write_csv(samples, stage / "samples.csv", **kw)
                write_csv(details, stage / "battery_details.csv", **kw)
                write_csv(network, stage / "network_details.csv", **kw)
                write_csv(dev_table, stage / "devices.csv", **kw)
        written.append(target)
    return written
