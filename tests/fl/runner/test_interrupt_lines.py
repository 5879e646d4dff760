"""What an interruption leaves (issue 44): the command that continues the run in the run directory too
(``... 2>&1 | tee log``: Ctrl-C ends tee as well, and its line with it), a progress bar ended before that
line is printed (never drawn after it), and no resume offered where the run keeps no checkpoints (FedBuff)."""

from __future__ import annotations

import pytest

from flamingo_sim.cli import main
from flamingo_sim.fl.runner import callbacks as callbacks_module
from flamingo_sim.fl.runner.callbacks import Callback
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.runner.rundir import RESUME_FILE

BASE = "name: x\npolicies: [baseline]\nfl: {rounds: 4, participants_per_round: 4, local_steps: 1, eval_every: 1}\ndata: {proxy: {n_clients: 40}}\n"


class _StopAt(Callback):
    def __init__(self, round_: int, events: list[str]) -> None:
        self.round, self.events = round_, events

    def on_round_end(self, sim, record):
        if record.round == self.round:
            self.events.append("interrupt")
            raise KeyboardInterrupt
        return None


class _Bar:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def update(self, n=1):
        return None

    def set_postfix_str(self, s="", refresh=True):
        return None

    def close(self):
        self.events.append("bar closed")


def test_the_bar_ends_before_the_interruption_propagates_and_the_command_is_in_the_run_directory(tmp_path, monkeypatch):
    events: list[str] = []
    monkeypatch.setattr(callbacks_module, "progress", lambda *_a, **_k: _Bar(events))
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt) as info:
        run_experiment(exp, out_dir=out, callbacks=[_StopAt(2, events)], again="flamingo-sim run exp.yaml --out out --resume")
    assert events == ["interrupt", "bar closed"]  # closed before the CLI prints the line (it prints on the way out)
    assert info.value.hint == "continue it with: flamingo-sim run exp.yaml --out out --resume"  # type: ignore[attr-defined]
    assert (out / RESUME_FILE).read_text() == "flamingo-sim run exp.yaml --out out --resume\n"


def test_the_command_line_writes_the_command_it_would_print(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)
    out = tmp_path / "out"
    assert main(["run", str(exp), "--out", str(out), "--set", "fl.rounds=2"]) == 0
    assert (out / RESUME_FILE).read_text() == f"flamingo-sim run {exp} --out {out} --set fl.rounds=2 --resume\n"


def test_a_fedbuff_run_offers_no_resume(tmp_path, monkeypatch):
    monkeypatch.setattr(callbacks_module, "progress", lambda *_a, **_k: _Bar([]))
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE + "fedbuff: {buffer_size: 2}\n")
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt) as info:
        run_experiment(exp, out_dir=out, overrides=("fl.mode=fedbuff",), callbacks=[_StopAt(2, [])])
    assert info.value.hint == "this run keeps no checkpoints (FedBuff): start it again with another out_dir"  # type: ignore[attr-defined]
    assert not (out / RESUME_FILE).exists()
