"""docs/paper.md quotes its run figures from committed results files: every generated block and value equals
what its file holds (re-rendered), the page's claims about the walk hold in the file, and the figures kept from the
earlier target rule say so."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from flamingo_sim.studies.reproduce.why import DOC_BLOCK, DOC_VALUE, fill_doc

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RESULTS = DOCS / "results"
PAGE = DOCS / "paper.md"


def load(name: str):
    path = RESULTS / name
    if path.suffix == ".csv":
        with path.open() as f:
            return [{k: (float(v) if k.endswith(("_change", "speedup")) and v else v) for k, v in row.items()}
                    for row in csv.DictReader(f)]
    return json.loads(path.read_text())


def test_every_generated_block_is_what_its_file_holds():
    page = PAGE.read_text()
    blocks, values = DOC_BLOCK.findall(page), DOC_VALUE.findall(page)
    assert len(blocks) >= 5 and len(values) >= 3
    assert all(b[4].strip() for b in blocks), "an empty generated block: run fill_doc on the page"
    assert fill_doc(page, load) == page, "docs/paper.md differs from its results files: re-render it with fill_doc"


def test_a_changed_file_fails_the_page():
    page = PAGE.read_text()

    def altered(name: str):
        data = load(name)
        if name.endswith("attribution.json"):
            data["openimage_mobilenet"][-1]["speedup"] *= 1.5
        return data

    assert fill_doc(page, altered) != page


def test_the_pages_claims_about_the_walk_hold_in_its_file():
    walk = load("reproduce_full_paper/attribution.json")
    for task in ("openimage_mobilenet", "openimage_shufflenet"):  # exploration the largest step, the charge state next
        factors = {s["step"]: abs(math.log(s["speedup_factor"])) for s in walk[task] if s["speedup_factor"]}
        ranked = sorted(factors, key=factors.get, reverse=True)
        assert ranked[:2] == ["exploration", "charge_state"], (task, factors)
    speech = [s["speedup_factor"] for s in walk["speech_resnet34"] if s["speedup_factor"]]
    assert len(speech) == 5 and all(0.92 <= f <= 1.08 for f in speech), speech  # no reading moves Speech by more than 8 %
    for task, steps in walk.items():  # the paper's literal target has no ratio, as the page says
        assert steps[0]["speedup"] is None and steps[0]["missed"], task


def test_no_figure_from_the_earlier_target_rule_is_left():
    """The tables measured under the earlier raw target rule (no results file held them) are gone: the
    readings are quoted from the readings grid's files instead."""
    page = PAGE.read_text()
    assert "4.16x" not in page and "earlier raw target rule" not in page


@pytest.mark.parametrize("name", ["reproduce_quick/attribution.json", "reproduce_quick_paper/tables.json", "reproduce_full/tables.json",
                                  "sensitivity_quick/sensitivity.csv",
                                  "reproduce_full_paper/attribution.json", "reproduce_full_paper/tables.json", "reproduce_full_paper/mechanisms.json",
                                  *[str(p.relative_to(RESULTS)) for p in sorted((RESULTS / "readings_main_job").rglob("*.*"))]])
def test_results_files_name_no_machine_path(name):
    text = (RESULTS / name).read_text()
    assert "/tmp/" not in text and "/work/" not in text and "/home/" not in text


def test_a_points_block_renders_each_point_from_its_summary():
    from flamingo_sim.studies.reproduce.why import points_md

    rows = [{"knob": "reference", "value": ""}, {"knob": "policy.exploration", "value": "per_request"}, {"knob": "policy.exploration", "value": "none"}]
    seeds = {"0": {"rounds": 100}, "1": {"rounds": 100}}

    def pol(speedup, lost, energy_j, exploration=None):
        return {"speedup": speedup, "speedup_ci": None if speedup is None else [speedup - 0.5, speedup + 0.5], "energy_efficiency": 2.0, "energy_efficiency_ci": None,
                "clients_lost": lost, "total_energy_j": energy_j, "exploration": exploration, "per_seed": seeds}

    summaries = {
        "reference": {"policies": {"baseline": pol(None, 1870.0, 66.8e6), "flamingo": pol(4.16, 322.4, 8.9e6, {"rounds": 14.666, "per_seed": {"0": {"rounds": 14}, "1": {"rounds": 15}}})}},
        "policy.exploration=per_request": {"policies": {"baseline": pol(None, 1870.0, 66.8e6),
                                                        "flamingo": pol(0.53, 532.0, 34.7e6, {"rounds": 99.5, "per_seed": {"0": {"rounds": 100}, "1": {"rounds": 99}}})}},
        "policy.exploration=none": {"policies": {"baseline": pol(None, 1870.0, 66.8e6), "flamingo": pol(9.87, 300.0, 7.0e6)}},
    }
    lines = points_md(rows, summaries.__getitem__)
    assert lines[2] == "| reference (no knob varied) | 4.16x [3.66, 4.66] | 2.00x | 1,870 / 322 | 66.8 / 8.9 MJ | round 14.7 (mean) |"
    assert lines[3] == ("| `policy.exploration: per_request` | 0.53x [0.03, 1.03] | 2.00x | 1,870 / 532 | 66.8 / 34.7 MJ "
                        "| never: exploring in the last round in 1 of 2 seeds |")
    assert lines[4] == "| `policy.exploration: none` | 9.87x [9.37, 10.37] | 2.00x | 1,870 / 300 | 66.8 / 7.0 MJ | no exploration |"


def test_the_pages_claims_about_the_round_rule_hold_in_the_readings_grid():
    rows = {(r["knob"], r["value"]): r for r in load("readings_main_job/paper/sensitivity.csv")}
    ref, oc, steps = rows[("reference", "")], rows[("fl.overcommit", "1.0")], rows[("fl.local_steps", "10")]
    hours = {name: (float(r["baseline_time_to_target_h"]), float(r["flamingo_time_to_target_h"])) for name, r in
             (("ref", ref), ("oc", oc), ("steps", steps))}
    assert round(hours["oc"][0] / hours["ref"][0], 1) == 1.8 and round(hours["oc"][1] / hours["ref"][1], 1) == 0.9
    assert hours["oc"][0] > hours["ref"][0] > hours["ref"][1] > hours["oc"][1]  # "slows the baseline's rounds and not Flamingo's"
    assert hours["steps"][0] < 0.5 * hours["ref"][0] and hours["steps"][1] > hours["ref"][1]
    explored = {name: load(f"readings_main_job/paper/{name}.summary.json")["policies"]["flamingo"]["exploration"]["rounds"]
                for name in ("reference", "fl.local_steps=10")}
    assert round(explored["fl.local_steps=10"]) == 44 and round(explored["reference"]) == 12


def test_a_point_whose_value_holds_a_path_is_found_under_the_directory_sensitivity_gave_it():
    """points_md looks a point's summary up by the name sensitivity gives its run directory (a '/' in the value
    made '_'), so a grid over traces.path renders; the row still shows the value as given."""
    from flamingo_sim.studies.names import point_name
    from flamingo_sim.studies.reproduce.why import points_md

    assert point_name("traces.path", "traces/other") == "traces.path=traces_other"
    assert point_name("fl.lr", 0.001) == "fl.lr=0.001"
    pol = {"speedup": 2.0, "speedup_ci": None, "energy_efficiency": 3.0, "energy_efficiency_ci": None, "clients_lost": 5.0,
           "total_energy_j": 1e6, "exploration": None, "per_seed": {}}
    asked = []

    def summary(name):
        asked.append(name)
        return {"policies": {"baseline": pol, "flamingo": pol}}

    lines = points_md([{"knob": "traces.path", "value": "traces/other"}], summary)
    assert asked == ["traces.path=traces_other"]
    assert lines[2].startswith("| `traces.path: traces/other` | 2.00x | 3.00x |")


def test_table2_renders_each_exploration_reading_under_its_title_and_mechanisms_render_per_task():
    from flamingo_sim.studies.reproduce.why import mechanisms_md, table2_md

    one = {"columns": ["task", "quantity", "b", "f", "ratio", "paper"], "rows": [["T", "time", "1", "2", "3.00x", "4x"]], "reading": "R"}
    single = table2_md({"Table 2: x, under A": one})
    assert single == ["| task | quantity | ratio | paper |", "|---|---|---|---|", "| T | time | 3.00x | 4x |", "", "R"]
    both = table2_md({"Table 2: x, under A": one, "Table 1": {}, "Table 2: x, under B's words": one})
    assert both[0] == "*A:*" and both.count("| T | time | 3.00x | 4x |") == 2 and "*B's words:*" in both
    with pytest.raises(ValueError, match="no Table 2"):
        table2_md({"Table 1": one})
    steps = {"openimage_mobilenet": [{"label": "energy accounting: cpu_time -> full_power", "speedup": 7.727, "speedup_ci": [7.171, 8.841],
                                      "speedup_factor": 1.3637, "speedup_factor_ci": None, "energy_efficiency": None,
                                      "energy_efficiency_ci": None, "energy_factor": None, "energy_factor_ci": None}]}
    assert mechanisms_md(steps)[2] == ("| OpenImage / MobileNetV2 | energy accounting: cpu_time -> full_power | 7.73x [7.17, 8.84] | 1.36x "
                                       "| no ratio | no ratio |")


def test_the_pages_claim_about_the_public_set_holds_in_its_file():
    """The grid's `public` point: Flamingo slower than the baseline at the same training energy, and level with it once
    the baseline has the same admission; the reference row the same runs as the range's."""
    f = load("readings_main_job/public/reference.summary.json")["policies"]["flamingo"]
    m = load("readings_main_job/public/policy.baseline_admission=monitored.summary.json")["policies"]["flamingo"]
    flat = " ".join(PAGE.read_text().split())
    s, e, ms = f["speedup_ci"], f["energy_efficiency_ci"], m["speedup_ci"]
    assert (f"There `public` gives Flamingo {f['speedup']:.2f}x [{s[0]:.2f}, {s[1]:.2f}] of the baseline's speed at the same training "
            f"energy ({f['energy_efficiency']:.2f}x [{e[0]:.2f}, {e[1]:.2f}])") in flat
    assert e[0] <= 1.0 <= e[1] and s[1] < 1.0  # "the same energy", and slower
    assert f"the two are level, {m['speedup']:.2f}x [{ms[0]:.2f}, {ms[1]:.2f}]" in flat and ms[0] <= 1.0 <= ms[1]
    assert load("readings_main_job/paper/phones.profile_set=public.summary.json")["policies"]["flamingo"]["speedup"] == f["speedup"]
    reference = load("readings_main_job/paper/reference.summary.json")["policies"]["flamingo"]["speedup"]
    assert reference == load("unknowns/default/range.json")["speedup"]["reference"]  # "the same runs", number for number
    assert f"the same runs as the reference of [the range over the unknowns](#our-numbers-beside-them), {reference:.2f}x)" in flat


def _widest_unknowns(rows: list[dict]) -> tuple[dict[str, list[float]], float, list[str]]:
    """A sensitivity grid's speedups by unknown (the reference row apart), the reference's, and the unknowns ordered by
    how far their values move the speedup (the reference counted among each unknown's values), widest first."""
    spread: dict[str, list[float]] = {}
    ref = next(float(r["speedup"]) for r in rows if r["knob"] == "reference")
    for r in rows:
        if r["knob"] != "reference":
            spread.setdefault(r["knob"], []).append(float(r["speedup"]))
    return spread, ref, sorted(spread, key=lambda k: max(spread[k] + [ref]) - min(spread[k] + [ref]), reverse=True)


def test_the_pages_claims_about_the_range_under_the_papers_readings_hold_in_its_file():
    """The range under the paper's readings: its reference the walk's first ratio, exactly; the paper's energy efficiency
    inside the range and its speedup above it, whose top is the fixed two-core reading; the profile set the widest unknown."""
    summary = load("unknowns/paper/range.json")
    walk = {s["step"]: s for s in load("reproduce_full_paper/attribution.json")["openimage_mobilenet"]}
    sp, ee = summary["speedup"], summary["energy_efficiency"]
    assert sp["reference"] == walk["target"]["speedup"]
    assert ee["range_holds_paper"] and not sp["range_holds_paper"] and sp["paper"] > sp["model_range"][1]
    rows = load("unknowns/paper/sensitivity.csv")
    point = {(r["knob"], r["value"]): float(r["speedup"]) for r in rows}
    assert max(point.values()) == point[("policy.interference.model", "fair")] == sp["model_range"][1]
    assert _widest_unknowns(rows)[2][0] == "phones.profile_set"  # "again the widest unknown"


def test_the_pages_claims_about_the_range_hold_in_its_file():
    """The sentences under the range block: neither of the paper's ratios inside the range; the range widest along the
    profile set and the interference model (each unknown's spread of speedup, from its points); the kernel scheduler, the
    owner's boost and its memory share moving the speedup little or not at all; the public and fair points as quoted."""
    summary = load("unknowns/default/range.json")
    assert summary["speedup"]["range_holds_paper"] is False and summary["energy_efficiency"]["range_holds_paper"] is False
    rows = load("unknowns/default/sensitivity.csv")
    spread, ref, widest = _widest_unknowns(rows)
    assert widest[:2] == ["phones.profile_set", "policy.interference.model"], widest
    for knob in ("policy.interference.scheduler", "policy.interference.foreground_nice", "policy.interference.owner_memory_share"):
        assert all(abs(v / ref - 1) < 0.05 for v in spread[knob]), knob
    point = {(r["knob"], r["value"]): float(r["speedup"]) for r in rows}
    flat = " ".join(PAGE.read_text().split())
    assert f"Flamingo nothing to gain, {point[('phones.profile_set', 'public')]:.2f}x" in flat
    assert f"the fixed two-core reading, {point[('policy.interference.model', 'fair')]:.2f}x" in flat
