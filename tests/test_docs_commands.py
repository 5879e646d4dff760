"""One source per fact in the docs: the commands tables against each other and against the CLI's
argparse definitions, the install page's extras against ``pyproject.toml``, and (slow) the main
job's output blocks against what the command prints."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from flamingo_sim.cli import build_parser
from tests.identity import assert_summary_matches

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
INDEX = ROOT / "docs" / "index.md"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def table(path: Path, header: str) -> list[list[str]]:
    """The rows of the Markdown table under ``header`` in ``path``."""
    lines = path.read_text().splitlines()
    assert lines.count(header) == 1, f"{path.name}: expected the table header {header!r} once"
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(_cells(line))
    return rows


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def command_problems(cell: str, commands: dict[str, argparse.ArgumentParser]) -> list[str]:
    """What in a table's command cell the CLI does not have: the sub-command, each ``--flag``, each
    value given for a flag with choices (``--engine flower``, ``--profile-set a\\|b``)."""
    problems = []
    for code in re.findall(r"`([^`]*)`", cell):
        words = code.replace("\\|", "|").split()
        if words[:1] == ["flamingo-sim"]:
            name = words[1]
        elif "flamingo_sim" in words and "-m" in words:  # torchrun ... -m flamingo_sim run ...
            name = words[words.index("flamingo_sim") + 1]
            words = words[words.index("flamingo_sim"):]
        else:
            continue
        parser = commands.get(name)
        if parser is None:
            problems.append(f"{code}: no command {name!r}")
            continue
        options = {o: a for a in parser._actions for o in a.option_strings}
        for i, word in enumerate(words):
            flag = word.strip("[]")
            if not flag.startswith("--"):
                continue
            action = options.get(flag)
            if action is None:
                problems.append(f"{code}: {name} has no option {flag}")
                continue
            value = words[i + 1].strip("[]") if i + 1 < len(words) else ""
            if action.choices is not None and value and not value.isupper() and not value.startswith("-"):
                problems += [f"{code}: {flag} has no choice {v!r}" for v in value.split("|") if v not in action.choices]
    return problems


def test_the_commands_table_is_the_same_in_the_readme_and_the_docs_index() -> None:
    readme = table(README, "| command | what it does |")
    index = table(INDEX, "| command | what it does | page |")
    assert [r[:2] for r in index] == readme


def test_every_command_and_flag_in_the_table_is_the_clis() -> None:
    commands = _subcommands()
    rows = table(README, "| command | what it does |")
    problems = [p for row in rows for p in command_problems(row[0], commands)]
    assert problems == []
    named = {m for row in rows for m in re.findall(r"`flamingo-sim ([\w-]+)", row[0])}
    assert named == set(commands), f"commands missing from the table: {sorted(set(commands) - named)}"
    flags = {f for row in rows for f in re.findall(r"--[\w-]+", row[0])}
    assert {"--nproc", "--jobs", "--engine", "--executors", "--resume"} <= flags


def test_the_check_catches_a_wrong_flag_or_choice() -> None:
    commands = _subcommands()
    assert command_problems("`flamingo-sim run X --engine flowr --jobz 2`", commands) == [
        "flamingo-sim run X --engine flowr --jobz 2: --engine has no choice 'flowr'",
        "flamingo-sim run X --engine flowr --jobz 2: run has no option --jobz",
    ]
    assert command_problems("`flamingo-sim rnu X`", commands) == ["flamingo-sim rnu X: no command 'rnu'"]


def test_the_install_pages_extras_are_pyprojects() -> None:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    rows = table(ROOT / "docs" / "install.md", "| extra | brings | for |")
    assert sorted(r[0].strip("`") for r in rows) == sorted(extras)


def _blocks(path: Path, first_line: str) -> list[str]:
    """The fenced blocks of ``path`` whose first line starts with ``first_line`` (fences paired in order)."""
    blocks, current = [], None
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return [b for b in blocks if b.startswith(first_line)]


def test_the_block_reader_pairs_fences_in_order(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```bash\nrun it\n```\n\ntext\n\n```\npolicy  a\nb\n```\n```text\npolicy  c\n```\n")
    assert _blocks(page, "policy") == ["policy  a\nb", "policy  c"]


@pytest.mark.slow
@pytest.mark.timeout(2400)  # the whole main job: about 40 s idle, several minutes on 2 loaded cores
def test_the_main_jobs_output_blocks_are_what_the_command_prints(tmp_path: Path) -> None:
    head = "policy        time to target"
    blocks = _blocks(README, head) + _blocks(ROOT / "docs" / "quickstart.md", head)
    assert len(blocks) == 2
    env = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "flamingo_sim", "run", "experiments/openimage_mobilenet.yaml", "--out", str(tmp_path / "run")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    # the main job's summary, regenerated: the results file docs/modelling-notes.md quotes for it (heat and
    # memory on, the defaults), exactly on the CPU kind that wrote it, its simulated figures elsewhere
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert_summary_matches(summary, ROOT / "docs" / "results" / "device_limits" / "main_job" / "on.summary.json")
    printed = done.stdout.strip("\n")
    for block in blocks:
        assert block == printed
