"""A realistic synthetic GreenHub samples table (no real dump can be downloaded here).

Each device is simulated minute by minute in segments (discharging / charging):

* a local time zone; waking hours; screen sessions (Poisson starts, log-normal lengths) only
  while awake; drain = idle rate + screen rate while the screen is on;
* a charging habit: ``overnight`` (plug at bedtime, unplug at waking; Android's maintenance
  charging dips 100 -> 99 -> 100 every hour or two while full) or ``topup`` (plug for 20-90
  minutes whenever the level falls below a personal threshold); charging slows above 80 %;
* event-driven sampling: one sample whenever the integer percentage changes or the charger is
  (un)plugged, at a random second within the minute; idle stretches give long gaps;
* the network (:func:`network_minutes`, its own random stream, so the battery columns do not
  depend on it): at home the phone is on WiFi if the owner has home WiFi (60 % of devices),
  else cellular; on weekdays the owner leaves an hour or so after waking and comes back at
  17:00-19:30, commuting 15-45 minutes each way on cellular, and is on the workplace's WiFi
  (35 % of the devices) or cellular in between; on weekends one outing of 1-4 hours a day, on
  cellular; cellular coverage drops out (no network) in 5-30-minute holes starting on 0.2 % of
  cellular minutes; a switched-off phone has no network. The cellular technology is LTE on 85 %
  of devices, HSPA+/HSPA/UMTS on the rest; each WiFi has its own link rate (72-866 Mbit/s) and
  signal (-75 to -40 dBm). The two shares are set so that a phone is on WiFi about half of its
  time (49 % of the minutes of 160 devices), as OpenSignal measured for US smartphone users in
  Q1 2017 (43-54 % by operator: "Whose customers are using Wifi the most in the US?",
  opensignal.com, 2017-04-18). GreenHub logs a sample on battery events, not network
  changes, so the network is seen only at the samples, as in the real data.

Device kinds (``kind_of(i)``) are built to pass or to fail one selection criterion each:
``good`` (>= 30 days, dense), ``short`` (< 28 days), ``sparse`` (only ~30 % of events logged,
< 100 a day), ``big_gap`` (switched off for 30-50 hours once), ``many_gaps`` (switched off
7-9 hours on 20+ nights).

:func:`samples_table` then adds the dump's quirks: ids in server-insert order (rows unsorted
by device and time), re-uploaded duplicates under new ids, 1970 clocks (the lowest ids, as in
Kaggle part-0000), far-future clocks, timestamps in Europe/Lisbon wall time, levels above the maximum, millivolt and 0.0 voltages,
garbage temperatures, nulls in the joined columns, inconsistent string case; and the other
38-column fields with plausible values. The layouts are written by
:mod:`flamingo_sim.traces.synth_write`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from flamingo_sim.errors import InputDataError
from flamingo_sim.rng import rng
from flamingo_sim.traces.clock import utc_to_lisbon_wall

__all__ = ["SynthOptions", "KINDS", "kind_of", "simulate_device", "samples_table", "write_synthetic_dump"]

KINDS = ("good",) * 8 + ("short", "sparse", "big_gap", "many_gaps")
START_S = 1551398400  # 2019-03-01 00:00:00 UTC


def kind_of(i: int) -> str:
    """The kind of device ``i`` (8 of every 12 are good)."""
    return KINDS[i % len(KINDS)]


@dataclass(frozen=True)
class SynthOptions:
    """What to generate: device count, seed, parquet parts, layouts."""

    n_devices: int = 160
    seed: int = 0
    n_parts: int = 4
    layouts: tuple[str, ...] = ("parquet", "csv-pages")
    first_device_id: int = 1000


@dataclass(frozen=True)
class DeviceSamples:
    """Clean event samples of one simulated device."""

    device_id: int
    kind: str
    ts_s: np.ndarray
    level: np.ndarray  # integer percent, float64
    screen_on: np.ndarray  # int8
    charging: np.ndarray  # bool
    charger: str  # ac / usb / wireless when plugged
    temperature_c: np.ndarray
    voltage_v: np.ndarray
    tz_h: int
    network: np.ndarray  # int8 at the samples: 0 none, 1 WiFi, 2 cellular
    wifi_link_mbps: np.ndarray  # at the samples, -1 off WiFi
    wifi_rssi_dbm: np.ndarray  # at the samples, -127 off WiFi
    mobile_type: str  # the app's mobile_network_type (lte, hspap, hspa, utms)
    wifi_enabled: bool


def _screen(r: np.random.Generator, n_min: int, tz_h: int, wake_h: float, sleep_h: float, heavy: float) -> np.ndarray:
    minute = np.arange(n_min)
    local_h = ((minute / 60.0 + tz_h) % 24.0)
    awake = (local_h >= wake_h) & (local_h < sleep_h)
    starts = (r.random(n_min) < heavy / 60.0) & awake
    screen = np.zeros(n_min + 200, dtype=np.int32)
    idx = np.flatnonzero(starts)
    lengths = np.clip(r.lognormal(np.log(4.0), 0.9, idx.size), 1, 120).astype(np.int64)
    np.add.at(screen, idx, 1)
    np.add.at(screen, idx + lengths, -1)
    return np.cumsum(screen)[:n_min] > 0


@dataclass(frozen=True)
class NetworkMinutes:
    """A device's network minute by minute (see the module docstring)."""

    state: np.ndarray  # int8 (n_min,): 0 none, 1 WiFi, 2 cellular
    link_mbps: np.ndarray  # float (n_min,), -1 off WiFi
    rssi_dbm: np.ndarray  # float (n_min,), -127 off WiFi
    mobile_type: str
    wifi_enabled: bool


def network_minutes(device_id: int, seed: int, n_min: int, tz_h: int, wake_h: float, off: np.ndarray) -> NetworkMinutes:
    """The network of device ``device_id`` for each of its ``n_min`` minutes (randomness from
    (seed, "synth.network", device_id): the battery's own stream is untouched)."""
    r = rng(seed, "synth.network", device_id)
    home_wifi, work_wifi = r.random() < 0.6, r.random() < 0.35
    leave_h, back_h, commute_h = wake_h + r.uniform(0.5, 1.5), r.uniform(17.0, 19.5), r.uniform(0.25, 0.75)
    hours = np.arange(n_min) / 60.0 + tz_h
    local_h, day = hours % 24.0, np.floor(hours / 24.0).astype(np.int64)
    weekday = day % 7 < 5
    n_days = int(day.max()) + 1 if n_min else 0
    out_start, out_len = r.uniform(10.0, 16.0, n_days), r.uniform(1.0, 4.0, n_days)
    at_work = weekday & (local_h >= leave_h + commute_h) & (local_h < back_h - commute_h)
    commuting = weekday & (local_h >= leave_h) & (local_h < back_h) & ~at_work
    outing = ~weekday & (local_h >= out_start[day]) & (local_h < out_start[day] + out_len[day])
    wifi = np.where(at_work, work_wifi, ~commuting & ~outing & home_wifi)
    state = np.where(wifi, 1, 2).astype(np.int8)
    holes = np.zeros(n_min + 40, dtype=np.int32)
    starts = np.flatnonzero((r.random(n_min) < 0.002) & (state == 2))
    np.add.at(holes, starts, 1)
    np.add.at(holes, starts + r.integers(5, 31, starts.size), -1)
    state[(np.cumsum(holes)[:n_min] > 0) & (state == 2)] = 0
    state[off] = 0
    links = np.array([72.0, 144.0, 150.0, 300.0, 433.0, 866.0])
    home_link, work_link = float(r.choice(links)), float(r.choice(links))
    home_rssi, work_rssi = r.uniform(-70.0, -40.0), r.uniform(-75.0, -45.0)
    on_wifi = state == 1
    link = np.where(on_wifi, np.where(at_work, work_link, home_link), -1.0)
    rssi = np.where(on_wifi, np.where(at_work, work_rssi, home_rssi), -127.0)
    mobile = "lte" if r.random() < 0.85 else str(r.choice(["hspap", "hspa", "utms"]))
    return NetworkMinutes(state, link, rssi, mobile, bool(home_wifi or work_wifi))


def simulate_device(device_id: int, kind: str, seed: int) -> DeviceSamples:
    """Simulate one device of ``kind``; deterministic in (seed, device_id)."""
    r = rng(seed, "synth.device", device_id)
    days = r.uniform(12, 25) if kind == "short" else r.uniform(30, 35)
    n_min = int(days * 1440)
    tz_h = int(r.integers(-8, 10))
    wake_h, sleep_h = r.uniform(6.0, 8.5), r.uniform(22.0, 23.9)
    habit = "topup" if kind == "many_gaps" else ("overnight" if r.random() < 0.6 else "topup")
    idle = r.uniform(0.8, 1.5) / 60.0  # percent per minute
    screen_rate = r.uniform(10.0, 18.0) / 60.0
    charge = r.uniform(0.5, 1.0)  # percent per minute (at most one 1 % step a minute)
    thr = r.uniform(15.0, 40.0)
    screen = _screen(r, n_min, tz_h, wake_h, sleep_h, heavy=r.uniform(2.5, 5.0))
    drain = (idle + screen * screen_rate) * r.uniform(0.7, 1.3, n_min)
    off = np.zeros(n_min, dtype=bool)
    if kind == "big_gap":
        a = int(r.uniform(0.3, 0.6) * n_min)
        off[a : a + int(r.uniform(30, 50) * 60)] = True
    elif kind == "many_gaps":
        for d in r.choice(int(days) - 1, size=22, replace=False):
            a = int((d * 24 + (sleep_h - tz_h) % 24) * 60)
            off[a : a + int(r.uniform(7, 9) * 60)] = True
    drain[off] = 0.0

    plug_windows: list[tuple[int, int]] = []
    if habit == "overnight":
        for d in range(int(days) + 1):
            a = int((d * 24 + (sleep_h - tz_h) % 24 + r.normal(0, 0.5)) * 60)
            b = a + int(((wake_h - sleep_h) % 24 + r.normal(0, 0.3)) * 60)
            plug_windows.append((max(a, 0), max(b, 1)))
    level = np.zeros(n_min)
    charging = np.zeros(n_min, dtype=bool)
    lvl, t, w = r.uniform(40, 90), 0, 0
    while t < n_min:
        while w < len(plug_windows) and plug_windows[w][1] <= t:
            w += 1
        seg_end = plug_windows[w][0] if w < len(plug_windows) else n_min
        seg_end = min(max(seg_end, t), n_min)
        cum = lvl - np.cumsum(drain[t:seg_end])
        low = thr if habit == "topup" else 5.0
        hit = np.flatnonzero(cum < low)
        e = t + (int(hit[0]) + 1 if hit.size else cum.size)
        level[t:e] = cum[: e - t]
        lvl = level[e - 1] if e > t else lvl
        t = e
        if t >= n_min:
            break
        if hit.size:  # top-up (or emergency) charge
            dur = int(r.uniform(20, 90)) if habit == "topup" else int(r.uniform(60, 120))
        else:  # overnight window
            dur = plug_windows[w][1] - t
            w += 1
        k = np.arange(1, min(dur, n_min - t) + 1)
        m80 = max(0.0, (80.0 - lvl) / charge)
        ch = np.where(k <= m80, lvl + charge * k, max(lvl, 80.0) + 0.35 * charge * (k - m80))
        level[t : t + k.size] = np.minimum(ch, 100.0)
        charging[t : t + k.size] = True
        lvl = level[t + k.size - 1]
        t += k.size
    # maintenance charging: while full on the charger, dip to 99 every 60-120 minutes
    full = charging & (level >= 100.0)
    period = int(r.integers(60, 121))
    level[full & (np.arange(n_min) % period == 0)] = 99.5
    level = np.clip(level, 0.0, 100.0)

    pct = np.floor(level)
    event = np.r_[True, (pct[1:] != pct[:-1]) | (charging[1:] != charging[:-1])] & ~off
    if kind == "sparse":
        event &= r.random(n_min) < 0.3
    m = np.flatnonzero(event)
    ts = START_S + int(r.integers(0, 20 * 86400)) + m * 60 + r.integers(0, 60, m.size)
    smooth = np.convolve(screen.astype(float), np.ones(30) / 30.0, mode="same")
    hot = np.convolve(charging.astype(float), np.ones(45) / 45.0, mode="same")
    temp = 24.0 + 2.5 * np.sin(2 * np.pi * ((np.arange(n_min) / 60.0 + tz_h) / 24.0 - 0.375)) + 9.0 * hot + 7.0 * smooth
    temp = np.round(temp[m] + r.normal(0, 0.4, m.size), 1)
    volt = np.round(3.45 + 0.0075 * pct[m] + 0.12 * charging[m] + r.normal(0, 0.01, m.size), 3)
    net = network_minutes(device_id, seed, n_min, tz_h, wake_h, off)
    return DeviceSamples(
        device_id=device_id,
        kind=kind,
        ts_s=ts.astype(np.int64),
        level=pct[m],
        screen_on=screen[m].astype(np.int8),
        charging=charging[m],
        charger=str(r.choice(["ac", "usb", "wireless"], p=[0.7, 0.25, 0.05])),
        temperature_c=temp,
        voltage_v=volt,
        tz_h=tz_h,
        network=net.state[m],
        wifi_link_mbps=net.link_mbps[m],
        wifi_rssi_dbm=np.round(net.rssi_dbm[m] + np.where(net.state[m] == 1, rng(seed, "synth.rssi", device_id).normal(0, 2.0, m.size), 0.0)),
        mobile_type=net.mobile_type,
        wifi_enabled=net.wifi_enabled,
    )


_ZONES = {h: z for h, z in zip(range(-8, 10), [
    "America/Los_Angeles", "America/Denver", "America/Chicago", "America/New_York", "America/Halifax",
    "America/Sao_Paulo", "Atlantic/South_Georgia", "Atlantic/Azores", "Europe/Lisbon", "Europe/Berlin",
    "Europe/Athens", "Europe/Moscow", "Asia/Dubai", "Asia/Karachi", "Asia/Dhaka", "Asia/Bangkok",
    "Asia/Shanghai", "Asia/Tokyo"])}


def _network_columns(devices: list[DeviceSamples], n_per: np.ndarray, idx: np.ndarray, joined_null: np.ndarray,
                     upper: np.ndarray) -> dict[str, np.ndarray]:
    """The samples' network columns as the app writes them (:mod:`flamingo_sim.traces.network`), in
    sample order ``idx`` (duplicates included); the joined columns null where ``joined_null``
    (network_status is a samples column), and the case flipped where ``upper`` (``wifi``, ``mobile``, ``LTE``)."""
    state = np.concatenate([d.network for d in devices])[idx]
    mobile = np.repeat(np.array([d.mobile_type for d in devices], dtype=object), n_per)[idx]
    link = np.concatenate([d.wifi_link_mbps for d in devices])[idx]
    rssi = np.concatenate([d.wifi_rssi_dbm for d in devices])[idx]
    enabled = np.repeat(np.array([d.wifi_enabled for d in devices]), n_per)[idx]
    kind = np.select([state == 1, state == 2], ["WIFI", "MOBILE"], "unknown").astype(object)
    status = np.select([state == 1, state == 2], ["WIFI", ""], "disconnected").astype(object)
    status[state == 2] = mobile[state == 2]
    kind[upper] = np.char.lower(kind[upper].astype(str)).astype(object)
    status[upper] = np.char.swapcase(status[upper].astype(str)).astype(object)
    mobile = mobile.copy()
    mobile[upper] = np.char.upper(mobile[upper].astype(str)).astype(object)
    cols = {
        "network_status": status,
        "network_type": kind,
        "mobile_network_type": mobile,
        "mobile_data_status": np.where(state == 2, "connected", "disconnected").astype(object),
        "mobile_data_activity": np.where(state == 2, "inout", "none").astype(object),
        "wifi_status": np.where(enabled, "enabled", "disabled").astype(object),
        "wifi_signal_strength": rssi.astype(np.float64),
        "wifi_link_speed": link.astype(np.float64),
    }
    for name in cols:
        if name != "network_status":
            cols[name] = cols[name].copy()
            cols[name][joined_null] = None if cols[name].dtype == object else np.nan
    return cols


def samples_table(devices: list[DeviceSamples], seed: int) -> pa.Table:
    """The 38-column Kaggle samples table of ``devices``, quirks included, sorted by ``id``."""
    r = rng(seed, "synth.quirks")
    n_per = np.array([d.ts_s.size for d in devices])
    dev = np.repeat(np.array([d.device_id for d in devices], dtype=np.int64), n_per)
    ts = np.concatenate([d.ts_s for d in devices]).astype(np.int64)
    level = np.concatenate([d.level for d in devices])
    charging = np.concatenate([d.charging for d in devices])
    screen = np.concatenate([d.screen_on for d in devices]).astype(np.float64)
    temp = np.concatenate([d.temperature_c for d in devices])
    volt = np.concatenate([d.voltage_v for d in devices])
    charger = np.where(charging, np.repeat(np.array([d.charger for d in devices]), n_per), "unplugged").astype(object)
    tz = np.repeat(np.array([_ZONES[d.tz_h] for d in devices]), n_per).astype(object)
    state = np.where(charging, np.where(level >= 100, "Full", "Charging"), "Discharging").astype(object)
    n = ts.size
    # Upload order: a random delay of up to 3 days decides the server insert order (ids).
    upload = ts + r.integers(0, 3 * 86400, n)
    # Duplicates: 0.5 % of samples re-uploaded later under a new id.
    dup = r.choice(n, size=n // 200, replace=False)
    idx = np.r_[np.arange(n), dup]
    upload = np.r_[upload, upload[dup] + r.integers(86400, 10 * 86400, dup.size)]
    ts, level, dev, charging = ts[idx], level[idx].copy(), dev[idx], charging[idx]
    screen, temp, volt = screen[idx].copy(), temp[idx].copy(), volt[idx].copy()
    charger, tz, state = charger[idx].copy(), tz[idx], state[idx].copy()
    m = idx.size
    # Wrong clocks: 0.2 % in 1970 (inserted first: part-0000 begins with them), 0.05 % far future.
    c1970 = r.choice(m, size=max(1, m // 500), replace=False)
    ts[c1970] = r.integers(0, 86400 * 30, c1970.size)
    upload[c1970] = -1 - np.arange(c1970.size)
    cfut = r.choice(m, size=max(1, m // 2000), replace=False)
    ts[cfut] = 2145916800 + r.integers(0, 86400 * 365, cfut.size)  # 2038
    # Malformed levels, nulls, mV/0.0 voltages, garbage temperatures, mixed case.
    level[r.choice(m, size=max(1, m // 1000), replace=False)] = r.choice([101.0, 150.0, 255.0], size=max(1, m // 1000))
    level[r.choice(m, size=max(1, m // 5000), replace=False)] = np.nan
    mv_dev = np.isin(dev, np.array([d.device_id for d in devices[::5]]))
    volt = np.where(mv_dev & (r.random(m) < 0.5), volt * 1000.0, volt)
    volt[r.random(m) < 0.002] = 0.0
    temp[r.random(m) < 0.001] = r.choice([-40.0, 125.0])
    joined_null = r.random(m) < 0.004
    for arr in (temp, volt, screen):
        arr[joined_null] = np.nan
    charger[joined_null] = None
    upper = r.random(m) < 0.2
    state[upper] = np.char.lower(state[upper].astype(str)).astype(object)
    charger[upper & (charger != None)] = np.char.upper(charger[upper & (charger != None)].astype(str)).astype(object)  # noqa: E711

    net = _network_columns(devices, n_per, idx, joined_null, upper)

    order = np.argsort(upload, kind="stable")
    ids = np.arange(1, m + 1, dtype=np.int64)
    pick = lambda a: a[order]  # noqa: E731
    cols: dict[str, pa.Array] = {
        "id": pa.array(ids),
        "device_id": pa.array(pick(dev)),
        # the server writes Europe/Lisbon wall time (docs/traces.md, quirk 3)
        "timestamp": pa.array(utc_to_lisbon_wall(pick(ts)) * 1_000_000, type=pa.timestamp("us")),
        "battery_state": pa.array(pick(state), type=pa.string()),
        "battery_level": pa.array(pick(level), from_pandas=True),
        "timezone": pa.array(pick(tz), type=pa.string()),
        "country_code": pa.array(r.choice(np.array(["us", "pt", "de", "br", "Unknown"], dtype=object), m), type=pa.string()),
        "memory_active": pa.array(r.integers(500_000, 2_000_000, m)),
        "memory_inactive": pa.array(r.integers(200_000, 900_000, m)),
        "memory_free": pa.array(np.full(m, 3_800_000, dtype=np.int64)),
        "memory_user": pa.array(r.integers(100_000, 400_000, m)),
        "charger": pa.array(pick(charger), type=pa.string()),
        "health": pa.array(np.full(m, "Good", dtype=object), type=pa.string()),
        "voltage": pa.array(pick(volt), from_pandas=True),
        "temperature": pa.array(pick(temp), from_pandas=True),
        "usage": pa.array(np.round(r.random(m), 3)),
        "up_time": pa.array(np.round(r.uniform(0, 1e6, m))),
        "sleep_time": pa.array(np.round(r.uniform(0, 5e5, m))),
        **{name: pa.array(pick(values), type=pa.string() if values.dtype == object else None, from_pandas=True)
           for name, values in net.items() if name != "mobile_data_activity"},
        "mobile_data_activity": pa.array(pick(net["mobile_data_activity"]), type=pa.string()),
        "screen_on": pa.array(pick(screen), from_pandas=True).cast(pa.int64()),
        "screen_brightness": pa.array(r.integers(-1, 256, m)),
    }
    for name in ("roaming_enabled", "bluetooth_enabled", "location_enabled", "power_saver_enabled", "nfc_enabled", "developer_mode"):
        cols[name] = pa.array(r.choice([0.0, 1.0], m))
    for name, hi in (("free", 20000.0), ("total", 64000.0), ("free_system", 800.0), ("total_system", 4000.0)):
        cols[name] = pa.array(np.round(r.uniform(0, hi, m), 1))
    return pa.table(cols)


#: What one simulated device holds while the dump is generated and written, at least: 5 MB, measured (peak RSS 657 MB
#: at 100 devices and 2,209 MB at 400 with the parquet layout alone, 4,009 MB at 400 with all five layouts).
BYTES_PER_DEVICE = 5e6

#: The most parquet parts: ``--parts 1000000`` wrote a million files (mostly empty) for minutes.
MAX_PARTS = 10_000


def _check_size(opts: SynthOptions) -> None:
    """The dump must fit this machine's memory (``--devices 100000000`` ran for minutes towards 500 GB), and its parquet
    parts are bounded (:data:`MAX_PARTS`)."""
    import os

    if opts.n_parts > MAX_PARTS:
        raise InputDataError(f"n_parts: expected at most {MAX_PARTS:,} (each part a file; GreenHub's Kaggle dump has 70), got {opts.n_parts:,}")
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not on this platform: no bound
        return
    need = opts.n_devices * BYTES_PER_DEVICE
    if need > memory:
        gib = float(1 << 30)
        raise InputDataError(f"n_devices: {opts.n_devices:,} devices need at least {need / gib:,.0f} GiB while the dump is written (about "
                             f"{BYTES_PER_DEVICE / 1e6:.0f} MB a device), more than the {memory / gib:.1f} GiB of memory of this machine; "
                             f"at most {int(memory // BYTES_PER_DEVICE):,} here")


def write_synthetic_dump(out_dir: str | Path, opts: SynthOptions | None = None) -> list[Path]:
    """Simulate ``opts.n_devices`` devices and write the requested layouts under ``out_dir``."""
    from flamingo_sim.faults import check_writable
    from flamingo_sim.io import check_out_dir
    from flamingo_sim.traces.synth_write import DUMP, LAYOUT_DIRS, write_layouts

    opts = opts or SynthOptions()
    _check_size(opts)
    # every layout named is known before the first is written (a typo in the second left the first on disk)
    unknown = [layout for layout in opts.layouts if layout not in LAYOUT_DIRS]
    if unknown or not opts.layouts:
        got = f"{unknown[0]!r} unknown" if unknown else "none given"
        raise InputDataError(f"layouts: {got}; expected some of {', '.join(LAYOUT_DIRS)}")
    check_writable(out_dir)  # decided before any work, and no user's directory is replaced
    for layout in opts.layouts:
        check_out_dir(Path(out_dir) / LAYOUT_DIRS[layout], DUMP)
    devices = [simulate_device(opts.first_device_id + i, kind_of(i), opts.seed) for i in range(opts.n_devices)]
    table = samples_table(devices, opts.seed)
    return write_layouts(out_dir, table, devices, opts)
