"""Pages that say what the code does, checked against the code (issue 32): the report's figures, the
paper's Table 2 figures the reproduce report prints, the source it cites, what ships for trying traces,
and the sensitivity table's relative changes."""

from __future__ import annotations

import re
from pathlib import Path

from flamingo_sim.report.plots import FIGURES
from flamingo_sim.studies.reproduce.paper import SOURCE, TABLE2, TASKS

ROOT = Path(__file__).resolve().parents[1]


def _page(name: str) -> str:
    return (ROOT / name).read_text()


def test_quickstart_lists_every_figure_the_report_draws():
    listed = re.findall(r"^\| `(\w+)\.png/\.svg` \|", _page("docs/quickstart.md"), flags=re.M)
    assert listed == list(FIGURES)


def test_studies_page_gives_the_paper_table2_figures_the_report_prints():
    page = " ".join(_page("docs/studies.md").split())
    assert "not transcribed" not in page
    for task, row in TABLE2.items():
        dataset, model = TASKS[task]
        assert f"{dataset}/{model.split()[0]} {row.speedup}x and {row.energy_efficiency}x" in page, task
        assert f"{row.target_accuracy_pct} %" in page, task


def test_the_reproduce_report_cites_the_paper_not_a_file_the_repository_lacks():
    assert "Flamingo: A User-Centric System for Fast and Energy-Efficient DNN Training on Smartphones" in SOURCE
    assert "Tables 1-3" in SOURCE
    for folder in ("studies", "report"):
        for path in (ROOT / "flamingo_sim" / folder).rglob("*.py"):
            assert "SPEC.md" not in path.read_text(), path


def test_readme_says_what_ships_for_trying_traces():
    readme = " ".join(_page("README.md").split())
    assert "dump in the same layouts ships" not in readme
    shipped = re.search(r"a trace set prepared from one ships \(`([\w/]+)`\)", readme)
    assert shipped and (ROOT / shipped.group(1) / "clients.parquet").is_file()
    assert "`flamingo-sim synth-greenhub` generates a synthetic dump" in readme


def test_sensitivity_docs_name_the_relative_change_columns():
    page = _page("docs/studies.md")
    assert "`speedup_rel_change`" in page and "`energy_efficiency_rel_change`" in page and "value / reference - 1" in page
