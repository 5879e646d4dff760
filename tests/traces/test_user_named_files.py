"""Files a user names that are not what they should be (issue 32): a GreenHub CSV in another encoding,
a file given as a trace set, each one line naming the file and the problem, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from flamingo_sim.cli import main
from flamingo_sim.errors import InputDataError
from flamingo_sim.traces.store import load_client_traces

HEADER = "id;device_id;timestamp;battery_state;battery_level\n"


def _dump(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "samples.csv"
    path.write_bytes((HEADER + "".join(rows)).encode("latin-1"))
    return path


@pytest.mark.parametrize("where,line", [("data", 3), ("header", 1)])
def test_a_latin1_greenhub_csv_is_one_line_naming_file_and_line(tmp_path, capsys, where, line):
    # a column the pipeline reads holds a Latin-1 byte (columns it does not read are not decoded)
    rows = ["1;7;2019-01-01 00:00:00;Charging;50\n", "2;7;2019-01-01 00:10:00 é;Discharging;49\n"]
    path = _dump(tmp_path, rows)
    if where == "header":
        path.write_bytes(path.read_bytes().replace(b"battery_state", "état".encode("latin-1"), 1))
    rc = main(["prep-traces", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0, err
    assert err == (f"flamingo-sim prep-traces: error: {path}: line {line}: not UTF-8 text (byte 0xe9); "
                   "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)")
    assert not (tmp_path / "out").exists()


def test_a_file_as_the_trace_set_says_it_is_a_file(tmp_path):
    path = tmp_path / "samples.csv"
    path.write_text(HEADER)
    with pytest.raises(InputDataError) as info:
        load_client_traces(path)
    assert str(info.value).startswith(f"{path}: a file, not a trace set; expected a prep-traces output directory")
