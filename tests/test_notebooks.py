"""Every notebook runs headless, top to bottom, on a small run, and draws its figures."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.report_runs import ROOT, small_runs

NOTEBOOKS = ROOT / "notebooks"
#: Notebook -> (parameter it takes, figures it must draw).
EXPECTED = {
    "time_to_accuracy.ipynb": ("RUN_DIR", 4),
    "client_availability.ipynb": ("RUN_DIR", 2),
    "traces.ipynb": ("TRACES_DIR", 4),
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return small_runs(tmp_path_factory)[0]


def test_every_notebook_is_tested_and_stored_without_outputs():
    assert {p.name for p in NOTEBOOKS.glob("*.ipynb")} == set(EXPECTED)
    for name in EXPECTED:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{name}: stored with outputs"


def _set_parameter(nb: nbformat.NotebookNode, name: str, value: str) -> None:
    cell = next(c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", []))
    assert cell.source.startswith(f"{name} = None"), "the parameters cell must default to None"
    cell.source = f"{name} = {value!r}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_executes_and_draws_its_figures(name, run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "1")  # this venv's kernelspec before a user-level one
    param, n_figures = EXPECTED[name]
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    _set_parameter(nb, param, str(run_dir if param == "RUN_DIR" else ROOT / "traces" / "synthetic"))
    # the kernel is ipykernel's "python3", started with this interpreter (jupyter_client swaps in sys.executable)
    NotebookClient(nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(tmp_path)}}).execute()
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) == n_figures, f"{name}: drew {len(images)} figures, expected {n_figures}"
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
