"""The documentation site's sources: every page in the nav, the configuration page's generated
tables, and the docstrings' Sphinx roles turned into cross-references. (``.ci/run`` builds the
site itself with ``mkdocs build --strict``.)"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from flamingo_sim.fl.config_reference import MARKER

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    return [p for v in node for p in _nav_pages(v)]


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages
    assert len(nav) == len(set(nav))


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page(src_uri: str):
    return SimpleNamespace(file=SimpleNamespace(src_uri=src_uri))


def test_the_build_puts_the_generated_reference_into_the_configuration_page():
    source = (DOCS / "configuration.md").read_text()
    assert source.count(MARKER) == 1
    built = _hooks().on_page_markdown(source, page=_page("configuration.md"), config={}, files=None)
    assert MARKER not in built
    assert "| `fl.participants_per_round` | int | `100` | `>= 1` | K: the client updates aggregated each round. |" in built
    other = _hooks().on_page_markdown(f"x\n{MARKER}\n", page=_page("gpu.md"), config={}, files=None)
    assert other == f"x\n{MARKER}\n"  # only the configuration page is touched
    with pytest.raises(ValueError, match="configuration.md: expected the line <!-- config-reference --> exactly once"):
        _hooks().on_page_markdown("# no marker\n", page=_page("configuration.md"), config={}, files=None)


def _loader_with_extension():
    """A griffe loader with docs/griffe_sphinx_roles.py, as the site's build has it."""
    griffe = pytest.importorskip("griffe")  # the docs extra
    spec = importlib.util.spec_from_file_location("griffe_sphinx_roles", DOCS / "griffe_sphinx_roles.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return griffe.GriffeLoader(search_paths=[str(ROOT)], extensions=griffe.load_extensions(module.SphinxRoles()))


def test_sphinx_roles_become_optional_cross_references():
    loader = _loader_with_extension()
    records = loader.load("flamingo_sim.fl.sim.records")
    text = records.docstring.value
    assert ":class:`" not in text and ":meth:`" not in text
    # a full path keeps its target; a bare name is found beside the object (here, in its module)
    assert '<autoref identifier="flamingo_sim.fl.sim.simulation.Simulation.finish_round" optional>' in text
    assert re.search(r'<autoref identifier="flamingo_sim\.fl\.sim\.records\.RoundRecord" optional><code>RoundRecord</code></autoref>', text)


def test_sphinx_attribute_comments_become_docstrings():
    loader = _loader_with_extension()
    config = loader.load("flamingo_sim.fl.config")
    overcommit = config["FLConfig"].members["overcommit"]
    assert overcommit.docstring.value == "Select ceil(K x overcommit) clients, keep the K fastest (FedScale's over-commitment)."
    reentry = config["TracesConfig"].members["reentry_pct"]  # two comment lines, joined
    assert reentry.docstring.value.startswith("Level (%) at which an offline client comes back") and reentry.docstring.value.endswith("the paper does not have).")


def test_gpu_page_quotes_the_h200_run_from_its_results_file():
    """docs/gpu.md's H200 table is the one benchmarks/gpu_run.py wrote (benchmarks/results/gpu_run_h200.json)."""
    import json

    doc = json.loads((ROOT / "benchmarks/results/gpu_run_h200.json").read_text())
    page = (ROOT / "docs/gpu.md").read_text()
    assert doc["gpu"] == "NVIDIA H200" and "NVIDIA H200" in page
    for policy, rate in doc["samples_per_s"].items():
        row = f"| {policy} | {rate:,.0f} | {doc['s_per_paper_round'][policy]:.2f} |"
        assert row in page, row


def test_the_scaling_pages_quote_their_results_files():
    """docs/studies.md and docs/scaling-out.md quote the figures the benchmarks wrote (benchmarks/results)."""
    import json
    import statistics

    results = ROOT / "benchmarks" / "results"
    studies = (ROOT / "docs/studies.md").read_text()
    log = (results / "studies_2cores.log").read_text()
    for line in ("--jobs 1:  1186.0 s wall,    93.8 s CPU", "--jobs 2:   311.8 s wall,    13.2 s CPU + 76.5 s in its workers",
                 "workers' start-up 48.88, 0.22 s; first unit sent at 101.7 s, last done 39.2 s before the end; 9 of 12 units reused"):
        assert line in log, line
    assert "| `--jobs 1` | 1186.0 s | 93.8 s | - |" in studies and "| `--jobs 2` | 311.8 s | 13.2 s + 76.5 s in its workers |" in studies
    simulated = json.loads((results / "studies_2cores_simulated.json").read_text())
    for name, label in (("reproduce --quick", "`reproduce --quick`"), ("reproduce (full: 100 rounds, 3 seeds)", "`reproduce` (100 rounds, 3 seeds)"),
                        ("reproduce, 100 rounds, 16 seeds", "`reproduce`, 100 rounds, 16 seeds")):
        v = simulated[name]
        row = f"| {label} | {v['units']} | " + " | ".join(f"{v['jobs'][str(j)]['speedup']:.2f}x" for j in (1, 2, 4, 8, 16)) + " |"
        assert row in studies, row
    scaling = (ROOT / "docs/scaling-out.md").read_text()
    speed = json.loads((results / "distributed_speed_2cores.json").read_text())["speed"]
    for case, r in speed.items():
        m = {k: statistics.median(v) for k, v in r["round_s"].items()}
        c = {k: statistics.median(v) for k, v in r["command_s"].items()}
        row = (f"| {case} | {m['2x1']:.2f} s | {m['1x1']:.2f} s | {m['1x2']:.2f} s | {statistics.median(r['ratio']):.2f}x | "
               f"{c['2x1']:.0f} s / {c[r['best_single']]:.0f} s: {r['command_ratio']:.2f}x |")
        assert row in scaling, row
