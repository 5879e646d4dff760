"""Server clock: Europe/Lisbon wall time from late 2018 on, converted to UTC."""

from __future__ import annotations

import datetime as dt

import numpy as np

from flamingo_sim.traces.clock import SWITCH_S, lisbon_wall_to_utc, utc_to_lisbon_wall


def _s(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc).timestamp())


def test_hand_computed_conversions():
    cases = {
        "2018-07-01 12:00:00": "2018-07-01 12:00:00",  # before the switch: UTC
        "2019-01-15 12:00:00": "2019-01-15 12:00:00",  # winter: WET = UTC
        "2019-07-01 12:00:00": "2019-07-01 11:00:00",  # summer: WEST = UTC+1
        "2019-03-31 00:59:59": "2019-03-31 00:59:59",  # just before spring forward
        "2019-03-31 02:00:00": "2019-03-31 01:00:00",  # just after
        "2019-10-27 00:59:59": "2019-10-26 23:59:59",  # summer time, before falling back
        "2019-10-27 02:00:00": "2019-10-27 02:00:00",  # winter again
        "2024-08-01 00:30:00": "2024-07-31 23:30:00",
    }
    wall = np.array([_s(k) for k in cases])
    assert lisbon_wall_to_utc(wall).tolist() == [_s(v) for v in cases.values()]
    assert SWITCH_S == _s("2018-10-28 01:00:00")


def test_round_trip_off_the_repeated_hour():
    utc = np.arange(_s("2018-01-01 00:00:00"), _s("2021-01-01 00:00:00"), 1800)
    back = lisbon_wall_to_utc(utc_to_lisbon_wall(utc))
    wrong = utc[back != utc]
    # only the hour after falling back (01:00-02:00 UTC on the last Sunday of October) is ambiguous
    assert {dt.datetime.fromtimestamp(int(t), dt.timezone.utc).strftime("%m-%d %H") for t in wrong} == {
        "10-27 01", "10-25 01"}  # 2019, 2020 (2018's falls before the switch)
