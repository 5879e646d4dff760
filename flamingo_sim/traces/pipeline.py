"""``prep-traces``: GreenHub dump -> selected, resampled, shifted client traces.

Two passes keep memory bounded by the dump's (device, time) pairs, never its full width:

1. stream ``device_id, timestamp, battery_level`` chunk by chunk, clean (counting drops),
   pack each valid row into one int64 key, sort and deduplicate all keys, compute per-device
   statistics and select devices;
2. stream again, keep only the selected devices' rows (with the extras columns, the network
   columns among them; per-table dumps join ``battery_details.csv`` and ``network_details.csv``
   on ``sample_id``), clean, sort, deduplicate (keeping the first reading in input order),
   resample each device onto the 10-minute grid, make the time-zone shifts, and write the trace
   set atomically.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, TypeVar

import numpy as np

from flamingo_sim.errors import InputDataError
from flamingo_sim.faults import check_writable
from flamingo_sim.io import ProgressBar, check_out_dir, progress
from flamingo_sim.traces.clean import DROP_REASONS, MIN_DATE, Cleaner, clean_extras, parse_numeric
from flamingo_sim.traces.network import HOLD_H, NETWORK_DETAIL_INPUTS, NETWORK_EXTRAS, NETWORK_INPUTS, clean_network, state_shares
from flamingo_sim.traces.readers import OPTIONAL, REQUIRED, Source, quote_hint
from flamingo_sim.traces.resample import resample_device
from flamingo_sim.traces.select import Criteria, choose, device_stats, evaluate, pack_keys, sort_dedup
from flamingo_sim.traces.store import STEP_S, TRACE_SET, DeviceSeries, write_trace_set

T = TypeVar("T")

__all__ = ["PrepOptions", "prep_traces", "default_out_dir"]


@dataclass(frozen=True)
class PrepOptions:
    """Everything ``prep-traces`` can be told (defaults: the paper's)."""

    criteria: Criteria = field(default_factory=Criteria)
    n_devices: int = 100
    rule: str = "first"
    seed: int = 0
    n_shifts: int = 24
    min_date: str = MIN_DATE
    max_date: str | None = None  # None: today (UTC) at the time of the run
    level_scale: str = "auto"
    server_clock: str = "lisbon"
    max_shifted_frac: float = 0.01
    state_eps: float = 1e-4
    format: str | None = None
    #: how long a network reading holds on the grid (hours); unknown beyond (``--network-hold-h``)
    network_hold_h: float = HOLD_H

    def __post_init__(self) -> None:
        if self.n_devices < 1:
            raise InputDataError(f"n_devices: expected at least 1, got {self.n_devices}")
        if not self.network_hold_h > 0:
            raise InputDataError(f"network_hold_h: expected hours > 0, got {self.network_hold_h}")
        if not 1 <= self.n_shifts <= 24 * 7:
            raise InputDataError(f"n_shifts: expected 1..168 one-hour shifts, got {self.n_shifts}")


def _date_s(text: str, key: str) -> int:
    try:
        d = dt.datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        raise InputDataError(f"{key} {text}: expected a date YYYY-MM-DD") from None
    return int(d.timestamp())


def default_out_dir(input_path: str | Path) -> Path:
    """``traces/<input name>/`` (the file name without suffix, or the directory name)."""
    p = Path(input_path)
    name = p.stem if p.is_file() or p.suffix else p.name
    return Path("traces") / (name or "greenhub")


def prep_traces(
    input_path: str | Path, out_dir: str | Path | None = None, opts: PrepOptions | None = None, *, input_label: str | None = None
) -> dict[str, Any]:
    """Run the pipeline; write the trace set into ``out_dir`` (default :func:`default_out_dir`); return the report.

    ``input_label`` replaces the input path recorded in ``report.json`` (for reproducible outputs).
    """
    opts = opts or PrepOptions()
    src = Source.open(input_path, opts.format, opts.max_shifted_frac)
    out = Path(out_dir) if out_dir is not None else default_out_dir(input_path)
    o, i = out.resolve(), src.path.resolve()
    if o == i or o in i.parents:
        raise InputDataError(f"out_dir {out}: would replace the input {src.path}; choose another output directory")
    check_out_dir(out, TRACE_SET)  # a user's files are never replaced; decided before any work
    check_writable(out)
    min_s = _date_s(opts.min_date, "min_date")
    if opts.max_date is None:
        max_date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    else:
        max_date = opts.max_date
    max_s = _date_s(max_date, "max_date") + 86399
    if max_s <= min_s:
        raise InputDataError(f"max_date {max_date}: must be after min_date {opts.min_date}")
    cleaner = Cleaner(min_s=min_s, max_s=max_s, level_scale=opts.level_scale, server_clock=opts.server_clock)

    bars = _Passes()
    try:
        return _select_and_write(src, out, opts, cleaner, min_s, max_date, input_label, bars)
    except BaseException:
        bars.drop()
        raise


def _select_and_write(src: Source, out: Path, opts: PrepOptions, cleaner: Cleaner, min_s: int, max_date: str, input_label: str | None,
                      bars: _Passes) -> dict[str, Any]:
    # Pass 1: keys of all valid rows.
    parts: list[np.ndarray] = []
    for f, table in bars.counted(src.scan(REQUIRED), "pass 1/2 (select)"):
        c = cleaner.clean(table, f)
        parts.append(pack_keys(c["device_id"], c["ts_s"], min_s))
    # Reader counters of the samples in pass 1 (pass 2 re-reads the same rows).
    shifted_rows, header_lines = src.stats.shifted_rows, src.stats.repeated_header_lines
    keys = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    del parts
    n_valid = int(keys.size)
    keys, n_dup = sort_dedup(keys)
    cleaner.drops["duplicate"] += n_dup
    stats = device_stats(keys, min_s, opts.criteria.long_gap_h * 3600)
    del keys
    masks = evaluate(stats, opts.criteria)
    drops = {r: int(cleaner.drops.get(r, 0)) for r in DROP_REASONS}
    drops["shifted_row"] = shifted_rows
    if n_valid == 0:
        raise InputDataError(_no_valid_rows(src, cleaner, drops, opts))
    selected = choose(stats, masks["all"], opts.n_devices, opts.rule, opts.seed)
    if selected.size == 0:
        per = ", ".join(f"{k} {int(m.sum())}" for k, m in masks.items() if k != "all")
        raise InputDataError(
            f"{src.path}: every device filtered out: 0 of {stats.device_id.size} devices pass all criteria "
            f"(passing each: {per}); relax the thresholds (see --help)"
        )

    # Pass 2: the selected devices' rows, with extras; then their phone models.
    series, extras_present = _resample_selected(src, cleaner, selected, opts, bars)
    # A device whose trace is a single grid point gives a replay horizon of 0, which run refuses:
    # what prep-traces writes, run must accept, so such devices are dropped here and counted.
    single = sorted(int(s.device_id) for s in series if len(s) < 2)
    if single:
        series = [s for s in series if len(s) >= 2]
        selected = selected[~np.isin(selected, single)]
        if not series:
            raise InputDataError(f"{src.path}: every selected device has a single sample after resampling ({len(single)} devices, "
                                 f"e.g. device {single[0]}); a client needs at least two - relax the criteria or add data")
    models = src.device_models(selected)
    warnings: list[str] = []
    if single:
        warnings.append(f"{len(single)} selected device(s) dropped: a single sample after resampling (a client needs at least two; "
                        f"device {', '.join(map(str, single[:5]))}{' ...' if len(single) > 5 else ''})")
    if selected.size < opts.n_devices:
        warnings.append(f"only {selected.size} devices pass all criteria; {opts.n_devices} requested")
    report: dict[str, Any] = {
        "input": {
            "path": input_label if input_label is not None else str(src.path),
            "format": src.format,
            "n_files": len(src.files),
            "files": [f.name for f in src.files][:500],
            "detail_files": [f.name for f in src.detail_files],
            "device_files": [f"{f.parent.name}/{f.name}" if f.parent.name == "devices" else f.name for f in src.device_files],
            "level_scale": cleaner.level_scale,
        },
        "parameters": {
            **opts.criteria.as_dict(),
            "n_devices": opts.n_devices,
            "rule": opts.rule,
            "seed": opts.seed,
            "n_shifts": opts.n_shifts,
            "min_date": opts.min_date,
            "max_date": max_date,
            "step_s": STEP_S,
            "state_eps": opts.state_eps,
            "server_clock": opts.server_clock,
            "max_shifted_frac": opts.max_shifted_frac,
            "network_hold_h": opts.network_hold_h,
        },
        "rows": {
            "read": cleaner.rows_in + shifted_rows,
            "valid": n_valid,
            "unique": n_valid - n_dup,
            "repeated_header_lines": header_lines,
        },
        "drops": drops,
        "devices": {
            "seen": int(stats.device_id.size),
            "passing": {k: int(m.sum()) for k, m in masks.items() if k != "all"},
            "passing_all": int(masks["all"].sum()),
            "dropped_single_sample": len(single),
            "selected": int(selected.size),
        },
        "selected_device_ids": [int(d) for d in selected],
        "device_models": {str(d): models[d] for d in sorted(models)},
        "n_clients": int(selected.size * opts.n_shifts),
        "n_shifts": opts.n_shifts,
        "extras": extras_present,
        "network": _network_report(series, src, cleaner),
        "grid_steps_per_device": {str(s.device_id): len(s) for s in series},
        "warnings": warnings,
    }
    if src.device_files and len(models) < selected.size:
        warnings.append(f"{selected.size - len(models)} selected devices have no row in the devices table")
    bars.close()  # the passes' closing lines, once the input is known good
    write_trace_set(out, series, opts.n_shifts, report, models if src.device_files else None)
    return {**report, "output": str(out)}


class _Passes:
    """The progress of the two passes over the dump, updated by hand, their closing lines ("pass 1/2 (select): 3
    chunks") said only once the input has passed every check: a dump refused after its passes (every device
    filtered out) prints that one line, not progress lines before it. A long pass still shows its periodic lines
    and, on a terminal, its bar, which :meth:`drop` clears on a refusal."""

    def __init__(self) -> None:
        self._bars: list[ProgressBar[Any]] = []

    def counted(self, items: Iterable[T], desc: str) -> Iterator[T]:
        bar: ProgressBar[Any] = progress(None, desc=desc, unit="chunk")
        self._bars.append(bar)
        for item in items:
            yield item
            bar.update(1)

    def close(self) -> None:
        for bar in self._bars:
            bar.close()
        self._bars = []

    def drop(self) -> None:
        for bar in self._bars:
            leaves: Any = bar
            if hasattr(leaves, "leave"):  # tqdm's bar on a terminal: closed without leaving its line
                leaves.leave = False
                bar.close()
        self._bars = []


_EXPECTED = {
    "null_device_id": "expected a device id, got NULL",
    "malformed_device_id": "expected an integer device id",
    "null_timestamp": "expected a timestamp, got NULL",
    "unparseable_timestamp": "expected a timestamp 'YYYY-MM-DD HH:MM:SS'",
    "timestamp_before_min": "expected timestamps on or after min_date {min_date}",
    "timestamp_in_future": "expected timestamps up to max_date {max_date}",
    "null_battery_level": "expected a battery level, got NULL",
    "malformed_level": "expected a battery level within the scale ({scale})",
}


def _no_valid_rows(src: Source, cleaner: Cleaner, drops: dict[str, int], opts: PrepOptions) -> str:
    """The one-line error for an input of which no row survives: what was seen, what was expected."""
    seen = {k: v for k, v in drops.items() if v}
    if len(seen) == 1 and next(iter(seen)) in cleaner.examples:
        reason, n = next(iter(seen.items()))
        f, column, value = cleaner.examples[reason]
        expected = _EXPECTED[reason].format(min_date=opts.min_date, max_date=opts.max_date or "today",
                                            scale="0-100" if cleaner.level_scale == "pct" else "0-1")
        return (f"{f}: every row dropped as {reason} ({n} of {cleaner.rows_in}); first {column} seen: "
                f"{value if isinstance(value, str) else str(value)!r}{quote_hint(value)}; {expected}")
    ranked = [(k, v) for k, v in sorted(drops.items(), key=lambda kv: -kv[1]) if v]
    worst = ", ".join(f"{k} {v}" for k, v in ranked)
    line = f"{src.path}: no valid rows ({cleaner.rows_in} read; dropped: {worst or 'none'})"
    if ranked and ranked[0][0] in cleaner.examples:  # the main reason, shown on a value the input holds
        reason = ranked[0][0]
        f, column, value = cleaner.examples[reason]
        expected = _EXPECTED[reason].format(min_date=opts.min_date, max_date=opts.max_date or "today",
                                            scale="0-100" if cleaner.level_scale == "pct" else "0-1")
        line += (f"; {reason}: column {column} of {f}, e.g. {value if isinstance(value, str) else str(value)!r}"
                 f"{quote_hint(value)}; {expected}")
    return line


def _network_report(series: list[DeviceSeries], src: Source, cleaner: Cleaner) -> dict[str, Any]:
    """Where the network states came from, and the share of grid points in each state."""
    states = [np.asarray(s.extras["network_state"]) for s in series if "network_state" in s.extras]
    return {
        "columns": [n for n in NETWORK_EXTRAS if any(n in s.extras for s in series)],
        "detail_files": [f.name for f in src.network_files],
        "slot_shares": state_shares(np.concatenate(states)) if states else None,
        "unread_values": dict(cleaner.network_unread.most_common(8)),
    }


def _resample_selected(src: Source, cleaner: Cleaner, selected: np.ndarray, opts: PrepOptions,
                       bars: _Passes) -> tuple[list[DeviceSeries], list[str]]:
    import pyarrow as pa

    want = list(REQUIRED) + list(OPTIONAL) + list(NETWORK_INPUTS) + (["id"] if src.detail_files or src.network_files else [])
    chunks: list[dict[str, np.ndarray]] = []
    for f, table in bars.counted(src.scan(want), "pass 2/2 (resample)"):
        dev, _ = parse_numeric(table.column("device_id"), "device_id", f)
        mask = np.isin(dev, selected)
        if not mask.any():
            continue
        sub = table.filter(pa.array(mask))
        chunks.append(cleaner.clean(sub, f, count=False, extras=True))
    cols = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]} if chunks else {}
    if src.detail_files and "sample_id" in cols:
        _join_details(src, cols)
    if src.network_files and "sample_id" in cols:
        _join_details(src, cols, network=True, unread=cleaner.network_unread)
    candidates = ("screen_on", "temperature_c", "voltage_v", "charging", *NETWORK_EXTRAS)
    extra_names = [k for k in candidates if k in cols and not np.isnan(cols[k]).all()]
    order = np.lexsort((cols["ts_s"], cols["device_id"]))  # stable: first reading wins on ties
    for k in list(cols):
        cols[k] = cols[k][order]
    dev, ts = cols["device_id"], cols["ts_s"]
    first = np.r_[True, (dev[1:] != dev[:-1]) | (ts[1:] != ts[:-1])]
    for k in list(cols):
        cols[k] = cols[k][first]
    dev = cols["device_id"]
    starts = np.flatnonzero(np.r_[True, dev[1:] != dev[:-1]])
    bounds = np.r_[starts, dev.size]
    series = []
    for i in range(starts.size):
        s = slice(bounds[i], bounds[i + 1])
        series.append(
            resample_device(
                int(dev[bounds[i]]),
                cols["ts_s"][s],
                cols["level_pct"][s],
                {k: cols[k][s] for k in extra_names},
                state_eps=opts.state_eps,
                network_hold_s=opts.network_hold_h * 3600.0,
            )
        )
    return series, [{"screen_on": "screen_on_frac"}.get(k, k) for k in extra_names]


def _join_details(src: Source, cols: dict[str, np.ndarray], network: bool = False, unread: Any = None) -> None:
    """Fill temperature/voltage/charger of the kept rows from battery_details (by sample_id), where
    the samples have none; or (``network``) the network states from network_details, whose
    ``network_type`` reads before the samples' ``network_status``."""
    import pyarrow as pa

    sid = cols["sample_id"]
    order = np.argsort(sid, kind="stable")
    sorted_sid = sid[order]
    n = sid.size
    names = NETWORK_EXTRAS if network else ("temperature_c", "voltage_v", "charging")
    joined = {k: np.full(n, np.nan) for k in names}
    rows: dict[Path, list[int]] = {}
    inputs = list(NETWORK_DETAIL_INPUTS) if network else ["temperature", "voltage", "charger"]
    for f, table in src.scan_details(inputs, src.network_files if network else None):
        d_sid, _ = parse_numeric(table.column("sample_id"), "sample_id", f)
        count = rows.setdefault(f, [0, 0])
        count[0] += table.num_rows
        bad = np.isnan(d_sid)
        if bad.any() and count[1] == 0:
            first = table.column("sample_id")[int(bad.argmax())].as_py()
            if bad.all() and count[0] == table.num_rows:
                raise InputDataError(f"{f}: every row unusable: sample_id {first!r}{quote_hint(first)}; expected an integer sample id")
        count[1] += int(bad.sum())
        mask = np.isin(d_sid, sorted_sid)
        if not mask.any():
            continue
        sub = table.filter(pa.array(mask))
        keep = np.ones(sub.num_rows, dtype=bool)
        ex = clean_network(sub, keep, unread) if network else clean_extras(sub, keep, f)
        pos = order[np.searchsorted(sorted_sid, d_sid[mask])]
        for k, v in ex.items():
            joined[k][pos] = v
    for k, v in joined.items():
        if k in cols:  # network: network_details' type reads before the samples' network_status
            cols[k] = np.where(np.isnan(v), cols[k], v) if network else np.where(np.isnan(cols[k]), v, cols[k])
        elif not np.isnan(v).all():
            cols[k] = v
