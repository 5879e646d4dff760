"""docs/plugins.md, the plug-in guide (issue 42): its contract tables are the code's (generated, every
field with a meaning), and its minimal package, built from the page's own text, installs and runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

from flamingo_sim.cli import main
from flamingo_sim.fl.contract_reference import END, START, contracts_markdown, fields_of

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "plugins.md"
#: A file of the guide's package: a line naming it in backticks, then its fenced block.
FILE = re.compile(r"^`(flamingo-charging/[\w./-]+)`:\n\n```\w*\n(.*?)\n```$", re.M | re.S)


def test_the_contract_tables_are_the_codes():
    page = PAGE.read_text()
    block = page[page.index(START) + len(START) + 1: page.index(END)]
    assert block == contracts_markdown(), "docs/plugins.md is behind the code: python -m flamingo_sim.fl.contract_reference docs/plugins.md"
    for name in ("TaskRequest", "TaskOutcome", "CoordinatorView", "RoundRecord", "EngineOptions", "Unit", "Dispatch"):
        assert f"#### `{name}`" in block
    for field in ("temperature_c", "charging", "battery_pct", "decline_reason", "battery_pct_at"):
        assert f"| `{field}" in block


def test_every_field_the_guide_lists_has_a_meaning():
    from flamingo_sim.devices.policies import base
    from flamingo_sim.fl.metrics.summary import COLUMNS
    from flamingo_sim.fl.runner import engines, unit_files
    from flamingo_sim.fl.runner.executors import base as executors
    from flamingo_sim.fl.sim import records, simulation
    from flamingo_sim.fl.strategy.base import CoordinatorView

    for cls, meanings in ((base.TaskRequest, None), (base.TaskOutcome, None), (base.Ladders, None), (base.Priced, None),
                          (CoordinatorView, None), (engines.EngineOptions, None), (simulation.RoundPlan, None), (records.RoundRecord, COLUMNS),
                          (unit_files.Unit, None), (executors.Dispatch, None)):
        missing = [f.name for f in fields_of(cls, meanings) if not f.meaning]
        assert not missing, f"{cls.__qualname__}: no #: comment for {missing}"


def test_the_guides_package_builds_installs_and_runs(tmp_path, monkeypatch, capsys):
    """Every file of the package exactly as the page shows it; the page's commands, with the install made
    offline (no build isolation, no dependencies: flamingo-sim is the one under test) into a folder of its own."""
    page = PAGE.read_text()
    files = dict(FILE.findall(page))
    assert sorted(files) == ["flamingo-charging/experiment.yaml", "flamingo-charging/pyproject.toml",
                             "flamingo-charging/src/flamingo_charging/__init__.py", "flamingo-charging/src/flamingo_charging/policy.py",
                             "flamingo-charging/src/flamingo_charging/selector.py"]
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text + "\n")
    commands = re.search(r"```bash\n(pip install -e \./flamingo-charging\n.*?)\n```", page, re.S)
    assert commands is not None
    install, run, report = commands.group(1).splitlines()
    assert (install, run, report) == ("pip install -e ./flamingo-charging", "flamingo-sim run flamingo-charging/experiment.yaml --out runs/charging",
                                      "flamingo-sim report runs/charging")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "--target", str(site),
                    "./flamingo-charging"], cwd=tmp_path, check=True, capture_output=True)
    assert (site / "flamingo_charging" / "policy.py").is_file()
    monkeypatch.syspath_prepend(str(site))  # as the install puts it on the path: found by its entry points alone
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    assert main(run.split()[1:]) == 0
    summary = capsys.readouterr().out
    assert re.search(r"^charging\s", summary, re.M) and "flamingo_charging" not in summary  # its entry-point name
    metrics = pd.read_parquet(tmp_path / "runs" / "charging" / "metrics.parquet")
    mine = metrics[metrics["policy"] == "charging"]
    assert {"declined_not_charging", "declined_too_warm"} <= set(metrics.columns)
    assert len(mine) == 3 and (mine[[c for c in metrics.columns if c.startswith("declined_")]].sum(axis=1) == mine["dropped_declined"]).all()
