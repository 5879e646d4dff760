"""Prepared trace sets on disk, and the in-memory view the simulator uses.

A prepared trace set is a directory with three files:

``devices.parquet``
    One row per (device, 10-minute grid point): ``device_id`` int64, ``timestamp``
    (UTC, on the grid; written as timestamp[s, UTC], which parquet stores as milliseconds), ``battery_level_pct`` float32, ``battery_state`` int8
    (+1 charging, 0 neither, -1 discharging) and optional float32 extras with units in their
    names (``screen_on_frac``, ``temperature_c``, ``voltage_v``, ``charging``, and the network
    states ``network_state`` (0 none, 1 WiFi, 2 cellular), ``mobile_generation``,
    ``wifi_enabled``, ``wifi_signal_dbm``, ``wifi_link_mbps``: :mod:`flamingo_sim.traces.network`;
    NaN where unknown; a set without them still loads, its network unknown); when the dump had
    a devices table, the phone's ``model``, ``manufacturer`` and ``brand`` (dictionary-encoded
    strings, null where the table lacks the device).
    Rows are sorted by (device_id, timestamp); each device's grid is contiguous.
``clients.parquet``
    One row per simulated client: ``client_id`` int64, ``device_id`` int64, ``shift_h`` int16.
    A client is a *view* of a device's series offset by ``shift_h`` hours, not a copy.
``report.json``
    What was read, dropped, selected and written (see :mod:`flamingo_sim.traces.pipeline`).

:func:`load_client_traces` turns the directory into a :class:`ClientTraces`, whose lookups
(level/state/extras of every client at simulation time ``t_s``) are one fancy-index each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from flamingo_sim.errors import InputDataError

__all__ = [
    "ClientTraces",
    "DeviceSeries",
    "load_client_traces",
    "write_trace_set",
    "EXTRA_COLUMNS",
    "MODEL_COLUMNS",
    "load_device_models",
    "STEP_S",
    "TRACE_SET",
]

#: The kind of output a trace set is (its directory's manifest, see :func:`flamingo_sim.io.atomic_dir`).
TRACE_SET = "trace-set"
#: The resampling grid step (seconds).
STEP_S = 600
#: Optional extra columns, in the order they are written (the last five: :data:`flamingo_sim.traces.network.NETWORK_EXTRAS`).
EXTRA_COLUMNS = ("screen_on_frac", "temperature_c", "voltage_v", "charging",
                 "network_state", "mobile_generation", "wifi_enabled", "wifi_signal_dbm", "wifi_link_mbps")
#: The phone columns copied from the dump's devices table, when it has one.
MODEL_COLUMNS = ("model", "manufacturer", "brand")


@dataclass(frozen=True)
class DeviceSeries:
    """Resampled series of one device: grid start (UTC seconds), levels, states, extras."""

    device_id: int
    start_s: int
    level_pct: np.ndarray  # float32 (n,)
    state: np.ndarray  # int8 (n,)
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)  # float32 (n,) each

    def __len__(self) -> int:
        return int(self.level_pct.shape[0])


@dataclass(frozen=True)
class ClientTraces:
    """Per-device resampled series plus the clients that view them (device row, shift).

    Replay is cyclic: a client whose shifted time runs past its device's last grid point wraps
    to the device's first point (``index_at``). ``horizon_s`` is the longest simulation time
    for which no client wraps.
    """

    step_s: int
    device_ids: np.ndarray  # int64 (n_devices,)
    level_pct: np.ndarray  # float32 (n_devices, n_steps), cyclically padded
    state: np.ndarray  # int8 (n_devices, n_steps), cyclically padded
    extras: dict[str, np.ndarray]  # float32 (n_devices, n_steps) each
    client_ids: np.ndarray  # int64 (n_clients,)
    client_device: np.ndarray  # int64 (n_clients,) row into the device arrays
    shift_s: np.ndarray  # int64 (n_clients,)
    # None (the default) is replaced in __post_init__: every device full length, starting at 0
    device_length: np.ndarray = field(default=None)  # type: ignore[arg-type]  # int64 (n_devices,) real steps
    device_start_s: np.ndarray = field(default=None)  # type: ignore[arg-type]  # int64 (n_devices,) UTC s of index 0

    def __post_init__(self) -> None:
        n_dev, n_steps = self.level_pct.shape
        if self.device_length is None:
            object.__setattr__(self, "device_length", np.full(n_dev, n_steps, dtype=np.int64))
        if self.device_start_s is None:
            object.__setattr__(self, "device_start_s", np.zeros(n_dev, dtype=np.int64))
        if self.state.shape != (n_dev, n_steps):
            raise ValueError("state must have the shape of level_pct")
        for name, arr in self.extras.items():
            if arr.shape != (n_dev, n_steps):
                raise ValueError(f"extra {name!r} must have the shape of level_pct")
        if not (self.client_ids.shape == self.client_device.shape == self.shift_s.shape):
            raise ValueError("client arrays must have one entry per client")
        if self.device_length.shape != (n_dev,) or np.any(self.device_length < 1) or np.any(self.device_length > n_steps):
            raise ValueError("device_length must be in 1..n_steps for every device")

    @property
    def n_clients(self) -> int:
        return int(self.client_ids.shape[0])

    @property
    def n_devices(self) -> int:
        return int(self.device_ids.shape[0])

    @property
    def n_steps(self) -> int:
        return int(self.level_pct.shape[1])

    @property
    def horizon_s(self) -> float:
        """Usable non-wrapping horizon: shortest device span minus the largest shift (seconds)."""
        used = np.unique(self.client_device)
        if used.size == 0:
            return 0.0
        span = float(self.device_length[used].min()) * self.step_s
        return span - float(self.shift_s.max())

    @cached_property
    def _client_length(self) -> np.ndarray:
        """int64 (n_clients,): each client's device length (``device_length[client_device]``, kept: the round's clock reads it
        at every trace tick)."""
        return self.device_length[self.client_device]

    @cached_property
    def _client_row(self) -> np.ndarray:
        """int64 (n_clients,): where each client's device row starts in a flattened (n_devices x n_steps) grid."""
        return self.client_device * np.int64(self.n_steps)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the lookup arrays kept above (rebuilt on first use)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_client_length", "_client_row")}

    def index_at(self, t_s: float) -> np.ndarray:
        """Grid index of each client at simulation time ``t_s``: ``((t_s + shift_s) // step_s) % device_length``."""
        steps = (np.int64(np.floor(t_s)) + self.shift_s) // self.step_s
        steps %= self._client_length
        return steps

    def _every_client(self, grid: np.ndarray, t_s: float) -> np.ndarray:
        """``grid[client_device, index_at(t_s)]``: one flat gather (a whole-population read, at every trace tick of a round)."""
        flat = self.index_at(t_s)
        flat += self._client_row
        return grid.reshape(-1).take(flat)

    def level_at(self, t_s: float) -> np.ndarray:
        """Battery level (percent, float32) of every client at ``t_s``."""
        return self._every_client(self.level_pct, t_s)

    def state_at(self, t_s: float) -> np.ndarray:
        """Battery state (+1/0/-1, int8) of every client at ``t_s``."""
        return self._every_client(self.state, t_s)

    def extra_at(self, name: str, t_s: float) -> np.ndarray | None:
        """Extra ``name`` of every client at ``t_s``, or ``None`` if the trace set lacks it."""
        arr = self.extras.get(name)
        if arr is None:
            return None
        return self._every_client(arr, t_s)

    def levels_at(self, clients: np.ndarray, times_s: np.ndarray) -> np.ndarray:
        """Battery level (percent, float64) of the clients at positions ``clients``, each at its
        own simulation time ``times_s`` (same length; one fancy index)."""
        return self._of(self.level_pct, clients, times_s).astype(np.float64)

    def levels_on_ticks(self, clients: np.ndarray, first_tick: int, n_ticks: int) -> np.ndarray:
        """Battery level (percent, float64) of the clients at positions ``clients`` at the grid ticks ``first_tick``,
        ..., ``first_tick + n_ticks - 1`` (time ``tick * step_s``): ``(n_ticks, len(clients))``, row ``k`` what
        :meth:`levels_at` gives at tick ``first_tick + k``.

        Why: a round's clock passes tens of ticks, and each client's ticks are consecutive samples of its device's
        row; read as one run per client (a view of the grid's windows), not as one index computed per (tick, client).
        A client whose run wraps past its device's last sample is read sample by sample."""
        clients = np.asarray(clients, dtype=np.int64)
        out = np.empty((len(clients), max(n_ticks, 0)), dtype=np.float32)
        if n_ticks < 1 or not len(clients):
            return out.T.astype(np.float64)
        dev = self.client_device[clients]
        length = self.device_length[dev]
        start = (np.int64(first_tick) * self.step_s + self.shift_s[clients]) // self.step_s % length  # index_at of the first tick
        run = start + n_ticks <= length
        if n_ticks <= self.n_steps and run.any():
            windows = np.lib.stride_tricks.sliding_window_view(self.level_pct, n_ticks, axis=1)
            out[run] = windows[dev[run], start[run]]
        wrap = ~run if n_ticks <= self.n_steps else np.ones(len(clients), dtype=bool)
        if wrap.any():
            steps = (start[wrap, None] + np.arange(n_ticks, dtype=np.int64)) % length[wrap, None]
            out[wrap] = self.level_pct[dev[wrap, None], steps]
        return np.ascontiguousarray(out.T, dtype=np.float64)

    def extra_of(self, name: str, clients: np.ndarray, times_s: float | np.ndarray) -> np.ndarray | None:
        """Extra ``name`` of the clients at positions ``clients`` (any shape), each at its own time
        ``times_s`` (broadcast against ``clients``): :meth:`extra_at` for a few clients at once.
        ``None`` if the trace set lacks it."""
        arr = self.extras.get(name)
        return None if arr is None else self._of(arr, clients, times_s)

    def _of(self, grid: np.ndarray, clients: np.ndarray, times_s: float | np.ndarray) -> np.ndarray:
        clients = np.asarray(clients, dtype=np.int64)
        dev = self.client_device[clients]
        steps = (np.floor(times_s).astype(np.int64) + self.shift_s[clients]) // self.step_s
        return grid[dev, steps % self.device_length[dev]]


def _require(path: Path, table: Any, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise InputDataError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(columns)}")


def _validate(path: Path, device: np.ndarray, ts: np.ndarray, level: np.ndarray, state: Any) -> None:
    """A trace set written by any tool: finite levels in [0, 100], states -1/0/1, rows sorted by
    (device, time), at least two samples per device; the first violation names the device and row."""
    bad = ~(np.isfinite(level) & (level >= 0) & (level <= 100))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputDataError(f"{path}: device {device[i]}, row {i + 1}: battery_level_pct {level[i]} is not a level within [0, 100]")
    state = np.asarray(state, dtype=np.float64)
    bad = ~np.isin(state, (-1, 0, 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputDataError(f"{path}: device {device[i]}, row {i + 1}: battery_state {state[i]} is not -1, 0 or +1")
    unsorted = (device[1:] < device[:-1]) | ((device[1:] == device[:-1]) & (ts[1:] <= ts[:-1]))
    if unsorted.any():
        i = int(np.flatnonzero(unsorted)[0]) + 1
        raise InputDataError(f"{path}: device {device[i]}, row {i + 1}: rows are not sorted by (device_id, timestamp) with distinct timestamps")
    ids, counts = np.unique(device, return_counts=True)
    if (counts < 2).any():
        d = ids[counts < 2][0]
        raise InputDataError(f"{path}: device {d} has a single sample; a client needs at least two (a replay horizon of 0 or less)")


def load_client_traces(path: str | Path) -> ClientTraces:
    """Load a ``prep-traces`` output directory as a :class:`ClientTraces`.

    Devices keep the order of ``devices.parquet`` (sorted by device id); clients keep the order
    of ``clients.parquet``. The set is validated first (:func:`_validate`): a bad file is one
    :class:`InputDataError` naming the file, the device and the row. Devices shorter than the longest are padded by repeating their own
    series cyclically, so ``arr[row, i % device_length[row]] == arr[row, i]``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    dev_path, cli_path = path / "devices.parquet", path / "clients.parquet"
    if path.is_file():
        raise InputDataError(f"{path}: a file, not a trace set; expected a prep-traces output directory "
                             "(devices.parquet, clients.parquet): run flamingo-sim prep-traces on a GreenHub dump first")
    for p in (dev_path, cli_path):
        if not p.is_file():
            raise InputDataError(f"{p}: not found; expected a prep-traces output directory")
    try:
        dev = pq.read_table(dev_path)
        cli = pq.read_table(cli_path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputDataError(f"{path}: cannot read trace set ({exc})") from None
    _require(dev_path, dev, ("device_id", "timestamp", "battery_level_pct", "battery_state"))
    _require(cli_path, cli, ("client_id", "device_id", "shift_h"))

    dev_ids_rows = dev.column("device_id").to_numpy().astype(np.int64)
    ts = dev.column("timestamp").cast(pa.timestamp("s", tz="UTC")).cast(pa.int64()).to_numpy()
    if dev_ids_rows.size == 0:
        raise InputDataError(f"{dev_path}: no rows")
    _validate(dev_path, dev_ids_rows, ts, dev.column("battery_level_pct").to_numpy(zero_copy_only=False).astype(np.float64),
              dev.column("battery_state").to_numpy(zero_copy_only=False))
    order = np.lexsort((ts, dev_ids_rows))
    dev_ids_rows, ts = dev_ids_rows[order], ts[order]
    starts = np.flatnonzero(np.r_[True, dev_ids_rows[1:] != dev_ids_rows[:-1]])
    lengths = np.diff(np.r_[starts, dev_ids_rows.size]).astype(np.int64)
    device_ids = dev_ids_rows[starts]
    n_dev, n_steps = device_ids.size, int(lengths.max())

    # Cyclic padding: column j of row r is that device's sample j % length[r].
    col = np.arange(n_steps, dtype=np.int64)
    src = starts[:, None] + col[None, :] % lengths[:, None]

    def grid(name: str, dtype: Any) -> np.ndarray:
        values = dev.column(name).to_numpy(zero_copy_only=False)[order]
        return np.ascontiguousarray(values.astype(dtype)[src])

    if "network_state" in dev.column_names:  # 0 none, 1 WiFi, 2 cellular, NaN unknown
        net = dev.column("network_state").to_numpy(zero_copy_only=False).astype(np.float64)[order]
        bad = ~(np.isnan(net) | np.isin(net, (0.0, 1.0, 2.0)))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputDataError(f"{dev_path}: device {dev_ids_rows[i]}, row {i + 1}: network_state {net[i]} is not 0 (none), 1 (WiFi), "
                                 "2 (cellular) or NaN (unknown)")
    level = grid("battery_level_pct", np.float32)
    state = grid("battery_state", np.int8)
    extras = {name: grid(name, np.float32) for name in EXTRA_COLUMNS if name in dev.column_names}

    client_ids = cli.column("client_id").to_numpy().astype(np.int64)
    client_dev_ids = cli.column("device_id").to_numpy().astype(np.int64)
    shift_h = cli.column("shift_h").to_numpy().astype(np.int64)
    row = np.searchsorted(device_ids, client_dev_ids)
    row = np.minimum(row, n_dev - 1)
    bad = device_ids[row] != client_dev_ids
    if bad.any():
        raise InputDataError(f"{cli_path}: client {client_ids[bad][0]} names device {client_dev_ids[bad][0]}, which is not in devices.parquet")
    same_dev = dev_ids_rows[1:] == dev_ids_rows[:-1]
    off_grid = same_dev & (np.diff(ts) != STEP_S)
    if off_grid.any():
        i = int(np.flatnonzero(off_grid)[0])
        raise InputDataError(f"{dev_path}: device {dev_ids_rows[i]} is not on a contiguous {STEP_S}-second grid at row {i + 1}")
    return ClientTraces(
        step_s=STEP_S,
        device_ids=device_ids,
        level_pct=level,
        state=state,
        extras=extras,
        client_ids=client_ids,
        client_device=row.astype(np.int64),
        shift_s=shift_h * 3600,
        device_length=lengths,
        device_start_s=ts[starts].astype(np.int64),
    )


def devices_table(series: list[DeviceSeries], step_s: int = STEP_S, models: Mapping[int, Mapping[str, Any]] | None = None) -> Any:
    """The long ``devices.parquet`` table of ``series`` (a pyarrow Table), with ``models``' columns if given."""
    import pyarrow as pa

    extras = [n for n in EXTRA_COLUMNS if any(n in s.extras for s in series)]
    n = [len(s) for s in series]
    cols: dict[str, Any] = {
        "device_id": pa.array(np.repeat(np.array([s.device_id for s in series], dtype=np.int64), n)),
        "timestamp": pa.array(
            np.concatenate([s.start_s + step_s * np.arange(len(s), dtype=np.int64) for s in series]) if series else np.zeros(0, np.int64),
            type=pa.int64(),
        ).cast(pa.timestamp("s", tz="UTC")),
        "battery_level_pct": pa.array(np.concatenate([s.level_pct for s in series]).astype(np.float32)),
        "battery_state": pa.array(np.concatenate([s.state for s in series]).astype(np.int8)),
    }
    for name in extras:
        cols[name] = pa.array(
            np.concatenate([np.asarray(s.extras.get(name, np.full(len(s), np.nan)), dtype=np.float32) for s in series])
        )
    if models is not None:
        for name in MODEL_COLUMNS:
            per_device = pa.array([models.get(s.device_id, {}).get(name) for s in series], type=pa.string())
            cols[name] = per_device.take(pa.array(np.repeat(np.arange(len(series)), n))).dictionary_encode()
    return pa.table(cols)


def load_device_models(path: str | Path) -> dict[int, str | None]:
    """``{device_id: model}`` of a trace set (``None`` where unknown); empty if it has no model column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dev_path = Path(path) / "devices.parquet"
    if "model" not in pq.read_schema(dev_path).names:
        return {}
    table = pq.read_table(dev_path, columns=["device_id", "model"])
    ids = table.column("device_id").to_numpy()
    first = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    models = table.column("model").take(pa.array(first.astype(np.int64))).to_pylist()
    return {int(ids[i]): m for i, m in zip(first, models)}


def clients_table(device_ids: np.ndarray, n_shifts: int) -> Any:
    """``clients.parquet``: client ``i * n_shifts + k`` views device ``i`` shifted by ``k`` hours."""
    import pyarrow as pa

    device_ids = np.asarray(device_ids, dtype=np.int64)
    n = device_ids.size * n_shifts
    return pa.table(
        {
            "client_id": pa.array(np.arange(n, dtype=np.int64)),
            "device_id": pa.array(np.repeat(device_ids, n_shifts)),
            "shift_h": pa.array(np.tile(np.arange(n_shifts, dtype=np.int16), device_ids.size)),
        }
    )


def write_trace_set(
    out_dir: str | Path, series: list[DeviceSeries], n_shifts: int, report: dict[str, Any],
    models: Mapping[int, Mapping[str, Any]] | None = None,
) -> Path:
    """Write ``devices.parquet``, ``clients.parquet`` and ``report.json`` into ``out_dir`` atomically.

    ``models`` (device id -> model/manufacturer/brand) adds those columns to ``devices.parquet``.
    """
    import json

    import pyarrow.parquet as pq

    from flamingo_sim.io import _json_default, atomic_dir

    series = sorted(series, key=lambda s: s.device_id)
    out_dir = Path(out_dir)
    with atomic_dir(out_dir, TRACE_SET) as stage:
        pq.write_table(
            devices_table(series, models=models),
            stage / "devices.parquet",
            compression="zstd",
            compression_level=9,
            use_byte_stream_split=["battery_level_pct", "screen_on_frac"],
        )
        pq.write_table(clients_table(np.array([s.device_id for s in series]), n_shifts), stage / "clients.parquet", compression="zstd")
        (stage / "report.json").write_text(json.dumps(report, indent=2, default=_json_default) + "\n")
    return out_dir
