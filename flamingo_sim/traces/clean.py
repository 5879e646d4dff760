"""Cleaning raw sample chunks into typed numpy columns, counting every dropped row by reason.

A row is dropped for the *first* failing check, in this order (the reasons in ``report.json``):

``null_device_id``, ``malformed_device_id`` (not an integer in 0..2^31-1),
``null_timestamp``, ``unparseable_timestamp`` (incl. ``0000-00-00 00:00:00``),
``timestamp_before_min`` (before ``--min-date``, default 2017-10-15, e.g. 1970 clocks),
``timestamp_in_future`` (after ``--max-date``, default: now),
(timestamps are first converted from the server clock to UTC, see :mod:`flamingo_sim.traces.clock`),
``null_battery_level``, ``malformed_level`` (unparseable, negative, above the scale's maximum).

Duplicates on (device_id, timestamp) are dropped later, after the global sort
(``duplicate``, see :mod:`flamingo_sim.traces.select`).

The level scale (0-100 percent or a 0-1 fraction) is detected once per input, on the first
chunk with levels: a median above 1 means percent. Levels are returned in percent.
Extras are cleaned leniently (an invalid extra becomes NaN; the row is kept):
``screen_on`` 0/1; ``temperature_c`` in -20..80 degC; ``voltage_v`` with values above 1000
read as millivolts and kept in 2.5..5.0 V; ``charging`` 1 for ac/usb/wireless, 0 for unplugged;
the network columns as states (:func:`flamingo_sim.traces.network.clean_network`; values no rule
reads are counted in ``Cleaner.network_unread``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flamingo_sim.errors import InputDataError
from flamingo_sim.traces.clock import lisbon_wall_to_utc
from flamingo_sim.traces.network import clean_network

__all__ = ["Cleaner", "DROP_REASONS", "MIN_DATE", "clean_extras", "parse_numeric"]

DROP_REASONS = (
    "null_device_id",
    "malformed_device_id",
    "null_timestamp",
    "unparseable_timestamp",
    "timestamp_before_min",
    "timestamp_in_future",
    "null_battery_level",
    "malformed_level",
    "duplicate",
)
MIN_DATE = "2017-10-15"
_MAX_DEVICE_ID = 2**31 - 1
_TS_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S")


def parse_numeric(col: pa.ChunkedArray, name: str, f: Path) -> tuple[np.ndarray, np.ndarray]:
    """(values as float64 with NaN for null/unparseable, raw-null mask)."""
    null = col.is_null().to_numpy(zero_copy_only=False)
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        vals = pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
        return np.where(null, np.nan, vals), null
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        s = pc.utf8_trim_whitespace(col)
        try:
            vals = pc.cast(s, pa.float64()).to_numpy(zero_copy_only=False)
        except pa.ArrowInvalid:
            import pandas as pd

            vals = pd.to_numeric(pd.Series(s.to_numpy(zero_copy_only=False), dtype=object), errors="coerce").to_numpy(np.float64)
        return np.where(null, np.nan, vals), null
    raise InputDataError(f"{f}: column {name} has type {t}; expected a number (or its text)")


def _timestamps(col: pa.ChunkedArray, f: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(epoch seconds int64, raw-null mask, unparseable mask)."""
    null = col.is_null().to_numpy(zero_copy_only=False)
    t = col.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        if pa.types.is_date(t):
            col = pc.cast(col, pa.timestamp("s"))
        secs = pc.cast(pc.cast(col, pa.timestamp("s", tz=t.tz if pa.types.is_timestamp(t) else None), safe=False), pa.int64())
        vals = secs.to_numpy(zero_copy_only=False)
        vals = np.where(null, 0, vals).astype(np.int64)
        return vals, null, np.zeros_like(null)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        s = pc.utf8_trim_whitespace(col)
        s = pc.utf8_slice_codeunits(s, 0, 19)  # drop fractional seconds / zone suffixes
        parsed = None
        for fmt in _TS_FORMATS:
            p = pc.strptime(s, format=fmt, unit="s", error_is_null=True)
            parsed = p if parsed is None else pc.coalesce(parsed, p)
        assert parsed is not None
        bad = parsed.is_null().to_numpy(zero_copy_only=False) & ~null
        vals = pc.fill_null(pc.cast(parsed, pa.int64()), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        return vals, null, bad
    raise InputDataError(f"{f}: column timestamp has type {t}; expected a timestamp (or 'YYYY-MM-DD HH:MM:SS' text)")


def _lower(col: pa.ChunkedArray) -> np.ndarray:
    return pc.utf8_lower(pc.utf8_trim_whitespace(pc.cast(col, pa.string()))).to_numpy(zero_copy_only=False)


@dataclass
class Cleaner:
    """Stateful cleaner: fixed date window, level scale detected on first use, drop counters."""

    min_s: int
    max_s: int
    level_scale: str = "auto"  # "auto" | "pct" | "fraction"
    server_clock: str = "lisbon"  # "lisbon": Lisbon wall time from late 2018 on (see clock.py) | "utc"
    drops: Counter = field(default_factory=Counter)
    rows_in: int = 0
    #: reason -> (file, column, raw value) of the first row dropped for it
    examples: dict[str, tuple[str, str, object]] = field(default_factory=dict)
    #: network values no rule reads (``column=value`` -> rows), among the rows cleaned with extras
    network_unread: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        if self.level_scale not in ("auto", "pct", "fraction"):
            raise InputDataError(f"level_scale {self.level_scale!r}: expected auto, pct or fraction")
        if self.server_clock not in ("lisbon", "utc"):
            raise InputDataError(f"server_clock {self.server_clock!r}: expected lisbon or utc")

    @property
    def level_max(self) -> float:
        return 100.0 if self.level_scale == "pct" else 1.0

    def _drop(self, keep: np.ndarray, bad: np.ndarray, reason: str, count: bool, raw: tuple[pa.Table, str, Path]) -> None:
        hit = keep & bad
        if count:
            n = int(hit.sum())
            self.drops[reason] += n
            if n and reason not in self.examples:
                table, column, f = raw
                self.examples[reason] = (str(f), column, table.column(column)[int(hit.argmax())].as_py())
        keep &= ~bad

    def clean(self, table: pa.Table, f: Path, *, count: bool = True, extras: bool = False) -> dict[str, np.ndarray]:
        """Typed, valid rows of ``table``: ``device_id``, ``ts_s``, ``level_pct`` and extras if asked.

        ``count=False`` re-cleans without touching the counters (the second pass).
        """
        n = table.num_rows
        if count:
            self.rows_in += n
        keep = np.ones(n, dtype=bool)
        dev_f, dev_null = parse_numeric(table.column("device_id"), "device_id", f)
        self._drop(keep, dev_null, "null_device_id", count, (table, "device_id", f))
        bad_dev = np.isnan(dev_f) | (dev_f < 0) | (dev_f > _MAX_DEVICE_ID) | (np.floor(np.nan_to_num(dev_f)) != dev_f)
        self._drop(keep, bad_dev, "malformed_device_id", count, (table, "device_id", f))

        ts, ts_null, ts_bad = _timestamps(table.column("timestamp"), f)
        if self.server_clock == "lisbon":
            ts = lisbon_wall_to_utc(ts)
        self._drop(keep, ts_null, "null_timestamp", count, (table, "timestamp", f))
        self._drop(keep, ts_bad, "unparseable_timestamp", count, (table, "timestamp", f))
        self._drop(keep, ts < self.min_s, "timestamp_before_min", count, (table, "timestamp", f))
        self._drop(keep, ts > self.max_s, "timestamp_in_future", count, (table, "timestamp", f))

        lvl, lvl_null = parse_numeric(table.column("battery_level"), "battery_level", f)
        self._drop(keep, lvl_null, "null_battery_level", count, (table, "battery_level", f))
        if self.level_scale == "auto":
            ok = lvl[keep & ~np.isnan(lvl)]
            if ok.size:
                self.level_scale = "pct" if float(np.median(ok)) > 1.0 else "fraction"
        with np.errstate(invalid="ignore"):
            bad_lvl = np.isnan(lvl) | (lvl < 0) | (lvl > self.level_max)
        self._drop(keep, bad_lvl, "malformed_level", count, (table, "battery_level", f))

        out = {
            "device_id": dev_f[keep].astype(np.int64),
            "ts_s": ts[keep],
            "level_pct": lvl[keep] * (100.0 / self.level_max),
        }
        if "id" in table.column_names:  # per-table dumps: the key of battery_details.sample_id
            out["sample_id"] = parse_numeric(table.column("id"), "id", f)[0][keep]
        if extras:
            out.update(clean_extras(table, keep, f, self.network_unread))
        return out


def clean_extras(table: pa.Table, keep: np.ndarray, f: Path, network_unread: Counter | None = None) -> dict[str, np.ndarray]:
    """Extras of the kept rows, invalid values as NaN (see module docstring)."""
    out: dict[str, np.ndarray] = clean_network(table, keep, network_unread)
    names = table.column_names
    if "screen_on" in names:
        v, _ = parse_numeric(table.column("screen_on"), "screen_on", f)
        out["screen_on"] = np.where((v == 0) | (v == 1), v, np.nan)[keep]
    if "temperature" in names:
        v, _ = parse_numeric(table.column("temperature"), "temperature", f)
        with np.errstate(invalid="ignore"):
            out["temperature_c"] = np.where((v >= -20) & (v <= 80), v, np.nan)[keep]
    if "voltage" in names:
        v, _ = parse_numeric(table.column("voltage"), "voltage", f)
        with np.errstate(invalid="ignore"):
            v = np.where(v > 1000, v / 1000.0, v)
            out["voltage_v"] = np.where((v >= 2.5) & (v <= 5.0), v, np.nan)[keep]
    if "charger" in names:
        s = _lower(table.column("charger"))
        plugged = np.isin(s, ["ac", "usb", "wireless"])
        out["charging"] = np.where(plugged, 1.0, np.where(s == "unplugged", 0.0, np.nan))[keep]
    return out
