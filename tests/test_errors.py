"""Library errors name parameters and config keys; the CLI says the same with its flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from flamingo_sim.cli import main
from flamingo_sim.errors import ConfigError, in_cli_terms
from flamingo_sim.fl.runner.run import run_experiment

EXP = Path(__file__).resolve().parents[1] / "experiments/openimage_mobilenet.yaml"


def test_in_cli_terms_replaces_whole_names_only():
    flags = {"out_dir": "--out", "resume": "--resume", "format": "--format"}
    assert in_cli_terms("resume: needs out_dir, the run directory", flags) == "--resume: needs --out, the run directory"
    # parts of paths, quoted values and longer words stay as they are
    assert in_cli_terms("/data/resume/x: format 'format' in resumed", flags) == "/data/resume/x: --format 'format' in resumed"
    assert in_cli_terms("resume: x", {}) == "resume: x"


def test_library_names_the_parameter_and_the_cli_the_flag(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"^n_seeds: expected a count >= 1, got 0$"):
        run_experiment(EXP, out_dir=tmp_path / "a", n_seeds=0)
    assert main(["run", str(EXP), "--out", str(tmp_path / "b"), "--seeds", "0"]) == 2
    assert capsys.readouterr().err.strip() == "flamingo-sim run: error: --seeds: expected a count >= 1, got 0"
    assert main(["run", str(EXP), "--resume"]) == 2
    assert capsys.readouterr().err.strip() == "flamingo-sim run: error: --resume: needs --out, the run directory to continue"
    assert main(["run", str(EXP), "--set", "fl.rounds"]) == 2
    assert capsys.readouterr().err.strip() == "flamingo-sim run: error: --set 'fl.rounds': expected KEY=VALUE, for example fl.rounds=20"
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
