"""Bad input: one clear line on stderr, exit status 2, no traceback, no partial output."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from trace_helpers import regular_device, table_of

from flamingo_sim.cli import main
from flamingo_sim.errors import InputDataError
from flamingo_sim.traces.pipeline import PrepOptions


def _run(capsys, *args):
    rc = main(["prep-traces", *map(str, args)])
    err = capsys.readouterr().err.strip()
    return rc, err


def _assert_one_line_error(rc, err, *fragments):
    assert rc == 2
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("flamingo-sim prep-traces: error: ")
    assert "Traceback" not in err
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])


@pytest.fixture
def good_table():
    return table_of([regular_device(1, 29, 120), regular_device(2, 29, 120)])


def test_missing_file(tmp_path, capsys):
    rc, err = _run(capsys, tmp_path / "nope.parquet", "--out", tmp_path / "out")
    _assert_one_line_error(rc, err, "nope.parquet: not found")
    assert not (tmp_path / "out").exists()


def test_empty_parquet_and_empty_csv(tmp_path, capsys):
    (tmp_path / "e.parquet").write_bytes(b"")
    rc, err = _run(capsys, tmp_path / "e.parquet", "--out", tmp_path / "out")
    _assert_one_line_error(rc, err, "e.parquet: empty file; expected a parquet file")
    (tmp_path / "samples.csv").write_text("")
    rc, err = _run(capsys, tmp_path / "samples.csv", "--out", tmp_path / "out")
    _assert_one_line_error(rc, err, "samples.csv: empty file; expected a header line")
    assert not (tmp_path / "out").exists()


def test_truncated_and_corrupt_parquet(tmp_path, capsys, good_table):
    pq.write_table(good_table, tmp_path / "g.parquet")
    data = (tmp_path / "g.parquet").read_bytes()
    (tmp_path / "t.parquet").write_bytes(data[: len(data) // 2])
    rc, err = _run(capsys, tmp_path / "t.parquet", "--out", tmp_path / "out")
    _assert_one_line_error(rc, err, "t.parquet: not a readable parquet file", "truncated or corrupt?")
    (tmp_path / "c.parquet").write_bytes(b"PAR1" + bytes(range(256)) * 20 + b"PAR1")
    rc, err = _run(capsys, tmp_path / "c.parquet", "--out", tmp_path / "out")
    _assert_one_line_error(rc, err, "c.parquet: ", "truncated or corrupt?")
    assert not (tmp_path / "out").exists()


def test_corrupt_part_in_parts_dir_leaves_no_output(tmp_path, capsys, good_table):
    parts = tmp_path / "dump" / "samples"
    parts.mkdir(parents=True)
    pq.write_table(good_table, parts / "part-0000.parquet")
    (parts / "part-0001.parquet").write_bytes(b"garbage")
    rc, err = _run(capsys, tmp_path / "dump", "--out", tmp_path / "out")
    _assert_one_line_error(rc, err, "part-0001.parquet: not a readable parquet file")
    assert not (tmp_path / "out").exists()


def test_csv_with_shifted_row(tmp_path, capsys):
    lines = ["id;device_id;timestamp;battery_level;timezone"]
    d = regular_device(1, 29, 120)
    for i, (t, lv) in enumerate(zip(d["ts"], d["level"])):
        stamp = np.datetime64(int(t), "s").astype(str).replace("T", " ")
        lines.append(f"{i};1;{stamp};{lv:g};Europe/Lisbon")
    lines[5] = lines[5].replace("Europe/Lisbon", "Europe;Lisbon")
    (tmp_path / "samples.csv").write_text("\n".join(lines) + "\n")
    # default: counted, not fatal
    rc, _ = _run(capsys, tmp_path / "samples.csv", "--out", tmp_path / "ok", "--max-date", "2026-01-01", "--devices", "1")
    assert rc == 0
    import json
    assert json.loads((tmp_path / "ok" / "report.json").read_text())["drops"]["shifted_row"] == 1
    # strict: one clear line naming file and line
    rc, err = _run(capsys, tmp_path / "samples.csv", "--out", tmp_path / "out", "--max-shifted-frac", "0")
    _assert_one_line_error(rc, err, "samples.csv: line 6: wrong number of fields (1 of 3481 rows", "expected 5 ';'-separated fields")
    assert not (tmp_path / "out").exists()


def test_missing_required_column(tmp_path, capsys, good_table):
    pq.write_table(good_table.drop_columns(["battery_level"]), tmp_path / "m.parquet")
    rc, err = _run(capsys, tmp_path / "m.parquet", "--out", tmp_path / "out")
    _assert_one_line_error(rc, err, "m.parquet: missing required column(s) battery_level; expected device_id, timestamp, battery_level")
    assert not (tmp_path / "out").exists()


def test_wrong_dtype(tmp_path, capsys, good_table):
    bad = good_table.set_column(3, "battery_level", pa.array(np.zeros(good_table.num_rows, dtype="datetime64[ms]")))
    pq.write_table(bad, tmp_path / "w.parquet")
    rc, err = _run(capsys, tmp_path / "w.parquet", "--out", tmp_path / "out")
    _assert_one_line_error(rc, err, "w.parquet: column battery_level has type timestamp[ms]; expected a number")


def test_every_device_filtered_out(tmp_path, capsys, good_table):
    pq.write_table(good_table, tmp_path / "g.parquet")
    rc, err = _run(capsys, tmp_path / "g.parquet", "--out", tmp_path / "out", "--min-days", "30", "--max-date", "2026-01-01")
    _assert_one_line_error(rc, err, "every device filtered out: 0 of 2 devices pass all criteria",
                           "passing each: min_days 0, min_samples_per_day 2, max_gap 2, max_long_gaps 2")
    assert not (tmp_path / "out").exists()


def test_no_valid_rows(tmp_path, capsys, good_table):
    pq.write_table(good_table, tmp_path / "g.parquet")
    rc, err = _run(capsys, tmp_path / "g.parquet", "--out", tmp_path / "out", "--max-date", "2018-01-01")
    _assert_one_line_error(rc, err, "g.parquet: every row dropped as timestamp_in_future (6962 of 6962); "
                           "first timestamp seen: '2019-01-01 00:00:00'; expected timestamps up to --max-date 2018-01-01")


def test_failed_run_keeps_previous_output(tmp_path, capsys, good_table):
    pq.write_table(good_table, tmp_path / "g.parquet")
    rc, _ = _run(capsys, tmp_path / "g.parquet", "--out", tmp_path / "out", "--max-date", "2026-01-01")
    assert rc == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    rc, err = _run(capsys, tmp_path / "g.parquet", "--out", tmp_path / "out", "--min-days", "99", "--max-date", "2026-01-01")
    assert rc == 2
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging leftovers
    shutil.rmtree(tmp_path / "out")


def test_bad_option_values(tmp_path, capsys, good_table):
    pq.write_table(good_table, tmp_path / "g.parquet")
    rc, err = _run(capsys, tmp_path / "g.parquet", "--max-date", "yesterday")
    _assert_one_line_error(rc, err, "--max-date yesterday: expected a date YYYY-MM-DD")
    rc, err = _run(capsys, tmp_path / "g.parquet", "--devices", "0")
    _assert_one_line_error(rc, err, "--devices: expected at least 1, got 0")
    with pytest.raises(InputDataError, match=r"^n_devices: expected at least 1, got 0$"):  # the library names its parameter
        PrepOptions(n_devices=0)


def test_a_text_battery_level_column_is_named_with_an_example(tmp_path, capsys):
    """Issue 22: "no valid rows (... malformed_level 11770 ...)" said neither which column nor what it held."""
    d = regular_device(1, 2, 120)
    n = d["ts"].size
    table = pa.table({
        "id": pa.array(np.arange(n + 1, dtype=np.int64)),
        "device_id": pa.array(np.r_[d["device_id"], [None]].tolist(), type=pa.int64()),  # one row of another defect
        "timestamp": pa.array(np.r_[d["ts"], d["ts"][:1]], type=pa.int64()).cast(pa.timestamp("s")).cast(pa.timestamp("us")),
        "battery_level": pa.array([f"{int(v)} %" for v in d["level"]] + ["50 %"]),
    })
    pq.write_table(table, tmp_path / "text.parquet")
    rc, err = _run(capsys, tmp_path / "text.parquet", "--out", tmp_path / "out")
    _assert_one_line_error(rc, err, f"{tmp_path / 'text.parquet'}: no valid rows ({n + 1} read; dropped: malformed_level {n}, null_device_id 1)",
                           f"; malformed_level: column battery_level of {tmp_path / 'text.parquet'}, e.g. '100 %'; "
                           "expected a battery level within the scale")
    assert not (tmp_path / "out").exists()


def test_a_dump_refused_after_its_passes_prints_no_progress_before_the_line(tmp_path, capsys, monkeypatch, good_table):
    """Issue 50: with progress on (not quiet), "pass 1/2 (select): 1 chunk" came before "every device filtered out";
    the passes' closing lines are said once the input is known good, and then in order."""
    monkeypatch.delenv("FLAMINGO_SIM_QUIET")
    pq.write_table(good_table, tmp_path / "g.parquet")
    rc, err = _run(capsys, tmp_path / "g.parquet", "--out", tmp_path / "out", "--min-days", "1000")
    assert rc == 2
    assert err == (f"flamingo-sim prep-traces: error: {tmp_path / 'g.parquet'}: every device filtered out: 0 of 2 devices pass all criteria "
                   "(passing each: min_days 0, min_samples_per_day 2, max_gap 2, max_long_gaps 2); relax the thresholds (see --help)")
    assert not (tmp_path / "out").exists()
    assert main(["prep-traces", str(tmp_path / "g.parquet"), "--out", str(tmp_path / "out"), "--devices", "2", "--shifts", "1"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[:2] == ["pass 1/2 (select): 1 chunk", "pass 2/2 (resample): 1 chunk"], lines
    assert lines[2].startswith("2 clients from 2 devices")


def test_a_seed_without_a_random_selection_is_refused(tmp_path, capsys, good_table):
    """Issue 50: ``--seed 3`` with ``--select first`` (the default) was ignored: the same devices, whatever the seed."""
    pq.write_table(good_table, tmp_path / "g.parquet")
    rc, err = _run(capsys, tmp_path / "g.parquet", "--out", tmp_path / "out", "--seed", "3")
    assert rc == 2 and err == ("flamingo-sim prep-traces: error: --seed: seeds --select random, and --select is 'first', which draws "
                               "nothing: add --select random, or drop --seed")
    assert not (tmp_path / "out").exists()
    assert main(["prep-traces", str(tmp_path / "g.parquet"), "--out", str(tmp_path / "out"), "--select", "random", "--seed", "3"]) == 0
