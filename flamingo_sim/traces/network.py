"""The network columns of GreenHub samples as states: which network a phone was on, and its WiFi link.

What the columns hold is fixed by the app that wrote them (greenhub-project/batteryhub,
``models/Network.java``, ``models/Wifi.java``, ``managers/sampling/Inspector.java``):

- ``network_type``: the type name of Android's active network (``ConnectivityManager``):
  ``WIFI``, ``MOBILE`` (and ``MOBILE_*`` variants), ``WIMAX``, ``ETHERNET``, ``BLUETOOTH``,
  ``VPN``; ``unknown`` when there is no active network (``getActiveNetworkInfo()`` is null);
- ``network_status`` (a ``samples`` column): ``WIFI`` when connected over WiFi, the mobile
  network type (``lte``, ``hspa``, ...) when connected over cellular, else ``disconnected``,
  ``connecting`` or ``disconnecting``;
- ``mobile_network_type``: the cellular technology (``TelephonyManager``): ``gprs``, ``edge``,
  ``utms`` (the app's spelling of UMTS), ``cdma``, ``evdo_0/a/b``, ``1xrtt``, ``hsdpa``,
  ``hsupa``, ``hspa``, ``iden``, ``lte``, ``ehrpd``, ``hspap``, ``unknown``, or Android's number
  for a type the app does not name (16 GSM, 17 TD-SCDMA, 18 IWLAN, 19 LTE-CA, 20 NR);
- ``wifi_status``: ``enabled``, ``disabled``, ``enabling``, ``disabling``, ``unknown``;
- ``wifi_signal_strength``: the RSSI in dBm (-127 when not associated);
- ``wifi_link_speed``: the link rate in Mbit/s (-1 when not associated).

In the Kaggle and Aug-2020 exports all of them are ``samples`` columns; in the per-table dumps
``samples`` keeps ``network_status`` and the others live in ``network_details.csv``, keyed by
``sample_id`` (the server's migration ``create_network_details_table``, greenhub-project/farmer).
String case varies between dumps (``WIFI`` and ``wifi``, ``lte`` and ``LTE``): everything is
compared lower-cased.

Cleaned per sample (:func:`clean_network`), as float columns with NaN for "not known":

``network_state``     :data:`NONE` (0, no active network), :data:`WIFI` (1, unmetered: WiFi, and
                      the rare ``ETHERNET``), :data:`CELLULAR` (2, metered: ``MOBILE*``, and the
                      rare ``WIMAX`` and ``BLUETOOTH`` tethering); from ``network_type``, else from
                      ``network_status``; ``VPN`` and ``connected`` without a type stay unknown;
``mobile_generation`` 2, 3, 4 or 5 from ``mobile_network_type``;
``wifi_enabled``      1 enabled, 0 disabled;
``wifi_signal_dbm``   the RSSI where it is a reading (-126..-1 dBm);
``wifi_link_mbps``    the link rate (> 0), or 0 for the app's -1 (no link: a reading too).

Resampled onto the grid (:func:`hold_bounded`): the last reading at or before each grid point,
carried forward at most ``hold_s`` (``prep-traces --network-hold-h``, default 6 h, the paper's
own "long gap"); further from a reading, or before a device's first one, the state is unknown
(NaN), and a run gives unknown slots the configured share of WiFi (``network.unknown_wifi_share``).
The WiFi signal and link hold only where the state on the grid is WiFi (:func:`wifi_only`):
elsewhere they are NaN, and so is a link of 0.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["NONE", "WIFI", "CELLULAR", "STATE_NAMES", "NETWORK_INPUTS", "NETWORK_DETAIL_INPUTS", "NETWORK_EXTRAS", "HOLD_H",
           "clean_network", "hold_bounded", "state_shares", "wifi_only"]

#: ``network_state`` codes.
NONE, WIFI, CELLULAR = 0.0, 1.0, 2.0
STATE_NAMES = {NONE: "none", WIFI: "wifi", CELLULAR: "cellular"}
#: The input columns read (canonical names), wherever they live.
NETWORK_INPUTS = ("network_status", "network_type", "mobile_network_type", "wifi_status", "wifi_signal_strength", "wifi_link_speed")
#: The ones that per-table dumps keep in ``network_details.csv`` (``network_status`` stays in ``samples``).
NETWORK_DETAIL_INPUTS = NETWORK_INPUTS[1:]
#: The cleaned, resampled columns, in the order they are written.
NETWORK_EXTRAS = ("network_state", "mobile_generation", "wifi_enabled", "wifi_signal_dbm", "wifi_link_mbps")
#: Default bound on how long a network reading holds (hours): the selection's "long gap".
HOLD_H = 6.0

_TYPES = {"wifi": WIFI, "ethernet": WIFI, "mobile": CELLULAR, "wimax": CELLULAR, "bluetooth": CELLULAR, "unknown": NONE, "vpn": np.nan}
_STATUS_NONE = ("disconnected", "disconnecting", "connecting")
#: ``mobile_network_type`` -> generation; Android's numbers for the types the app does not name.
_GENERATION = {
    **dict.fromkeys(("gprs", "edge", "cdma", "1xrtt", "iden", "gsm", "1", "2", "4", "7", "11", "16"), 2.0),
    **dict.fromkeys(("utms", "umts", "evdo_0", "evdo_a", "evdo_b", "hsdpa", "hsupa", "hspa", "ehrpd", "hspap", "td_scdma",
                     "3", "5", "6", "8", "9", "10", "12", "14", "15", "17"), 3.0),
    **dict.fromkeys(("lte", "lte_ca", "13", "19"), 4.0),
    **dict.fromkeys(("nr", "20"), 5.0),
}


def _lower(col: pa.ChunkedArray) -> np.ndarray:
    """Lower-cased, trimmed text (object array, None for null)."""
    return pc.utf8_lower(pc.utf8_trim_whitespace(pc.cast(col, pa.string()))).to_numpy(zero_copy_only=False)


def _codes(text: np.ndarray, table: dict[str, float], unknown: Counter | None, column: str) -> np.ndarray:
    """Each value's code in ``table`` (NaN for null, empty or unread values), looked up once per
    distinct value (a dump repeats a handful of strings millions of times); ``unknown`` counts the
    values ``table`` does not hold, as ``column=value``."""
    values, inverse = np.unique(np.where(text == None, "", text).astype(str), return_inverse=True)  # noqa: E711
    counts = np.bincount(inverse.reshape(-1), minlength=len(values))
    codes = np.full(len(values), np.nan)
    for j, value in enumerate(values.tolist()):
        if not value:
            continue
        if value in table:
            codes[j] = table[value]
        elif column == "network_type" and value.startswith("mobile"):
            codes[j] = CELLULAR  # MOBILE_MMS, MOBILE_SUPL, MOBILE_DUN, MOBILE_HIPRI, ...
        elif unknown is not None:
            unknown[f"{column}={value}"] += int(counts[j])
    return codes[inverse.reshape(-1)]


def _numeric(col: pa.ChunkedArray) -> np.ndarray:
    """Numbers (or their text) as float64, NaN for null or unparseable."""
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)
    text = pc.utf8_trim_whitespace(pc.cast(col, pa.string()))
    ok = pc.match_substring_regex(text, r"^[-+]?[0-9]+(\.[0-9]*)?$")
    return pc.cast(pc.if_else(ok, text, pa.scalar(None, pa.string())), pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)


def clean_network(table: pa.Table, keep: np.ndarray, unknown: Counter | None = None) -> dict[str, np.ndarray]:
    """The network columns of the kept rows of ``table`` (see the module docstring); only those
    the table can give. ``unknown`` counts the values no rule reads (``column=value``)."""
    names = set(table.column_names)
    out: dict[str, np.ndarray] = {}
    state = None
    if "network_type" in names:
        state = _codes(_lower(table.column("network_type")), _TYPES, unknown, "network_type")
    if "network_status" in names:
        status = _lower(table.column("network_status"))
        from_status = _codes(status, {"wifi": WIFI, **dict.fromkeys(_STATUS_NONE, NONE), **dict.fromkeys(_GENERATION, CELLULAR),
                                      "connected": np.nan, "unknown": np.nan}, None, "network_status")
        state = from_status if state is None else np.where(np.isnan(state), from_status, state)
    if state is not None:
        out["network_state"] = state[keep]
    if "mobile_network_type" in names:
        out["mobile_generation"] = _codes(_lower(table.column("mobile_network_type")), {**_GENERATION, "unknown": np.nan, "0": np.nan},
                                          unknown, "mobile_network_type")[keep]
    if "wifi_status" in names:
        out["wifi_enabled"] = _codes(_lower(table.column("wifi_status")),
                                     {"enabled": 1.0, "disabled": 0.0, "enabling": np.nan, "disabling": np.nan, "unknown": np.nan},
                                     unknown, "wifi_status")[keep]
    if "wifi_signal_strength" in names:
        v = _numeric(table.column("wifi_signal_strength"))
        with np.errstate(invalid="ignore"):
            out["wifi_signal_dbm"] = np.where((v > -127) & (v < 0), v, np.nan)[keep]
    if "wifi_link_speed" in names:
        v = _numeric(table.column("wifi_link_speed"))
        with np.errstate(invalid="ignore"):
            out["wifi_link_mbps"] = np.where(v > 0, v, np.where(v <= 0, 0.0, np.nan))[keep]
    return out


def wifi_only(extras: dict[str, np.ndarray]) -> None:
    """On the grid: the WiFi signal and link where the state is WiFi (and the link above 0), NaN elsewhere (in place)."""
    state = extras.get("network_state")
    on_wifi = None if state is None else np.asarray(state) == WIFI
    for name in ("wifi_signal_dbm", "wifi_link_mbps"):
        if name in extras:
            value = np.asarray(extras[name], dtype=np.float64)
            keep = ~np.isnan(value) if on_wifi is None else on_wifi
            if name == "wifi_link_mbps":
                with np.errstate(invalid="ignore"):
                    keep = keep & (value > 0)
            extras[name] = np.where(keep, value, np.nan).astype(np.asarray(extras[name]).dtype)


def hold_bounded(ts_s: np.ndarray, value: np.ndarray, grid_s: np.ndarray, hold_s: float) -> np.ndarray:
    """The last reading at or before each grid point, if it is at most ``hold_s`` old; else NaN
    (NaN before the first reading too). ``ts_s`` sorted; ``value`` without NaN."""
    if len(ts_s) == 0:
        return np.full(grid_s.shape, np.nan)
    idx = np.searchsorted(ts_s, grid_s, side="right") - 1
    held = np.asarray(value, dtype=np.float64)[np.clip(idx, 0, None)]
    age = np.asarray(grid_s, dtype=np.float64) - np.asarray(ts_s, dtype=np.float64)[np.clip(idx, 0, None)]
    return np.where((idx >= 0) & (age <= hold_s), held, np.nan)


def state_shares(states: np.ndarray) -> dict[str, float]:
    """Share of grid points in each state, and unknown (NaN)."""
    states = np.asarray(states, dtype=np.float64)
    n = max(states.size, 1)
    shares = {name: float(np.count_nonzero(states == code)) / n for code, name in STATE_NAMES.items()}
    shares["unknown"] = float(np.count_nonzero(np.isnan(states))) / n
    return shares
