"""The GreenHub server clock: UTC until late 2018, Europe/Lisbon wall time after (docs/traces.md, quirk 3).

Lisbon is on UTC (WET) in winter and UTC+1 (WEST) from the last Sunday of March to the last
Sunday of October (changes at 01:00 UTC). The server's switch to Lisbon time happened in late
2018; from 2018-10-28 01:00 UTC (end of summer time) to 2019-03-31 01:00 UTC Lisbon wall time
*is* UTC, so any switch date in that window gives the same conversion, and we convert every
timestamp from 2018-10-28 01:00 on. Wall times in the repeated autumn hour (01:00-02:00 on the
last Sunday of October) are read as summer time (the first occurrence), and so are the
non-existent wall times of the skipped spring hour (01:00-02:00 on the last Sunday of March).
"""

from __future__ import annotations

import calendar
import datetime as dt
from functools import lru_cache

import numpy as np

__all__ = ["SWITCH_S", "lisbon_wall_to_utc", "utc_to_lisbon_wall"]

#: 2018-10-28 01:00:00 UTC: from here on the server wrote Europe/Lisbon wall time.
SWITCH_S = 1540688400


def _last_sunday(year: int, month: int) -> int:
    last = calendar.monthrange(year, month)[1]
    d = dt.date(year, month, last)
    return last - (d.weekday() + 1) % 7


@lru_cache(maxsize=None)
def _summer_bounds(utc: bool) -> np.ndarray:
    """[start, end) of summer time per year 2018..2100, as UTC or as wall-clock epoch seconds."""
    out = []
    for y in range(2018, 2101):
        start = dt.datetime(y, 3, _last_sunday(y, 3), 1, tzinfo=dt.timezone.utc).timestamp()
        end = dt.datetime(y, 10, _last_sunday(y, 10), 1, tzinfo=dt.timezone.utc).timestamp()
        if not utc:  # wall clock: spring jumps at 01:00 WET, autumn falls back at 02:00 WEST
            end += 3600
        out += [int(start), int(end)]
    return np.array(out, dtype=np.int64)


def _in_summer(ts: np.ndarray, utc: bool) -> np.ndarray:
    # On the wall clock the switch is at 02:00 (01:00-02:00 that night is read as UTC, as written before it).
    return (np.searchsorted(_summer_bounds(utc), ts, side="right") % 2 == 1) & (ts >= SWITCH_S + (0 if utc else 3600))


def lisbon_wall_to_utc(ts_s: np.ndarray) -> np.ndarray:
    """Server timestamps (epoch seconds read as if UTC) to true UTC."""
    ts = np.asarray(ts_s, dtype=np.int64)
    return ts - 3600 * _in_summer(ts, utc=False)


def utc_to_lisbon_wall(ts_s: np.ndarray) -> np.ndarray:
    """True UTC to what the server wrote (inverse of :func:`lisbon_wall_to_utc` off the repeated hour)."""
    ts = np.asarray(ts_s, dtype=np.int64)
    return ts + 3600 * _in_summer(ts, utc=True)
