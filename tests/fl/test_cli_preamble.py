"""``flamingo-sim run``: a refusal made while the run is prepared is the only line it prints (issue 50, "errors come
before any preamble").

Before: the proxy task's WARNING line, its "data: ..." line and "model update: ..." came first wherever the refusal
was made while the first seed's parts were built or after (an unknown phone in phones.mix, a DNN model no phone has a
profile of, a batch no client holds, a run estimated longer than a day)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flamingo_sim.cli import main
from flamingo_sim.fl.cli import PreambleLog

BASE = "name: x\nfl: {rounds: 2, participants_per_round: 5, local_steps: 2, eval_every: 1}\ndata: {proxy: {n_clients: 60}}\n"

REFUSED = [
    ("unknown phone", ["phones.mix={nophone: 1.0}"],
     "phones.mix: unknown phone 'nophone' (known: galaxy_s10e, galaxy_tab_s6, mi_10, oneplus_8, pixel_3)"),
    ("model without profiles", ["model=bogus"],
     "model: no profile of DNN model 'bogus' for phone 'galaxy_tab_s6' in profile set 'paper' (profiled models: mobilenet_v2, resnet34, "
     "shufflenet_v2_x2)"),
    ("batch above every client", ["fl.batch_size=100000"],
     "fl.batch_size: expected at most 747, the samples of the largest client, got 100,000 (a client with fewer samples than the batch "
     "repeats some of them within a batch; a batch larger than every client would repeat samples in every batch)"),
]


@pytest.mark.parametrize("sets, error", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_refusal_while_the_parts_are_built_is_the_only_line(tmp_path, monkeypatch, capsys, sets, error):
    monkeypatch.delenv("FLAMINGO_SIM_QUIET", raising=False)
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)
    assert main(["run", str(exp), "--out", str(tmp_path / "out"), *[a for s in sets for a in ("--set", s)]]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == f"flamingo-sim run: error: {exp}: {error}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]


def test_a_run_that_goes_ahead_says_its_preamble_first(tmp_path, monkeypatch, capsys):
    """The lines held while the run was prepared are said, in their order, before the run's own."""
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)
    assert main(["run", str(exp), "--out", str(tmp_path / "out"), "--set", "policies=[baseline]", "--set", "fl.rounds=1"]) == 0
    lines = capsys.readouterr().err.splitlines()
    starts = [next(i for i, line in enumerate(lines) if line.startswith(s)) for s in ("WARNING: data.root is null", "data: ", "model update: ",
                                                                                      "training on cpu")]
    assert starts == sorted(starts), lines


def test_preamble_log_holds_lines_until_the_run_directory_is_written(tmp_path, capsys):
    started = tmp_path / "out" / "config.yaml"
    log = PreambleLog(started)
    log("one")
    log("two")
    assert capsys.readouterr().err == ""
    started.parent.mkdir()
    started.write_text("x")
    log("three")
    assert capsys.readouterr().err == "one\ntwo\nthree\n"
    log("four")
    assert capsys.readouterr().err == "four\n"


def test_preamble_log_passes_lines_on_when_the_run_directory_was_there(tmp_path, capsys):
    """A resumed run (its config.yaml there before): nothing held. No run directory to watch (a rank of torchrun): the same."""
    (tmp_path / "config.yaml").write_text("x")
    log = PreambleLog(tmp_path / "config.yaml")
    log("one")
    assert capsys.readouterr().err == "one\n"
    PreambleLog(None)("two")
    assert capsys.readouterr().err == "two\n"


def test_preamble_log_release_says_what_it_held(tmp_path, capsys):
    log = PreambleLog(Path(tmp_path / "never" / "config.yaml"))
    log("one")
    log.release()
    log("two")
    assert capsys.readouterr().err == "one\ntwo\n"


def test_nproc_refuses_what_rank_0_would_before_its_notice_and_the_launch(tmp_path, monkeypatch, capsys):
    """Issue 50: ``run --nproc 2`` with a batch no client holds printed the proxy task's --nproc notice, then rank 0's
    error line, then the launcher's "rank 0 stopped with the error above": three lines. Now: the one line, no process started."""
    from flamingo_sim.fl.distributed import launch as launcher

    def never(*_args, **_kw):
        raise AssertionError("launched")

    monkeypatch.setattr(launcher, "launch", never)
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)
    assert main(["run", str(exp), "--out", str(tmp_path / "out"), "--nproc", "2", "--set", "fl.batch_size=100000"]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == f"flamingo-sim run: error: {exp}: {REFUSED[2][2]}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "1e15"])
def test_collective_timeout_is_checked_before_any_process_starts(tmp_path, capsys, value):
    """Issue 50: ``--nproc 2 --collective-timeout-s nan`` (or -1, 0) printed the --nproc notice, each rank's error and the
    launcher's line (4 lines); ``inf`` gave a 52-line traceback (a timedelta overflow in every rank)."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)
    with pytest.raises(SystemExit) as exc:
        main(["run", str(exp), "--out", str(tmp_path / "out"), "--nproc", "2", "--collective-timeout-s", value])
    assert exc.value.code == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == ("flamingo-sim run: error: argument --collective-timeout-s: expected a finite number of seconds in (0, 604800], "
                           f"got {value!r}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]


def test_the_library_refuses_a_collective_timeout_it_cannot_hold():
    from flamingo_sim.errors import ConfigError
    from flamingo_sim.fl.distributed.world import World, start

    for bad in (float("inf"), float("nan"), 0.0, 1e15):
        with pytest.raises(ConfigError, match=r"^--collective-timeout-s: expected seconds in \(0, 604800\], got "):
            start(World(0, 1, 0, 1), bad)
