"""``flamingo-sim run`` as a new user meets it (issue 32): the run directory checked with ``--seeds``
applied, a "continue it with" line built from the command typed, messages naming what was typed,
bad experiment files and ``--engine flower --nproc`` refused in one line before torch is imported."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from flamingo_sim.cli import build_parser
from flamingo_sim.config import to_mapping
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.cli import _preflight, continue_command
from flamingo_sim.fl.config import load_experiment, with_seeds
from flamingo_sim.resources import find_experiment

ROOT = Path(__file__).resolve().parents[2]
EXP = ROOT / "experiments" / "openimage_mobilenet.yaml"


def _args(*argv: str) -> argparse.Namespace:
    args = build_parser().parse_args(["run", *argv])
    args.argv = ["run", *argv]
    return args


def _run_dir(tmp_path: Path, n_seeds: int) -> Path:
    """A run directory as a --seeds n_seeds run leaves it (its config.yaml is what resume compares)."""
    out = tmp_path / "run"
    out.mkdir()
    cfg = with_seeds(load_experiment(find_experiment("openimage_mobilenet")), n_seeds)
    (out / "config.yaml").write_text(yaml.safe_dump(to_mapping(cfg), sort_keys=False))
    return out


def test_resume_is_checked_with_seeds_applied(tmp_path):
    out = _run_dir(tmp_path, 3)
    _preflight(_args("openimage_mobilenet", "--out", str(out), "--seeds", "3", "--resume"))  # the README's command
    with pytest.raises(ConfigError, match=r"seeds \(\[0, 1, 2\] -> \[0, 1\]\)"):
        _preflight(_args("openimage_mobilenet", "--out", str(out), "--seeds", "2", "--resume"))


def test_with_seeds_counts_from_the_first_seed():
    cfg = load_experiment(EXP, ["seeds=[5, 9]"])
    assert with_seeds(cfg, 3).seeds == [5, 6, 7]
    assert with_seeds(cfg, None) is cfg


@pytest.mark.parametrize("typed,expected", [
    # what the user typed, with --resume added and nothing dropped
    (["openimage_mobilenet", "--seeds", "3", "--out", "runs/mnv2r"],
     "flamingo-sim run openimage_mobilenet --seeds 3 --out runs/mnv2r --resume"),
    (["openimage_mobilenet", "--out", "runs/a b", "--set", "seeds=[0,1,2]", "--jobs", "2", "--set", "fl.lr=1e-3"],
     "flamingo-sim run openimage_mobilenet --out 'runs/a b' --set 'seeds=[0,1,2]' --jobs 2 --set fl.lr=1e-3 --resume"),
    (["openimage_mobilenet", "--out", "r", "--resume", "--seeds", "2"],
     "flamingo-sim run openimage_mobilenet --out r --resume --seeds 2"),
    (["experiments/openimage_mobilenet.yaml", "--out=r", "--device", "cpu"],
     "flamingo-sim run experiments/openimage_mobilenet.yaml --out=r --device cpu --resume"),
])
def test_the_continue_line_is_the_command_typed_with_resume(typed, expected):
    args = _args(*typed)
    assert continue_command(args, args.out) == expected
    assert shlex.split(expected)[2:] == [*typed, *([] if "--resume" in typed else ["--resume"])]


def test_the_continue_line_names_the_default_run_directory():
    args = _args("openimage_mobilenet", "--seeds", "2")
    assert continue_command(args, "runs/openimage_mobilenet-20260101-000000") == (
        "flamingo-sim run openimage_mobilenet --seeds 2 --out runs/openimage_mobilenet-20260101-000000 --resume")


def _cli(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """``flamingo-sim ARGV`` in a fresh process that must not import torch; run in ``tmp_path``."""
    code = ("import sys; from flamingo_sim.cli import main; rc = main(sys.argv[1:]); "
            "assert 'torch' not in sys.modules, 'torch imported'; raise SystemExit(rc)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLAMINGO_SIM_QUIET": "1"}
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120, check=False)


def _one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr.strip()


def test_messages_name_the_shipped_experiment_as_typed(tmp_path):
    line = _one_line(_cli(tmp_path, "run", "openimage_mobilenet", "--set", "fl.roundz=3"))
    assert line.startswith("flamingo-sim run: error: openimage_mobilenet: unknown key 'fl.roundz' (known here: "), line
    assert "flamingo_sim/data" not in line


def test_a_directory_as_the_experiment_says_so(tmp_path):
    (tmp_path / "exp").mkdir()
    assert _one_line(_cli(tmp_path, "run", "exp")) == "flamingo-sim run: error: exp: is a directory, not a YAML file"


def test_a_latin1_experiment_is_one_line(tmp_path):
    (tmp_path / "e.yaml").write_bytes(EXP.read_bytes().replace(b"\n", "\n# r\xe9glage\n".encode("latin-1"), 1))
    assert _one_line(_cli(tmp_path, "run", "e.yaml")) == (
        "flamingo-sim run: error: e.yaml: line 2: not UTF-8 text (byte 0xe9); save the file as UTF-8")


def test_lr_in_exponent_form_is_a_number(tmp_path):
    # a bad --set elsewhere stops the run before torch: fl.lr=1e-3 itself is accepted
    line = _one_line(_cli(tmp_path, "run", "openimage_mobilenet", "--set", "fl.lr=1e-3", "--set", "fl.rounds=0"))
    assert "fl.rounds: expected an integer >= 1, got 0" in line and "fl.lr" not in line


@pytest.mark.parametrize("engine", ["flower", "fedscale"])
def test_nproc_with_another_engine_is_refused_up_front(tmp_path, engine):
    assert _one_line(_cli(tmp_path, "run", "openimage_mobilenet", "--engine", engine, "--nproc", "2")) == (
        f"flamingo-sim run: error: --nproc: splits the native simulator's training over N processes; --engine '{engine}' "
        "starts processes of its own: leave --nproc out")
    assert list(tmp_path.iterdir()) == []


def test_a_file_as_the_profiles_directory_is_refused(tmp_path):
    from flamingo_sim.fl.compose import profile_dirs

    (tmp_path / "lat.csv").write_text("x\n")
    cfg = load_experiment(EXP, [f"phones.profiles_dir={tmp_path / 'lat.csv'}"])
    with pytest.raises(ConfigError) as info:
        profile_dirs(cfg, EXP)
    assert str(info.value) == f"{EXP}: phones.profiles_dir: {str(tmp_path / 'lat.csv')!r} is a file, not a directory of profiles"


def test_a_pasteable_command_is_printed_as_it_is():
    """Parameter names become flags in a message, but not inside the command it gives to paste."""
    from flamingo_sim.cli import _user_terms

    args = _args("openimage_mobilenet", "--out", "resume", "--set", "engine=1")
    message = f"n_seeds stopped; continue it with: {continue_command(args, args.out)}"
    assert _user_terms(message, args) == ("--seeds stopped; continue it with: "
                                          "flamingo-sim run openimage_mobilenet --out resume --set engine=1 --resume")
