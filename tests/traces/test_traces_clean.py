"""Cleaning: every drop reason counted, level scale detection, extras normalisation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from flamingo_sim.errors import InputDataError
from flamingo_sim.traces.clean import Cleaner

MIN_S = 1508025600  # 2017-10-15
MAX_S = 1767225599  # 2025-12-31 23:59:59
F = Path("x.csv")


def _cleaner(scale="auto"):
    return Cleaner(min_s=MIN_S, max_s=MAX_S, level_scale=scale)


def test_every_reason_counted_once_in_order():
    t = pa.table({
        "device_id": ["1", None, "abc", "-4", "2", "2", "2", "2", "2", "2", "2", "3"],
        "timestamp": ["2019-01-01 00:00:00", "2019-01-01 00:00:00", "2019-01-01 00:00:00", "2019-01-01 00:00:00",
                      None, "0000-00-00 00:00:00", "1970-01-01 00:00:05", "2038-01-01 00:00:00",
                      "2019-01-01 00:00:00", "2019-01-01 00:00:00", "2019-01-01 00:00:00", " 2019-02-01 10:00:00 "],
        "battery_level": ["50", "50", "50", "50", "50", "50", "50", "50", None, "101", "x", "7"],
    })
    c = _cleaner("pct")
    out = c.clean(t, F)
    assert dict(c.drops) == {
        "null_device_id": 1, "malformed_device_id": 2, "null_timestamp": 1, "unparseable_timestamp": 1,
        "timestamp_before_min": 1, "timestamp_in_future": 1, "null_battery_level": 1, "malformed_level": 2,
    }
    assert out["device_id"].tolist() == [1, 3]
    assert out["ts_s"].tolist() == [1546300800, 1549015200]
    assert out["level_pct"].tolist() == [50.0, 7.0]
    assert c.rows_in == 12


def test_level_scale_detection_and_fraction_max():
    frac = pa.table({"device_id": [1, 1, 1], "timestamp": pa.array([1546300800] * 3).cast(pa.timestamp("s")),
                     "battery_level": [0.5, 0.25, 1.5]})
    c = _cleaner()
    out = c.clean(frac, F)
    assert c.level_scale == "fraction"
    assert out["level_pct"].tolist() == [50.0, 25.0]
    assert c.drops["malformed_level"] == 1
    pct = frac.set_column(2, "battery_level", pa.array([50.0, 25.0, 100.5]))
    c2 = _cleaner()
    assert c2.clean(pct, F)["level_pct"].tolist() == [50.0, 25.0]
    assert c2.level_scale == "pct" and c2.drops["malformed_level"] == 1


def test_count_false_does_not_touch_counters():
    t = pa.table({"device_id": [1, None], "timestamp": ["2019-01-01 00:00:00"] * 2, "battery_level": [3, 4]})
    c = _cleaner("pct")
    c.clean(t, F, count=False)
    assert sum(c.drops.values()) == 0 and c.rows_in == 0


def test_extras_normalised():
    t = pa.table({
        "device_id": [1] * 6, "timestamp": ["2019-01-01 00:00:0%d" % i for i in range(6)], "battery_level": [50] * 6,
        "screen_on": [0, 1, 2, None, 1, 0],
        "temperature": [25.0, -40.0, 125.0, 30.5, None, 0.0],
        "voltage": [3.9, 3900.0, 0.0, 4200.0, None, 7.0],
        "charger": ["AC", "usb", "Unplugged", "wireless", "unknown", None],
    })
    out = _cleaner("pct").clean(t, F, extras=True)
    np.testing.assert_array_equal(out["screen_on"], [0, 1, np.nan, np.nan, 1, 0])
    np.testing.assert_array_equal(out["temperature_c"], [25.0, np.nan, np.nan, 30.5, np.nan, 0.0])
    np.testing.assert_array_equal(out["voltage_v"], [3.9, 3.9, np.nan, 4.2, np.nan, np.nan])
    np.testing.assert_array_equal(out["charging"], [1, 1, 0, 1, np.nan, np.nan])


def test_wrong_dtype_is_a_clear_error():
    t = pa.table({"device_id": [1], "timestamp": ["2019-01-01 00:00:00"],
                  "battery_level": pa.array([1546300800]).cast(pa.timestamp("s"))})
    with pytest.raises(InputDataError, match=r"x.csv: column battery_level has type timestamp\[s\]; expected a number"):
        _cleaner().clean(t, F)
    t2 = pa.table({"device_id": [1], "timestamp": [3.5], "battery_level": [3.0]})
    with pytest.raises(InputDataError, match="column timestamp has type double; expected a timestamp"):
        _cleaner().clean(t2, F)
