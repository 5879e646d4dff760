"""docs/benchmarks.md's round-overhead section quotes benchmarks/results/round_overhead.json, number for number (issue 52)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "round_overhead.json"
PAGE = ROOT / "docs" / "benchmarks.md"
START = "<!-- round-overhead-table: written from benchmarks/results/round_overhead.json; tests/test_round_overhead_page.py checks it -->\n"
END = "\n<!-- /round-overhead-table -->"
#: the stage rows the page shows (the file has them all)
STAGES = ("selection", "pricing", "  policy", "  limits (heat, memory)", "  network transfers", "  settling", "battery", "clock", "training",
          "  SGD steps", "  minibatch indices", "  data", "aggregation", "evaluation", "metrics", "  record", "  writes", "checkpoint",
          "unaccounted")


def _ratio(row: dict, key: str) -> str:
    low, high = row["spread"][key]
    return f"{row[key]:.2f}x ({low:.2f}-{high:.2f})"


def round_overhead_table(results: dict) -> str:
    """The page's block, written from the results file (``python tests/test_round_overhead_page.py`` prints it)."""
    summary, loads = results["summary"], [load[0] for load in results["load_average"]]
    lines = [f"{results['clients']:,} clients, baseline policy, over-commit 1.0, 1 torch thread, {results['cores']} cores at load average "
             f"{min(loads):.2f}-{max(loads):.2f}; medians over rotations (min-max):", "",
             "| shape | device models | rotations | rounds (long - short) | whole ms | bare ms | ratio | paired | CPU | best |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for shape in results["shapes"]:
        long, short = results["rounds"][shape]
        for variant in results["variants"][shape]:
            row = summary[f"{shape} {variant}"]
            lines.append(f"| {shape} | {variant} | {row['rotations']} | {long} - {short} | {row['whole_ms']:.1f} | {row['bare_ms']:.1f} | "
                         f"{_ratio(row, 'ratio')} | {_ratio(row, 'paired_ratio')} | {_ratio(row, 'cpu_ratio')} | {row['best_ratio']:.2f}x |")
    for shape in results["shapes"]:
        variants = results["variants"][shape]
        lines += ["", f"Stages of `{shape}`, ms a round, wall / CPU (median over rotations):", "",
                  "| stage | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
        for stage in STAGES:
            name = f"&nbsp;&nbsp;{stage.strip()}" if stage.startswith(" ") else stage
            cells = [f"{summary[f'{shape} {v}']['stages_ms'][stage]:.2f} / {summary[f'{shape} {v}']['stages_cpu_ms'][stage]:.2f}" for v in variants]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_the_page_quotes_the_results_file():
    results = json.loads(RESULTS.read_text())
    assert not results["smoke"] and results["rotations"] >= 4 and "mlp:100" in results["shapes"]
    page = PAGE.read_text()
    quoted = page[page.index(START) + len(START): page.index(END)]
    assert quoted == round_overhead_table(results)


def test_the_results_file_holds_every_model_on_and_each_off_in_turn():
    """The issue's workload (the first shape) with every device model on, each off in turn and all off; every other shape
    at least on and off; each round at least its training."""
    results = json.loads(RESULTS.read_text())
    first, *others = results["shapes"]
    assert results["variants"][first] == ["all on", "thermal off", "memory off", "network off", "all off"]
    for shape in others:
        assert {"all on", "all off"} <= set(results["variants"][shape]), shape
    for shape in results["shapes"]:
        for variant in results["variants"][shape]:
            row = results["summary"][f"{shape} {variant}"]
            assert row["bare_ms"] > 0 and row["paired_ratio"] > 1.0, (shape, variant)  # the whole round holds its training


if __name__ == "__main__":
    print(round_overhead_table(json.loads(RESULTS.read_text())))
