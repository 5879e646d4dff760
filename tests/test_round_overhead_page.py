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


def _spread(row: dict, key: str, digits: int = 2) -> str:
    """A ratio's spread over the rotations, as the page words it."""
    low, high = row["spread"][key]
    return f"{low:.{digits}f}-{high:.{digits}f}x"


def _section() -> str:
    """The page's section on the round against its training, its whitespace folded (line breaks aside)."""
    page = PAGE.read_text()
    return " ".join(page[page.index("## The round against its training"):].split("\n## ")[0].split())


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


def _mlp(results: dict) -> tuple[dict, dict]:
    """The issue's workload (mlp:100) with every device model on, and with all off: a results file's summary rows."""
    return results["summary"]["mlp:100 all on"], results["summary"]["mlp:100 all off"]


def _cpu(results: dict, key: str, stage: str) -> float:
    return results["summary"][key]["stages_cpu_ms"][stage]


def round_overhead_prose(results: dict) -> list[str]:
    """The section's sentences that quote the results file, as the page words them (its running text, line breaks
    aside): each built here from the file, so that a figure that moves with a new measurement fails until the page
    says it again (``python tests/test_round_overhead_page.py`` prints them)."""
    summary = results["summary"]
    on, off = _mlp(results)

    extra = _extra
    key = "mlp:100 all on"
    sentences = [
        f"With every device model on, the MLP round is {on['paired_ratio']:.3f}x its bare training (paired, "
        f"{_spread(on, 'paired_ratio', 3)} over the rotations; {on['cpu_ratio']:.3f}x in CPU time), and {off['paired_ratio']:.3f}x with "
        f"all of them off ({_spread(off, 'paired_ratio', 3)}; CPU {off['cpu_ratio']:.3f}x)",
        f"The ratio from separate processes, the issue's own method, reads {on['ratio']:.2f}x and {off['ratio']:.2f}x, with spreads of "
        f"{_spread(on, 'ratio')} and {_spread(off, 'ratio')}",
        f"In CPU time a round holds {extra(on)} (all on) and {extra(off)} (all off) that the bare loop does not",
        f"gathering the cohort's data {_cpu(results, key, '  data'):.1f} ms and drawing its minibatch indices "
        f"{_cpu(results, key, '  minibatch indices'):.1f} ms",
        f"the pricing {_cpu(results, key, 'pricing'):.1f} ms (the policy {_cpu(results, key, '  policy'):.1f} ms, heat and memory "
        f"{_cpu(results, key, '  limits (heat, memory)'):.1f} ms, the network's transfers {_cpu(results, key, '  network transfers'):.1f} ms, "
        f"settling {_cpu(results, key, '  settling'):.1f} ms)",
        f"the per-round files {_cpu(results, key, '  writes'):.1f} ms",
        f"the battery {_cpu(results, key, 'battery'):.1f} ms; the checkpoint {_cpu(results, key, 'checkpoint'):.1f} ms; the round's record "
        f"{_cpu(results, key, '  record'):.1f} ms; selection {_cpu(results, key, 'selection'):.1f} ms; evaluation "
        f"{_cpu(results, key, 'evaluation'):.1f} ms; the clock {_cpu(results, key, 'clock'):.1f} ms",
        f"FedAvg ({_cpu(results, key, 'aggregation'):.1f} ms) is the round's own and the bare loop's alike",
    ]
    others = {s: (summary[f"{s} all on"], summary[f"{s} all off"]) for s in results["shapes"][1:]}
    if "mlp:1000" in others:
        big_on, big_off = others["mlp:1000"]
        sentences.append(f"Cohorts of 1,000 read {big_on['paired_ratio']:.2f}x on and {big_off['paired_ratio']:.2f}x off (paired)")
    if "mobilenet:100" in others:
        net_on, net_off = others["mobilenet:100"]
        sentences.append(f"MobileNetV2 reads {net_on['paired_ratio']:.2f}x on and {net_off['paired_ratio']:.2f}x off")
    return sentences


BEFORE = ROOT / "benchmarks" / "results" / "round_overhead_before_2cores.json"


SIXTH = ROOT / "benchmarks" / "results" / "round_overhead_s6_2cores.json"
SEVENTH = ROOT / "benchmarks" / "results" / "round_overhead_s7_2cores.json"


def _extra(row: dict) -> str:
    """The CPU a round holds beyond the bare loop."""
    return f"{row['paired_whole_cpu_ms'] - row['paired_cpu_ms']:.1f} ms"


def sixth_prose(sixth: dict, seventh: dict) -> str:
    """The sentence comparing the measurement at the end of issue 52's sixth session with the seventh's."""
    (b_on, b_off), (a_on, a_off) = _mlp(sixth), _mlp(seventh)

    def files(row: dict) -> str:
        return f"{row['stages_cpu_ms']['  writes'] + row['stages_cpu_ms']['checkpoint']:.2f} ms"

    return (f"At the end of the sixth session (commit c1cc052) the paired ratios were {b_on['paired_ratio']:.3f}x on and "
            f"{b_off['paired_ratio']:.3f}x off, the CPU a round holds beyond the bare loop {_extra(b_on)} on and {_extra(b_off)} off "
            f"({_extra(a_on)} and {_extra(a_off)} at the end of the seventh), and the per-round files and the checkpoint took "
            f"{files(b_on)} of CPU a round on the round's path with the models on ({files(a_on)} at the end of the seventh)")


def seventh_prose(seventh: dict, results: dict) -> str:
    """The sentence comparing the measurement at the end of issue 52's seventh session with this one (the eighth's)."""
    (b_on, b_off), (a_on, a_off) = _mlp(seventh), _mlp(results)

    def data(row: dict) -> str:
        return f"{row['stages_cpu_ms']['  data']:.2f} ms"

    return (f"At the end of the seventh session (commit fb40cb1) the paired ratios were {b_on['paired_ratio']:.3f}x on and "
            f"{b_off['paired_ratio']:.3f}x off ({a_on['paired_ratio']:.3f}x and {a_off['paired_ratio']:.3f}x now), the CPU a round holds "
            f"beyond the bare loop {_extra(b_on)} on and {_extra(b_off)} off ({_extra(a_on)} and {_extra(a_off)} now), and gathering the "
            f"cohort's data took {data(b_on)} of CPU a round with the models on and {data(b_off)} with them off ({data(a_on)} and "
            f"{data(a_off)} now)")


def before_prose(before: dict, results: dict) -> str:
    """The sentence comparing the measurement before issue 52's fifth session with this one."""
    (b_on, b_off), (a_on, _) = _mlp(before), _mlp(results)
    loads = [load[0] for load in before["load_average"]]
    return (f"Before the fifth session's changes (commit 015852d, load average {min(loads):.2f}-{max(loads):.2f}), the paired ratios were "
            f"{b_on['paired_ratio']:.3f}x on and {b_off['paired_ratio']:.3f}x off, the bare loop then summing FedAvg in float32; the "
            f"checkpoint took {b_on['stages_cpu_ms']['checkpoint']:.2f} ms of CPU a round with the models on "
            f"({a_on['stages_cpu_ms']['checkpoint']:.2f} ms now) and the minibatch indices "
            f"{b_on['stages_cpu_ms']['  minibatch indices']:.2f} ms ({a_on['stages_cpu_ms']['  minibatch indices']:.2f} ms now)")


ZEN3 = ROOT / "benchmarks" / "results" / "round_overhead_zen3_2cores.json"
COLD = ROOT / "benchmarks" / "results" / "cold_calls_2cores.json"
#: the stages of a round outside the minibatch indices, the cohort's data and the policy's ladder (and outside training)
REST = ("selection", "  limits (heat, memory)", "  network transfers", "  settling", "battery", "clock", "evaluation", "metrics", "checkpoint",
        "unaccounted")




def zen3_prose(zen3: dict, results: dict) -> str:
    """The sentence quoting the issue's workload measured on the second machine (Zen 3) beside this file's (Zen 5)."""
    (on, off), (first_on, first_off) = _mlp(zen3), _mlp(results)
    return (f"the issue's workload reads {on['paired_ratio']:.3f}x with every device model on and {off['paired_ratio']:.3f}x with all off "
            f"(paired; {_spread(on, 'paired_ratio', 3)} and {_spread(off, 'paired_ratio', 3)} over {on['rotations']} rotations): its bare loop "
            f"is slower ({on['paired_cpu_ms']:.1f} ms of CPU a round against {first_on['paired_cpu_ms']:.1f} ms) and so is the rest of the "
            f"round ({_extra(on)} and {_extra(off)} of CPU beyond the bare loop, against {_extra(first_on)} and {_extra(first_off)})")


def cold_prose(cold: dict) -> str:
    """The sentence quoting benchmarks/cold_calls.py's file: each call warm and right after training, then the five together."""
    labels = ("the tallies' update", "the cohort's minibatch indices", "a new client's data", "the battery's 16 ticks", "the policy's ladder")
    med = list(cold["median_us"].values())
    assert len(med) == len(labels)
    calls = "; ".join(f"{label} {m['warm']:,.0f} us warm and {m['after training']:,.0f} us after training" for label, m in zip(labels, med))
    total = cold["total_median_ms"]
    warm, trained, idle = total["warm"], total["after training"], total["after idle"]
    return (f"{calls}; the five together {warm:.2f} ms warm, {trained:.2f} ms right after training ({trained / warm:.1f}x) and "
            f"{idle:.2f} ms after an idle pause as long ({idle / warm:.1f}x)")


def floor_prose(results: dict) -> str:
    """The sentence on what the goal with the models off would ask of the round (this file: the issue's workload, all off)."""
    _, off = _mlp(results)
    st = off["stages_cpu_ms"]
    allowed = 0.05 * off["paired_cpu_ms"]
    fixed = st["  minibatch indices"] + st["  data"] + st["  policy"]
    rest = sum(st[k] for k in REST)
    return (f"With the device models off, 1.05x allows a round {allowed:.1f} ms of CPU beyond its bare training (a twentieth of its "
            f"{off['paired_cpu_ms']:.1f} ms); it holds {_extra(off)}. Of the stages, {fixed:.1f} ms are the minibatch indices "
            f"({st['  minibatch indices']:.1f} ms) and the cohort's data ({st['  data']:.1f} ms), drawn from each client's own random "
            f"streams, whose numbers the issue keeps, and the policy's ladder ({st['  policy']:.1f} ms), code the mutation records pin; "
            f"the rest, {rest:.1f} ms (selection, heat and memory, the transfers, settling, the battery, the clock, evaluation, the record, "
            f"the writes, the checkpoint and what no stage covers), would have to fall to {allowed - fixed:.1f} ms")


def test_the_second_machine_the_cold_calls_and_the_floor_are_quoted_from_their_files():
    """Issue 52's ninth session: the issue's workload on a second CPU, five of the round's calls warm and cold, and what the
    goal with the models off asks of the rest of the round, each sentence built from its results file."""
    section = _section()
    zen3, cold, results = (json.loads(f.read_text()) for f in (ZEN3, COLD, RESULTS))
    assert not zen3["smoke"] and zen3["rotations"] >= 4 and zen3["variants"]["mlp:100"] == ["all on", "all off"]
    assert not cold["smoke"] and cold["repeats"] >= 20 and cold["cohort"] == 100 and cold["local_steps"] == 20
    missing = [s for s in (zen3_prose(zen3, results), cold_prose(cold), floor_prose(results)) if s not in section]
    assert not missing, missing
    assert "benchmarks/results/round_overhead_zen3_2cores.json" in section and "benchmarks/results/cold_calls_2cores.json" in section


def test_the_sections_sentences_quote_the_results_file():
    section = _section()
    results = json.loads(RESULTS.read_text())
    seventh = json.loads(SEVENTH.read_text())
    sentences = [*round_overhead_prose(results), before_prose(json.loads(BEFORE.read_text()), results),
                 sixth_prose(json.loads(SIXTH.read_text()), seventh), seventh_prose(seventh, results)]
    missing = [s for s in sentences if s not in section]
    assert not missing, missing


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
    print()
    print("\n".join(round_overhead_prose(json.loads(RESULTS.read_text()))))
    print(before_prose(json.loads(BEFORE.read_text()), json.loads(RESULTS.read_text())))
    print(sixth_prose(json.loads(SIXTH.read_text()), json.loads(SEVENTH.read_text())))
    print(seventh_prose(json.loads(SEVENTH.read_text()), json.loads(RESULTS.read_text())))
    print(zen3_prose(json.loads(ZEN3.read_text()), json.loads(RESULTS.read_text())))
    print(cold_prose(json.loads(COLD.read_text())))
    print(floor_prose(json.loads(RESULTS.read_text())))
