"""FedScale's device-capacity file: read in its real layout, never executed, refused in one line when it is not that."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from flamingo_sim.errors import InputDataError
from flamingo_sim.fl.sim.capacity import client_kbps, read_capacity_file

#: A tiny file in FedScale's layout: a pickled dict {client id from 1: {'computation': ms/sample, 'communication': kbit/s}}
#: (fedscale/cloud/aggregation/aggregator.py, load_client_profile), five clients.
FIXTURE = Path(__file__).resolve().parent / "data" / "fedscale" / "client_device_capacity"


def test_the_fixture_is_read_in_its_real_layout():
    table = read_capacity_file(FIXTURE)
    assert table == {1: {"computation": 153.0, "communication": 2134.5}, 2: {"computation": 47.0, "communication": 11250.0},
                     3: {"computation": 96.0, "communication": 640.0}, 4: {"computation": 30.0, "communication": 35000.0},
                     5: {"computation": 210.0, "communication": 4800.0}}
    # FL client i plays the (i mod 5)-th entry by ascending id (FedScale's own k mod N leaves key 0 missing)
    assert client_kbps(table, 7).tolist() == [2134.5, 11250.0, 640.0, 35000.0, 4800.0, 2134.5, 11250.0]


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_any_pickle_protocol_of_plain_data_reads(tmp_path, protocol):
    f = tmp_path / "cap"
    f.write_bytes(pickle.dumps({7: {"computation": 1.5, "communication": 900}, 3: {"communication": 100.0}}, protocol=protocol))
    table = read_capacity_file(f)
    assert table[7] == {"computation": 1.5, "communication": 900.0} and table[3]["communication"] == 100.0
    assert client_kbps(table, 3).tolist() == [100.0, 900.0, 100.0]


class _Exploit:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_a_pickle_that_would_run_code_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    f = tmp_path / "cap"
    f.write_bytes(pickle.dumps({1: {"computation": 1.0, "communication": _Exploit(str(marker))}}))
    with pytest.raises(InputDataError) as exc:
        read_capacity_file(f)
    assert not marker.exists()
    assert str(exc.value) == (f"{f}: not read: it needs posix.system, and only dicts, ints, floats and strings are read; expected FedScale's "
                              "device-capacity pickle {client id: {'computation': ms/sample, 'communication': kbit/s}}")


def test_numpy_scalars_are_refused_too(tmp_path):
    f = tmp_path / "cap"
    f.write_bytes(pickle.dumps({1: {"computation": 1.0, "communication": np.float64(5.0)}}))
    with pytest.raises(InputDataError, match=r"it needs numpy\..*only dicts, ints, floats and strings are read"):
        read_capacity_file(f)


@pytest.mark.parametrize(("data", "message"), [
    (b"not a pickle at all", "not read: "),
    (pickle.dumps([1, 2, 3]), "holds a value of type list; expected a non-empty dict"),
    (pickle.dumps({}), "holds an empty dict; expected a non-empty dict"),
    (pickle.dumps({"a": {"communication": 5.0}}), "client id 'a' is not an integer"),
    (pickle.dumps({1: 5.0}), "client 1: 5.0 is not a dict with 'communication'"),
    (pickle.dumps({1: {"communication": -3.0}}), "client 1: communication -3.0; expected a bandwidth in kbit/s > 0"),
    (pickle.dumps({1: {"communication": float("nan")}}), "client 1: communication nan"),
    (pickle.dumps({1: {"communication": True}}), "client 1: communication True"),
    (pickle.dumps({1: {"communication": 5.0, "computation": "fast"}}), "client 1: computation 'fast'; expected milliseconds per sample"),
])
def test_what_is_not_a_capacity_file_is_one_line(tmp_path, data, message):
    f = tmp_path / "cap"
    f.write_bytes(data)
    with pytest.raises(InputDataError) as exc:
        read_capacity_file(f)
    assert str(exc.value).startswith(f"{f}: ") and message in str(exc.value) and "\n" not in str(exc.value)


def test_a_missing_or_truncated_file(tmp_path):
    with pytest.raises(InputDataError, match="cannot read"):
        read_capacity_file(tmp_path / "absent")
    f = tmp_path / "cut"
    f.write_bytes(FIXTURE.read_bytes()[:40])
    with pytest.raises(InputDataError, match=r"not a pickle \(|not read"):
        read_capacity_file(f)


def test_the_trace_files_read_back_for_fedscale_are_not_executed_either(tmp_path):
    from flamingo_sim.integrations.fedscale_traces import read_device_avail, read_device_conf

    marker = tmp_path / "ran"
    f = tmp_path / "device_conf.pkl"
    f.write_bytes(pickle.dumps({0: {"computation": 1.0, "communication": _Exploit(str(marker))}}))
    for read in (read_device_conf, read_device_avail):
        with pytest.raises(InputDataError, match="only dicts, ints, floats and strings are read"):
            read(f)
    assert not marker.exists()
