"""Every notebook runs headless, top to bottom, on a small run, and draws its figures."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
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


def _jupyter() -> str:
    """The ``jupyter`` command of this environment (the interpreter's own bin directory first)."""
    found = shutil.which("jupyter", path=str(Path(sys.executable).parent)) or shutil.which("jupyter")
    assert found, "no jupyter command: the test extra (nbclient) installs it"
    return found


def test_the_documented_notebook_command_comes_with_the_test_extra():
    """docs/quickstart.md runs the notebooks headless with ``jupyter execute``: nbclient's command,
    which the ``test`` extra installs (``jupyter nbconvert`` needs nbconvert, which no extra has)."""
    page = (ROOT / "docs" / "quickstart.md").read_text()
    assert re.findall(r"^jupyter (\S+) notebooks/", page, flags=re.MULTILINE) == ["execute"]
    providers = {ep.dist.name for ep in entry_points(group="console_scripts", name="jupyter-execute") if ep.dist is not None}
    assert providers == {"nbclient"}
    test_extra = re.search(r"^test = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), flags=re.MULTILINE)
    assert test_extra and '"nbclient' in test_extra.group(1)
    done = subprocess.run([_jupyter(), "execute", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "execute notebook files" in done.stdout


@pytest.mark.slow
def test_jupyter_execute_runs_a_notebook_as_documented(tmp_path):
    notebook = tmp_path / "traces.ipynb"  # a copy: jupyter execute without --inplace writes nothing, but be sure
    shutil.copy(NOTEBOOKS / "traces.ipynb", notebook)
    env = {**os.environ, "JUPYTER_PREFER_ENV_PATH": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([_jupyter(), "execute", str(notebook)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["traces.ipynb"]  # nothing written beside it
