"""Every command's numeric flags are checked like ``run``'s keys: one line naming the flag, exit 2, nothing written
(the issue's cases: ``synth-greenhub --devices 0`` gave a 37-line traceback, ``prep-traces --min-days -3`` was
accepted, ``--max-shifted-frac nan`` wrote NaN into report.json, ``thermal --ambient-c`` took 1e6, -273.5 and nan)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from flamingo_sim.argtypes import AMBIENT_C, count, number
from tests.cli_runs import ROOT


def test_count_takes_whole_numbers_in_range_only():
    assert count(1)("3") == 3 and count(0)("0") == 0 and count(1, 24)("24") == 24
    for bad in ("0", "-5", "3.0", "1e3", "", "x", "25"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"expected a whole number (>= 1|in \[1, 24\]), got"):
            count(1, 24)(bad) if bad == "25" else count(1)(bad)


def test_number_takes_finite_values_in_range_only():
    assert number(0.0)("0") == 0.0 and number(0.0, 1.0)("1") == 1.0 and AMBIENT_C("-40") == -40.0
    with pytest.raises(argparse.ArgumentTypeError, match=r"> 0, got '0'"):
        number(0.0, low_open=True)("0")
    for bad in ("nan", "inf", "-inf", "1e6", "-273.5", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"expected a finite temperature in \[-40, 70\] degC"):
            AMBIENT_C(bad)


@pytest.mark.parametrize("argv,line", [
    (["synth-greenhub", "--devices", "0", "--out", "{tmp}/x"], "flamingo-sim synth-greenhub: error: argument --devices: expected a whole number >= 1, got '0'"),
    (["synth-greenhub", "--devices", "-5", "--out", "{tmp}/x"], "flamingo-sim synth-greenhub: error: argument --devices: expected a whole number >= 1, got '-5'"),
    (["prep-traces", "{tmp}/none.parquet", "--min-days", "-3", "--out", "{tmp}/x"],
     "flamingo-sim prep-traces: error: argument --min-days: expected a finite number of days >= 0, got '-3'"),
    (["prep-traces", "{tmp}/none.parquet", "--max-shifted-frac", "nan", "--out", "{tmp}/x"],
     "flamingo-sim prep-traces: error: argument --max-shifted-frac: expected a finite share in [0, 1], got 'nan'"),
    (["thermal", "--ambient-c", "1e6"], "flamingo-sim thermal: error: argument --ambient-c: expected a finite temperature in [-40, 70] degC, got '1e6'"),
    (["thermal", "--ambient-c", "-273.5"], "flamingo-sim thermal: error: argument --ambient-c: expected a finite temperature in [-40, 70] degC, got '-273.5'"),
    (["thermal", "--ambient-c", "nan", "--out", "{tmp}/x/t.json"],
     "flamingo-sim thermal: error: argument --ambient-c: expected a finite temperature in [-40, 70] degC, got 'nan'"),
])
def test_bad_flags_of_every_command_stop_with_one_line_before_writing(tmp_path, argv, line):
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    done = subprocess.run([sys.executable, "-m", "flamingo_sim", *args], capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == line + "\n"  # the one line: argparse's usage block (up to 16 lines) no longer before it (issue 50)
    assert not (tmp_path / "x").exists()
