"""Figures of a prepared trace set: what prep-traces kept and why, battery levels, the 24 shifts.

Inputs are a trace directory's ``report.json`` (a dict) and its
:class:`~flamingo_sim.traces.store.ClientTraces`; outputs are tables and pyplot-free Figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from flamingo_sim.errors import FlamingoError
from flamingo_sim.report.plots import COLUMN_IN, _figure
from flamingo_sim.traces.store import ClientTraces

__all__ = ["load_trace_report", "selection_counts", "row_drops", "selection_figure", "battery_days_figure", "shifts_figure",
           "availability_by_hour", "availability_figure"]

S_PER_DAY = 86400.0


def load_trace_report(traces_dir: str | Path) -> dict[str, Any]:
    """The ``report.json`` that prep-traces wrote into ``traces_dir``."""
    path = Path(traces_dir) / "report.json"
    if not path.is_file():
        raise FlamingoError(f"{path}: not found; expected a prep-traces output directory")
    return json.loads(path.read_text())


def selection_counts(report: dict[str, Any]) -> pd.DataFrame:
    """Devices at each step of the selection, then clients: columns ``stage``, ``count``, ``rule``."""
    dev, par = report["devices"], report.get("parameters", {})
    rules = {
        "min_days": f"sampled >= {par.get('min_days', '?')} days",
        "min_samples_per_day": f">= {par.get('min_samples_per_day', '?')} samples/day on average",
        "max_gap": f"largest gap <= {par.get('max_gap_h', '?')} h",
        "max_long_gaps": f"<= {par.get('max_long_gaps', '?')} gaps > {par.get('long_gap_h', '?')} h",
    }
    records = [("devices seen", dev["seen"], "in the dump after cleaning")]
    records += [(f"pass {k}", v, rules.get(k, k)) for k, v in dev.get("passing", {}).items()]
    records += [
        ("pass all", dev["passing_all"], "every criterion"),
        ("selected", dev["selected"], f"rule '{par.get('rule', '?')}', at most {par.get('n_devices', '?')}"),
        ("clients", report.get("n_clients"), f"selected x {report.get('n_shifts', '?')} one-hour shifts"),
    ]
    return pd.DataFrame.from_records(records, columns=["stage", "count", "rule"])


def row_drops(report: dict[str, Any]) -> pd.DataFrame:
    """Rows read, and rows dropped while cleaning by reason: columns ``reason``, ``rows``."""
    drops = [("read", report["rows"]["read"])] + [(k.replace("_", " "), v) for k, v in report["drops"].items()]
    return pd.DataFrame.from_records(drops, columns=["reason", "rows"])


def selection_figure(report: dict[str, Any]) -> Figure:
    """Left: devices passing each selection criterion; right: rows dropped by cleaning, per reason (log)."""
    sel, drops = selection_counts(report), row_drops(report)
    drops = drops[drops["reason"] != "read"]
    with _figure(1, 2, (6.8, 2.6)) as (fig, axes):
        ax = axes[0, 0]
        devices = sel[sel["stage"] != "clients"]
        y = np.arange(len(devices))[::-1]
        ax.barh(y, devices["count"], color="#3A6EA5", gid="selection")
        ax.set_yticks(y, devices["stage"])
        for yi, v in zip(y, devices["count"]):
            ax.annotate(str(v), (v, yi), xytext=(2, 0), textcoords="offset points", va="center", fontsize=7)
        ax.set_xlabel("devices")
        ax.set_title("Devices kept by each selection criterion")
        ax.grid(axis="y", visible=False)
        ax = axes[0, 1]
        y = np.arange(len(drops))[::-1]
        ax.barh(y, np.maximum(drops["rows"], 0.8), color="#AA3377", gid="drops")  # 0 drawn as a stub on the log axis
        ax.set_yticks(y, drops["reason"])
        ax.set_xscale("log")
        ax.set_xlabel(f"rows dropped (of {report['rows']['read']:,} read)")
        ax.set_title("Rows dropped while cleaning")
        ax.grid(axis="y", visible=False)
    return fig


def _device_rows(traces: ClientTraces, device_ids: Sequence[int] | None, n: int) -> list[int]:
    if device_ids is None:
        return list(range(min(n, traces.n_devices)))
    rows = []
    for d in device_ids:
        hit = np.flatnonzero(traces.device_ids == d)
        if hit.size == 0:
            raise KeyError(f"device {d} is not in the trace set")
        rows.append(int(hit[0]))
    return rows


def battery_days_figure(traces: ClientTraces, device_ids: Sequence[int] | None = None, *, days: float = 4.0, n_devices: int = 3) -> Figure:
    """Battery level (%) of a few devices over their first ``days`` days; charging stretches shaded."""
    rows = _device_rows(traces, device_ids, n_devices)
    n_steps = int(days * S_PER_DAY / traces.step_s)
    t_day = np.arange(n_steps) * traces.step_s / S_PER_DAY
    colors = ("#3A6EA5", "#E8743B", "#228833", "#AA3377", "#CCBB44")
    with _figure(len(rows), 1, (COLUMN_IN[0], 0.95 * len(rows) + 0.7)) as (fig, axes):
        for k, row in enumerate(rows):
            ax = axes[k, 0]
            level = traces.level_pct[row, :n_steps]
            charging = traces.state[row, :n_steps] > 0
            ax.fill_between(t_day, 0, 100, where=charging, color="0.85", lw=0, step="mid")
            ax.plot(t_day, level, color=colors[k % len(colors)], lw=1.0, gid=f"device|{traces.device_ids[row]}")
            ax.set_ylim(0, 100)
            ax.set_xlim(0, days)
            ax.set_ylabel(f"dev {traces.device_ids[row]}\nlevel (%)")
            if k < len(rows) - 1:
                ax.tick_params(labelbottom=False)
        axes[-1, 0].set_xlabel("days from the first sample (grey: charging)")
        fig.suptitle("Battery level of a few devices", fontsize=8)
    return fig


def shifts_figure(traces: ClientTraces, device_id: int | None = None, *, hours: float = 72.0) -> Figure:
    """One device seen by its 24 clients: battery level (colour) of each shift against simulation time."""
    row = _device_rows(traces, None if device_id is None else [device_id], 1)[0]
    clients = np.flatnonzero(traces.client_device == row)
    clients = clients[np.argsort(traces.shift_s[clients])]
    t_s = np.arange(0.0, hours * 3600, traces.step_s)
    image = np.stack([traces.level_at(t)[clients] for t in t_s], axis=1)  # (clients, time)
    with _figure(size_in=(COLUMN_IN[0], 2.6)) as (fig, axes):
        ax = axes[0, 0]
        shifts_h = traces.shift_s[clients] / 3600
        mesh = ax.pcolormesh(t_s / 3600, shifts_h, image, cmap="viridis", vmin=0, vmax=100, shading="nearest", gid="shifts")
        ax.set_xlabel("simulation time (h)")
        ax.set_ylabel("client's shift (h)")
        ax.set_title(f"Device {traces.device_ids[row]} replayed by its {len(clients)} clients")
        ax.grid(False)
        fig.colorbar(mesh, ax=ax, label="battery level (%)")
    return fig


def availability_by_hour(traces: ClientTraces, *, min_pct: float = 10.0, hours: float = 48.0, shifts: Sequence[int] | None = None) -> pd.DataFrame:
    """Share of clients charging and share above ``min_pct`` at each grid time; optionally only some shifts (h).

    Index: simulation time (h); columns ``charging`` and ``above_min``.
    """
    keep = np.ones(traces.n_clients, bool) if shifts is None else np.isin(traces.shift_s // 3600, list(shifts))
    t_s = np.arange(0.0, hours * 3600, traces.step_s)
    charging = [float(np.mean(traces.state_at(t)[keep] > 0)) for t in t_s]
    above = [float(np.mean(traces.level_at(t)[keep] >= min_pct)) for t in t_s]
    return pd.DataFrame({"charging": charging, "above_min": above}, index=pd.Index(t_s / 3600, name="time_h"))


def availability_figure(traces: ClientTraces, *, min_pct: float = 10.0, hours: float = 48.0) -> Figure:
    """Share of clients charging over two days: the unshifted devices alone vs all 24 shifts (flatter)."""
    alone = availability_by_hour(traces, min_pct=min_pct, hours=hours, shifts=[0])
    every = availability_by_hour(traces, min_pct=min_pct, hours=hours)
    with _figure() as (fig, axes):
        ax = axes[0, 0]
        ax.plot(alone.index, 100 * alone["charging"], color="0.5", lw=1.0, label="shift 0 only (the devices)", gid="charging|shift0")
        ax.plot(every.index, 100 * every["charging"], color="#3A6EA5", label="all shifts (the clients)", gid="charging|all")
        ax.set_xlabel("simulation time (h)")
        ax.set_ylabel("clients charging (%)")
        ax.set_xlim(0, hours)
        ax.set_ylim(bottom=0)
        ax.set_title("Time-zone shifts spread charging over the day")
        fig.legend(loc="outside lower center", ncols=2)
    return fig
