"""The command line's own parser: a usage mistake is one line, ``PROG: error: MESSAGE``, exit code 2.

Issue 50 ("errors come before any preamble"): argparse printed its usage block before that line, 16 lines
for ``prep-traces``, 7 for ``profile`` and ``reproduce``, on every flag it refused (a value its type refuses, a
choice not offered, a required flag missing, an unknown command)."""

from __future__ import annotations

import pytest

from flamingo_sim.cli import main

CASES = [
    (["prep-traces", "dump.parquet", "--devices", "abc"], "flamingo-sim prep-traces: error: argument --devices: invalid int value: 'abc'"),
    (["prep-traces", "dump.parquet", "--shifts", "0"], "flamingo-sim prep-traces: error: argument --shifts: expected a whole number in [1, 24], got '0'"),
    (["profile", "--model", "logreg", "--steps", "0"], "flamingo-sim profile: error: argument --steps: expected a whole number >= 1, got '0'"),
    (["thermal", "--ambient-c", "nan"], "flamingo-sim thermal: error: argument --ambient-c: expected a finite temperature in [-40, 70] degC, got 'nan'"),
    (["run", "x.yaml", "--readings", "bogus"], "flamingo-sim run: error: argument --readings: invalid choice: 'bogus' (choose from 'default', 'paper')"),
    (["run", "x.yaml", "--jobs", "0"], "flamingo-sim run: error: argument --jobs: expected a count >= 1 or auto, got '0'"),
    (["report", "r", "--format", "gif"], "flamingo-sim report: error: argument --format: invalid choice: 'gif' (choose from 'png', 'svg', 'pdf')"),
    (["reproduce", "--jobs", "0"], "flamingo-sim reproduce: error: argument --jobs: expected a count >= 1 or auto, got '0'"),
    (["sensitivity", "x.yaml"], "flamingo-sim sensitivity: error: the following arguments are required: --out"),
    (["run"], "flamingo-sim run: error: the following arguments are required: experiment"),
    ([], "flamingo-sim: error: the following arguments are required: COMMAND"),
    (["runn"], "flamingo-sim: error: argument COMMAND: invalid choice: 'runn' (choose from 'prep-traces', 'synth-greenhub', 'profiles', "
               "'thermal', 'profile', 'run', 'pack-data', 'report', 'fidelity', 'reproduce', 'sensitivity')"),
]


@pytest.mark.parametrize("argv, line", CASES, ids=[" ".join(c[0]) or "no command" for c in CASES])
def test_a_usage_mistake_is_one_line_and_nothing_before_it(tmp_path, monkeypatch, capsys, argv, line):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == line + "\n"  # before issue 50: "usage: flamingo-sim ..." and its continuation lines first
    assert list(tmp_path.iterdir()) == []


def test_help_still_shows_the_usage(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("usage: flamingo-sim run [-h]")


def test_a_rank_the_launcher_stopped_says_nothing_the_launcher_says_it(monkeypatch, capsys):
    """A rank of ``run --nproc`` that the launcher stops with SIGTERM exits quietly (the launcher's one line names what
    happened; under load the rank's own "interrupted (SIGTERM)" came first and made two). Anywhere else a SIGTERM is
    still said in one line."""
    import signal

    from flamingo_sim import cli as top
    from flamingo_sim.devices import cli as devices_cli
    from flamingo_sim.faults import Interrupted
    from flamingo_sim.fl.distributed.world import LAUNCHER_ENV

    def stopped(_args):
        raise Interrupted(int(signal.SIGTERM))

    monkeypatch.setattr(devices_cli, "_thermal", stopped)
    monkeypatch.setenv(LAUNCHER_ENV, "1")
    assert top.main(["thermal"]) == 128 + signal.SIGTERM
    assert capsys.readouterr().err == ""
    monkeypatch.delenv(LAUNCHER_ENV)
    assert top.main(["thermal"]) == 128 + signal.SIGTERM
    assert capsys.readouterr().err == "flamingo-sim thermal: interrupted (SIGTERM)\n"
