"""``reproduce --quick`` and the full ``reproduce`` do not share a default folder, and a study refused
because its folder holds a run of another config says to use another ``--out``."""

from __future__ import annotations

import json

import yaml

from flamingo_sim.cli import build_parser, main
from flamingo_sim.config import to_mapping
from flamingo_sim.fl.compose import resolve_config
from flamingo_sim.studies import cli as studies_cli
from flamingo_sim.studies.reproduce.run import experiment_path, task_overrides


def test_quick_and_full_default_to_different_folders(monkeypatch):
    seen = []
    monkeypatch.setattr("flamingo_sim.studies.reproduce.reproduce", lambda out, **kw: seen.append((out, kw["again"])) or _md(out))
    for argv in (["reproduce", "--quick"], ["reproduce"], ["reproduce", "--quick", "--out", "x"]):
        args = build_parser().parse_args(argv)
        args.argv = argv[:]
        studies_cli._reproduce(args)
    assert [out for out, _ in seen] == ["runs/reproduce-quick", "runs/reproduce", "x"]
    assert [again for _, again in seen] == ["flamingo-sim reproduce --quick --out runs/reproduce-quick",
                                            "flamingo-sim reproduce --out runs/reproduce", "flamingo-sim reproduce --quick --out x"]


def _md(out):
    from pathlib import Path

    return Path(out) / "report.md"


def test_a_full_reproduce_into_a_quick_ones_folder_suggests_another_out(tmp_path, capsys):
    """The folder as ``reproduce --quick`` left it (its study file and the run's config); then the full one."""
    out = tmp_path / "repro"
    task = "openimage_mobilenet"
    run_dir = out / "runs" / task
    run_dir.mkdir(parents=True)
    (out / "study.json").write_text(json.dumps({"command": "reproduce", "runs": [task]}))
    quick = resolve_config(experiment_path(task), task_overrides(task, (), True), 1)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(to_mapping(quick), sort_keys=False))
    assert main(["reproduce", "--out", str(out), "--tasks", task, "--seeds", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert err.startswith(f"flamingo-sim reproduce: error: reproduce: run {task}: {run_dir}: the experiment config differs "
                          "from the one this run started with in fl.rounds (40 -> 100), fl.eval_every"), err
    assert err.endswith("; or start a new reproduce with another --out"), err
