"""``flamingo-sim reproduce``: every number of the report read back from the runs' metrics.

One tiny reproduction (three tasks, two seeds, a few rounds of a few clients) is made once per
module; each test recomputes a part of the report from ``metrics.parquet`` with plain pandas
(the target, time and energy to target, the bases, the interference) and finds it, formatted as
the report formats numbers, in the cell where it belongs.
"""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from flamingo_sim.cli import main
from flamingo_sim.devices.calibrate import TABLE1
from flamingo_sim.devices.profiles import load_profile
from flamingo_sim.fl.metrics.compare import bootstrap_ci, ratio_of_means
from flamingo_sim.studies.reproduce.paper import TASKS
from flamingo_sim.studies.reproduce.tables import MODELS, PHONE_NAMES, num
from tests.report_runs import ROOT

TINY = ["fl.rounds=5", "fl.participants_per_round=6", "fl.local_steps=3", "fl.eval_every=2", "data.proxy.n_clients=150"]
SEEDS = 2


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce") / "repro"
    args = ["reproduce", "--out", str(out), "--seeds", str(SEEDS)]
    for item in TINY:
        args += ["--set", item]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(args) == 0
    (out.parent / "stdout.txt").write_text(printed.getvalue())
    return out


@pytest.mark.slow
def test_each_summary_printed_is_named_by_its_task(out):
    printed = (out.parent / "stdout.txt").read_text().splitlines()
    heads = [i for i, line in enumerate(printed) if line.startswith("== task ")]
    assert [printed[i] for i in heads] == [f"== task {k}/3: {t} ({' / '.join(TASKS[t])}) ==" for k, t in enumerate(TASKS, start=1)]
    for i in heads:  # each name is followed by that task's summary table
        assert printed[i + 1].startswith("policy ") and printed[i + 3].startswith("baseline ")


def tables(md: str) -> dict[str, list[dict[str, str]]]:
    """Every Markdown table of the report under its ``###`` heading, as rows of {column: cell}."""
    found: dict[str, list[dict[str, str]]] = {}
    heading, header = None, None
    for line in md.splitlines():
        if line.startswith("### "):
            heading, header = line[4:], None
        elif line.startswith("|") and heading:
            cells = [c.strip() for c in line.strip("|").split("|")]
            if header is None:
                header = cells
            elif not set(line) <= set("|-"):
                found.setdefault(heading, []).append(dict(zip(header, cells)))
    return found


def metrics(out, task) -> pd.DataFrame:
    return pd.read_parquet(out / "runs" / task / "metrics.parquet")


def label(task) -> str:
    return " / ".join(TASKS[task])


def by_title(found, start):
    (title,) = [t for t in found if t.startswith(start)]
    return found[title]


def curve(rows: pd.DataFrame) -> pd.DataFrame:
    """The default target rule's curve: at each evaluated round, the mean of the last 3 evaluations."""
    ev = rows.dropna(subset=["accuracy"]).sort_values("round")
    return ev.assign(curve=ev["accuracy"].rolling(3, min_periods=1).mean())


def targets(m: pd.DataFrame) -> dict[int, float]:
    """highest_common - 0.01: per seed, the lowest of the policies' best smoothed accuracies, less the margin."""
    return {int(s): float(min(curve(r)["curve"].max() for _, r in f.groupby("policy"))) - 0.01 for s, f in m.groupby("seed")}


def first_hit(rows: pd.DataFrame, target: float) -> pd.Series:
    c = curve(rows)
    return c[c["curve"] >= target - 1e-9].iloc[0]


@pytest.mark.slow
def test_report_opens_with_the_three_tables_and_the_figure(out):
    md = (out / "report.md").read_text()
    headings = [line for line in md.splitlines() if line.startswith("### ")]
    assert [h.split(":")[0] for h in headings[:5]] == ["### Table 1", "### Table 2", "### What sets the speedup", "### Table 3",
                                                       "### Figure 6 analogue"]
    assert md.index("Fidelity: ") < md.index("### Table 3")  # the proxy note sits next to Table 2
    assert "Overrides: openimage_mobilenet: `fl.rounds=5`, `fl.participants_per_round=6`" in md
    with Image.open(out / "figure6.png") as img:
        assert img.size[0] >= 1000
    html = (out / "report.html").read_text()
    assert "Table 2: time and training energy" in html and 'src="figure6.png"' in html
    for task in TASKS:  # each task's detailed figures, drawn when its run was complete, referenced by the report
        for stem in ("accuracy_vs_time", "clients_online", "choice_mix"):
            assert (out / "figures" / task / f"{stem}.png").is_file()
            assert f"](figures/{task}/{stem}.png)" in md and f'src="figures/{task}/{stem}.png"' in html
    assert not list((out / "figures").glob(".*.claim"))  # the claims that kept two processes from drawing one task are gone


@pytest.mark.slow
def test_table1_is_read_from_the_profiles(out):
    rows = by_title(tables((out / "report.md").read_text()), "Table 1")
    assert len(rows) == 5
    for row in rows:
        phone = next(p for p, n in PHONE_NAMES.items() if n == row["phone"])
        for m, name in MODELS.items():
            prof = load_profile(ROOT / "profiles", phone, m)
            assert row[f"speedup {name}"] == f"{num(prof.speedup)} ({TABLE1[(phone, m)][0]:.1f})"
            assert row[f"energy eff. {name}"] == f"{num(prof.energy_efficiency)} ({TABLE1[(phone, m)][1]:.1f})"


@pytest.mark.slow
def test_table2_is_read_from_the_metrics(out):
    rows = by_title(tables((out / "report.md").read_text()), "Table 2")
    assert len(rows) == 2 * len(TASKS)
    for task in TASKS:
        m = metrics(out, task)
        tgt = targets(m)
        for column, quantity, scale, digits, what in (("time_s", "time to target (h)", 1 / 3600, 2, "speedup"),
                                                       ("energy_cum_j", "energy to target (kJ)", 1e-3, 1, "energy_efficiency")):
            (row,) = [r for r in rows if r["task"] == label(task) and r["quantity"] == quantity]
            values = {}
            for policy, head in (("baseline", "baseline"), ("flamingo", "Flamingo")):
                per_seed = [float(first_hit(m[(m["policy"] == policy) & (m["seed"] == s)], t)[column]) for s, t in tgt.items()]
                values[policy] = per_seed
                assert row[f"{head} per seed"] == ", ".join(num(v, digits, scale) for v in per_seed)
                lo, hi = bootstrap_ci(per_seed, f"{policy}|{'time_to_target_s' if column == 'time_s' else 'energy_to_target_j'}")
                assert min(per_seed) * (1 - 1e-12) <= lo <= np.mean(per_seed) <= hi <= max(per_seed) * (1 + 1e-12)
                assert row[f"{head} mean [95 % CI]"] == f"{num(np.mean(per_seed), digits, scale)} [{num(lo, digits, scale)}, {num(hi, digits, scale)}]"
            ratio = np.mean(values["baseline"]) / np.mean(values["flamingo"])  # a ratio of means
            ci = ratio_of_means(values["baseline"], values["flamingo"], f"flamingo|{what}")["ci"]
            assert row["baseline / Flamingo (ratio of means) [95 % CI]"] == f"{ratio:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}]"


@pytest.mark.slow
def test_the_report_says_the_trace_horizon_and_table3s_notes_once(out):
    """Issue 50: whether a run passed its traces' wrap-free horizon is said in the report (not only once on a unit's log),
    and Table 3's "by construction" notes once under it, each row carrying its markers."""
    md = (out / "report.md").read_text()
    assert len(re.findall(r"^Trace horizon: (?:every run stayed within|\d+ runs? passed)", md, re.M)) == 1
    from flamingo_sim.studies.reproduce.tables import CONSTRUCTION_NOTES

    lines = [line for line in md.splitlines() if line.startswith("The 'by construction' column's markers: [")]
    assert len(lines) == 1
    used = re.findall(r"\[([a-e])\] ", lines[0])
    assert used and all(md.count(CONSTRUCTION_NOTES[m]) == 1 for m in used), used  # each note said once, under the table


@pytest.mark.slow
def test_table3_is_read_from_the_metrics(out):
    rows = by_title(tables((out / "report.md").read_text()), "Table 3")
    assert len(rows) == 5 * len(TASKS)
    for task in TASKS:
        m = metrics(out, task)
        mine = [r for r in rows if r["task"] == label(task)]
        assert len(mine) == 5, (task, len(mine))  # one row per phone: the loop below checks each (it could run over none before)
        for row in mine:
            phone = next(p for p, n in PHONE_NAMES.items() if n == row["phone"])
            exposure, intensity = {}, {}
            for policy in ("baseline", "flamingo"):
                slowed = foreground = during = lost = 0.0
                for _, f in m.groupby("seed"):
                    last = f.groupby("policy")["round"].max().min()
                    sel = f[(f["policy"] == policy) & (f["round"].between(1, last))]
                    slowed += sel[f"interference_s_{phone}"].sum()
                    foreground += sel[f"foreground_s_{phone}"].sum()
                    during += sel[f"training_foreground_s_{phone}"].sum()
                    lost += sel[f"foreground_lost_s_{phone}"].sum()
                exposure[policy] = float(100 * slowed / foreground) if foreground > 0 else 0.0
                # the owner's work lost (the slowed time weighed by the share of the core the owner gave up) over its use
                # while training ran: a share, at most every second lost in full
                assert 0.0 <= lost <= slowed <= during + 1e-6
                intensity[policy] = float(-100 * lost / during) + 0.0 if during > 0 else 0.0
            assert row["baseline exposure (% of foreground time)"] == num(exposure["baseline"], 1)
            assert row["Flamingo exposure (% of foreground time)"] == num(exposure["flamingo"], 1)
            assert row["baseline intensity (% foreground rate)"] == num(intensity["baseline"], 1)
            assert row["Flamingo intensity (% foreground rate)"] == num(intensity["flamingo"], 1)
            gain = "-" if exposure["baseline"] <= 0 else f"{100 * (1 - exposure['flamingo'] / exposure['baseline']):.0f} %"
            if exposure["baseline"] <= 0 and exposure["flamingo"] > 0:  # the baseline never slowed the owner, Flamingo did
                gain = "worse (none before)"
            assert row["improvement (exposure)"] == gain
            if intensity["baseline"]:
                assert row["improvement (intensity)"] == f"{100 * (1 - intensity['flamingo'] / intensity['baseline']):.0f} %"
            elif intensity["flamingo"]:  # the baseline never slowed the owner, Flamingo did
                assert row["improvement (intensity)"] == "worse (none before)"


# The paper's figures (Flamingo, DistributedML '23), restated here, not imported.
PAPER_TABLE2 = {"openimage_mobilenet": ("23.3x (to 52.8 %)", "7.0x"), "openimage_shufflenet": ("6.5x (to 46.3 %)", "5.8x"),
                "speech_resnet34": ("1.2x (to 60.8 %)", "1.6x")}
PAPER_TABLE3 = {"Galaxy Tab S6": ("-10.2 %", "-5.8 %", "43 %"), "OnePlus 8": ("-12.5 %", "0.0 %", "100 %"),
                "Google Pixel 3": ("-27.0 %", "-3.1 %", "88 %"), "Samsung S10e": ("-11.2 %", "0.0 %", "100 %"),
                "Xiaomi Mi 10": ("-", "-", "-")}


@pytest.mark.slow
def test_paper_columns_hold_the_papers_figures(out):
    import json

    md = (out / "report.md").read_text()
    found = tables(md)
    for row in by_title(found, "Table 2"):
        task = next(t for t in TASKS if label(t) == row["task"])
        speed, energy = PAPER_TABLE2[task]
        assert row["paper (Flamingo over baseline)"] == (speed if row["quantity"].startswith("time") else energy)
    for row in by_title(found, "Table 3"):
        assert (row["paper baseline (PCMark)"], row["paper Flamingo (PCMark)"], row["paper improvement"]) == PAPER_TABLE3[row["phone"]]
    assert "none of Tables 2 and 3 was used to set any parameter" in md
    assert re.search(r"Reading: speedup: direction agrees on [0-3] of 3 tasks, magnitude within 2x on [0-3] of 3; "
                     r"energy efficiency: direction agrees on [0-3] of 3 tasks", md)
    assert re.search(r"Reading: improvement of Flamingo over the baseline \(PyTorch's default as stock Android schedules it, the "
                     r"paper's comparison with the Energy-Aware Scheduler\), intensity: direction agrees on \d+ of \d+ \(task, phone\) rows", md)
    saved = json.loads((out / "tables.json").read_text())
    t2 = next(v for k, v in saved.items() if k.startswith("Table 2"))
    assert t2["paper"]["openimage_shufflenet"] == {"speedup": 6.5, "energy_efficiency": 5.8, "target_accuracy_pct": 46.3}
    assert t2["reading"].startswith("Reading: speedup: direction agrees on ")
    t3 = next(v for k, v in saved.items() if k.startswith("Table 3"))
    assert t3["paper"]["pixel_3"] == {"baseline_pct": -27.0, "flamingo_pct": -3.1, "improvement_pct": 88.0}
    assert set(t3["paper"]) == {"galaxy_tab_s6", "oneplus_8", "pixel_3", "galaxy_s10e"}


def test_agreement_counts_direction_and_magnitude():
    from flamingo_sim.studies.reproduce.tables import agreement

    # ratios: 4.4 vs 23.3 (same direction, 5x off), 0.8 vs 1.2 (opposite), 1.5 vs 1.6 (within 2x), None skipped
    assert agreement([(4.4, 23.3), (0.8, 1.2), (1.5, 1.6), (None, 7.0)]) == (3, 2, 1)
    # improvements in %: 60 vs 100 (within 2x), 30 vs 88 (2.9x off), -5 vs 43 (opposite), 0 vs 0 (both none)
    assert agreement([(60.0, 100.0), (30.0, 88.0), (-5.0, 43.0), (0.0, 0.0)], neutral=0.0) == (4, 3, 2)


@pytest.mark.slow
def test_bases_and_exploration_are_read_from_the_metrics(out):
    md = (out / "report.md").read_text()
    found = tables(md)
    for task in TASKS:
        m = metrics(out, task)
        tgt = targets(m)
        rows = by_title(found, f"{label(task)}: the policies compared")
        for policy in ("baseline", "flamingo"):
            states = {"equal rounds": [], "equal time": [], "at target": []}
            for seed, f in m.groupby("seed"):
                mine = f[f["policy"] == policy].sort_values("round")
                last = f.groupby("policy")["round"].max().min()
                end = f.groupby("policy")["time_s"].max().min()
                states["equal rounds"].append(mine[mine["round"] == last].iloc[0])
                states["equal time"].append(mine[mine["time_s"] <= end + 1e-9].iloc[-1])
                states["at target"].append(first_hit(mine, tgt[int(seed)]))
            for basis, picked in states.items():
                (row,) = [r for r in rows if r["basis"] == basis and r["policy"] == policy]
                assert row["round"] == num(np.mean([p["round"] for p in picked]), 1)
                assert row["virtual time (h)"] == num(np.mean([p["time_s"] for p in picked]), 2, 1 / 3600)
                assert row["training energy (kJ)"] == num(np.mean([p["energy_cum_j"] for p in picked]), 1, 1e-3)
                assert row["clients lost"] == num(np.mean([p["clients_lost_cum"] for p in picked]), 1)
        flam = m[m["policy"] == "flamingo"]
        explored = flam[flam["n_exploring"] > 0].groupby("seed")["round"].max()
        end_h = np.mean([flam[(flam["seed"] == s) & (flam["round"] == r)]["time_s"].iloc[0] for s, r in explored.items()]) / 3600
        line = re.search(rf"Exploration cost: {re.escape(label(task))}: exploration lasted rounds 1-(\d+) \(mean over seeds\), ([\d.]+) h", md)
        assert line and line.group(1) == f"{explored.mean():.0f}" and line.group(2) == num(end_h, 2)


@pytest.mark.slow
def test_every_curve_starts_at_round_zero(out):
    for task in TASKS:
        m = metrics(out, task)
        zero = m[m["round"] == 0]
        assert len(zero) == 2 * SEEDS
        assert (zero["time_s"] == 0).all() and zero["accuracy"].notna().all() and (zero["energy_cum_j"] == 0).all()


def test_bad_override_is_one_line_before_any_output(tmp_path, capsys):
    out = tmp_path / "never"
    assert main(["reproduce", "--out", str(out), "--set", "nosuch:fl.rounds=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "flamingo-sim reproduce: error: --set: nosuch:fl.rounds=3: unknown task 'nosuch' (expected one of openimage_mobilenet, openimage_shufflenet, speech_resnet34)"
    assert main(["reproduce", "--out", str(out), "--set", "speech_resnet34:fl.nokey=3"]) == 2
    assert "fl.nokey" in capsys.readouterr().err
    assert main(["reproduce", "--out", str(out), "--tasks", "mnist"]) == 2
    assert capsys.readouterr().err.strip().endswith("error: --tasks: expected some of openimage_mobilenet, openimage_shufflenet, speech_resnet34, got mnist")
    assert not out.exists()


def test_reproduce_errors_come_before_torch_is_imported(tmp_path):
    import os
    import subprocess
    import sys

    code = ("import sys; from flamingo_sim.cli import main; rc = main(sys.argv[1:]); "
            "assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules, 'imported'; raise SystemExit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, "reproduce", "--seeds", "0", "--out", str(tmp_path / "never")], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60, check=False)
    assert proc.returncode == 2 and proc.stderr.strip() == "flamingo-sim reproduce: error: --seeds: expected a count >= 1, got 0"
    assert not (tmp_path / "never").exists()


def test_table1_reads_the_runs_profile_set():
    from flamingo_sim.devices.catalogue import ProfileDirs
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.studies.reproduce.run import experiment_path
    from flamingo_sim.studies.reproduce.tables import table1

    cfg = load_experiment(experiment_path("openimage_mobilenet"), ["phones.profile_set=public"])
    assert cfg.phones.profile_set == "public"
    t = table1(ProfileDirs.of([ROOT / "profiles"]), ["galaxy_s10e", "pixel_3"], "public")
    assert "profile set 'public'" in t.title and "never from these ratios" in t.note
    s10e = dict(zip(t.columns, t.rows[0]))
    # public: all four big cores are the fastest choice, so Flamingo's idle choice is the baseline's
    assert s10e["speedup MobileNetV2"] == "1.00 (31.8)" and s10e["energy eff. MobileNetV2"] == "1.00 (17.4)"
    assert t.paper["galaxy_s10e|mobilenet_v2"] == {"speedup": 31.8, "energy_efficiency": 17.4}


@pytest.mark.slow
def test_training_foreground_lies_within_the_tasks_foreground(out):
    # A round whose tasks all ran in full: each task's training is part of its time under the
    # job, so the owners' foreground time while training ran is at most their foreground time.
    for task in TASKS:
        m = metrics(out, task)
        full = m[(m["round"] >= 1) & (m[[c for c in m.columns if c.startswith("dropped_") and c != "dropped_declined"]].sum(axis=1) == 0)]
        assert len(full)
        phones = [c[len("interference_s_"):] for c in m.columns if c.startswith("interference_s_")]
        for p in phones:
            assert (full[f"training_foreground_s_{p}"] <= full[f"foreground_s_{p}"] + 1e-9).all()
        assert sum(float(m[f"training_foreground_s_{p}"].sum()) for p in phones) > 0
