"""docs/population.md quotes benchmarks/results/population_2cores.json, number for number."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "population_2cores.json"
PAGE = ROOT / "docs" / "population.md"


def _cell(row: dict, key: str) -> str:
    return f"{row[key]:.1f} ({row[key + '_min']:.1f}-{row[key + '_max']:.1f})"


def population_table(results: dict) -> str:
    """The page's table, written from the results file (``python tests/test_population_page.py`` prints it)."""
    new = results["new"]
    policies = [p for p in ("baseline", "flamingo") if p in new]
    sizes = sorted({int(n) for p in policies for n in new[p]})
    repeats = len(new[policies[0]][str(sizes[0])]["runs"])
    names = {"baseline": "baseline", "flamingo": "Flamingo"}
    head = ["clients", *[f"{names[p]}: CPU ms a round" for p in policies], *[f"{names[p]}: wall ms a round" for p in policies],
            "peak memory, GB (" + " / ".join(names[p] for p in policies) + ")"]
    lines = [f"Median (min-max) of {repeats} runs each, {results['cores']} cores at load average {results['load']}, "
             f"rounds {results['short_rounds']}-{results['long_rounds']}, cohort {', '.join(results['cohort'])}:", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in sizes:
        rows = [new[p][str(n)] for p in policies]
        cells = [f"{n:,}", *[_cell(r, "round_cpu_ms") for r in rows], *[_cell(r, "round_ms") for r in rows],
                 " / ".join(f"{r['peak_rss_mb'] / 1024:.2f}" for r in rows)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_the_page_quotes_the_results_file():
    results = json.loads(RESULTS.read_text())
    page = PAGE.read_text()
    start, end = "<!-- population-table: written from benchmarks/results/population_2cores.json; tests/test_population_page.py checks it -->\n", "\n<!-- /population-table -->"
    quoted = page[page.index(start) + len(start): page.index(end)]
    assert quoted == population_table(results)


def test_the_largest_population_is_measured_and_within_the_documented_memory():
    results = json.loads(RESULTS.read_text())
    for policy, rows in results["new"].items():
        assert "10000000" in rows, policy
        assert rows["10000000"]["peak_rss_mb"] < 2.8 * 1024, policy  # under the 2.8 GB of the dense version


if __name__ == "__main__":
    print(population_table(json.loads(RESULTS.read_text())))
