"""``flamingo-sim report``: the plotted series equal the metrics, the files are valid images, errors are one line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PIL import Image

from flamingo_sim.cli import main
from flamingo_sim.errors import FlamingoError
from flamingo_sim.report import FIGURES, POLICY_COLORS, load_runs, mean_band, plots, policy_colors, write_report
from flamingo_sim.report.data import choice_columns, energy_unit, phone_columns
from flamingo_sim.report.write import DPI
from tests.report_runs import ROOT, small_runs

T975_DOF2 = 4.302652729911275  # Student-t 97.5 % quantile, 2 degrees of freedom (tables)


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory):
    return small_runs(tmp_path_factory)


@pytest.fixture(scope="module")
def runs(run_dirs):
    two, one = load_runs(run_dirs)
    return two, one


def lines_by_gid(fig) -> dict[str, object]:
    return {line.get_gid(): line for ax in fig.axes for line in ax.get_lines() if line.get_gid()}


def test_speedup_by_target_figure_plots_the_summary_table(runs):
    one = runs[1]
    lines = lines_by_gid(FIGURES["speedup_vs_target"]([one]))
    points = one.summary["target_curve"]["points"]
    speedup = lines[f"{one.label}|flamingo|speedup_by_target"]
    np.testing.assert_allclose(speedup.get_xdata(), [p["target"] for p in points])
    expected = [np.nan if p["speedup"]["flamingo"] is None else p["speedup"]["flamingo"] for p in points]
    np.testing.assert_allclose(speedup.get_ydata(), expected)
    star = lines[f"{one.label}|flamingo|speedup_headline"]
    assert star.get_ydata()[0] == pytest.approx(one.summary["policies"]["flamingo"]["speedup"])
    assert star.get_xdata()[0] == pytest.approx(one.summary["target_accuracy_by_seed"]["0"])


# --- aggregation -----------------------------------------------------------------------------


def test_mean_band_hand_computed():
    xs = [np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.5, 1.5, 2.5]), np.array([0.0, 2.0, 4.0])]
    ys = [np.array([0.0, 1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0]), np.array([0.0, 4.0, 8.0])]
    c = mean_band(xs, ys)
    # grid: union of time points clipped to [0.5, 2.5], where every seed has data
    np.testing.assert_allclose(c.x, [0.5, 1.0, 1.5, 2.0, 2.5])
    at_1 = np.array([1.0, 1.0, 2.0])  # y of each seed at x = 1, by linear interpolation
    assert c.y[1] == pytest.approx(at_1.mean())
    half = T975_DOF2 * at_1.std(ddof=1) / math.sqrt(3)
    assert c.lo[1] == pytest.approx(at_1.mean() - half) and c.hi[1] == pytest.approx(at_1.mean() + half)
    assert c.n_seeds == 3


def test_mean_band_of_one_seed_is_that_seed():
    x, y = np.array([0.0, 2.0, 5.0]), np.array([0.1, 0.3, 0.2])
    c = mean_band([x], [y])
    np.testing.assert_array_equal(c.x, x)
    np.testing.assert_array_equal(c.y, y)
    assert c.lo is None and c.hi is None


def test_policy_colours_are_fixed_and_distinct():
    assert policy_colors(["flamingo", "baseline"]) == {"flamingo": POLICY_COLORS["flamingo"], "baseline": POLICY_COLORS["baseline"]}
    colors = policy_colors(["baseline", "mine", "flamingo", "other"])
    assert len(set(colors.values())) == 4 and colors["baseline"] == POLICY_COLORS["baseline"]


# --- plotted series equal the metrics ----------------------------------------------------------


@pytest.mark.parametrize("stem,column", [("accuracy_vs_time", "accuracy"), ("clients_online", "n_online"), ("clients_lost", "clients_lost_cum"), ("energy_cumulative", "energy_cum_j")])
def test_time_series_of_one_seed_equal_the_metrics(runs, stem, column):
    one = runs[1]
    fig = FIGURES[stem]([one])
    lines = lines_by_gid(fig)
    scale = energy_unit(one.metrics["energy_cum_j"].max())[1] if column == "energy_cum_j" else 1.0
    for policy in ("baseline", "flamingo"):
        rows = one.metrics[one.metrics["policy"] == policy].dropna(subset=[column]).sort_values("round")
        line = lines[f"{one.label}|{policy}|{column}"]
        np.testing.assert_allclose(line.get_xdata(), rows["time_s"] / 3600)
        np.testing.assert_allclose(line.get_ydata(), rows[column] * scale)
        assert line.get_color() == POLICY_COLORS[policy]
    if column == "accuracy":
        assert len(lines[f"{one.label}|baseline|accuracy"].get_xdata()) < len(one.metrics) / 2  # unevaluated rounds skipped


def test_time_to_target_is_marked_where_the_summary_says(runs):
    """The star sits on the plotted curve the rule reads (the smoothed one by default), at or above the target."""
    one = runs[1]
    lines = lines_by_gid(FIGURES["accuracy_vs_time"]([one]))
    target = one.summary["target_accuracy_by_seed"]["0"]
    assert one.summary["target_rule"]["curve"] == "smoothed"
    marked = 0
    for policy, entry in one.summary["policies"].items():
        if entry["time_to_target_s"] is None:
            continue
        rows = one.metrics[one.metrics["policy"] == policy].dropna(subset=["accuracy"]).sort_values("round")
        acc = rows["accuracy"].to_numpy()
        i = int(np.flatnonzero(rows["round"].to_numpy() == entry["per_seed"]["0"]["target_round"])[0])
        on_curve = acc[max(0, i - 2): i + 1].mean()  # the mean of the last 3 evaluations there
        star = lines[f"{one.label}|{policy}|time_to_target"]
        assert star.get_xdata()[0] == pytest.approx(entry["time_to_target_s"] / 3600)
        assert star.get_ydata()[0] == pytest.approx(on_curve) and on_curve >= target - 1e-9
        curve = lines[f"{one.label}|{policy}|accuracy_curve"]
        assert star.get_ydata()[0] == pytest.approx(np.interp(star.get_xdata()[0], curve.get_xdata(), curve.get_ydata()))
        marked += 1
    assert marked == 2
    fig = FIGURES["accuracy_vs_time"]([one])
    target_line = next(line for ax in fig.axes for line in ax.get_lines() if line.get_gid() == f"{one.label}|target")
    assert target_line.get_ydata()[0] == pytest.approx(target)


def test_two_seeds_plot_the_mean_and_a_band(runs):
    two = runs[0]
    assert two.seeds == [0, 1]
    fig = FIGURES["clients_online"]([two])
    line = lines_by_gid(fig)[f"{two.label}|flamingo|n_online"]
    per_seed = [two.metrics[(two.metrics["policy"] == "flamingo") & (two.metrics["seed"] == s)].sort_values("round") for s in (0, 1)]
    x = line.get_xdata()
    expect = np.mean([np.interp(x, r["time_s"] / 3600, r["n_online"]) for r in per_seed], axis=0)
    np.testing.assert_allclose(line.get_ydata(), expect)
    assert x.min() >= max(r["time_s"].min() for r in per_seed) / 3600 - 1e-12
    assert x.max() <= min(r["time_s"].max() for r in per_seed) / 3600 + 1e-12
    bands = [c for ax in fig.axes for c in ax.collections if c.get_gid() == f"{two.label}|flamingo|n_online|band"]
    assert len(bands) == 1


def test_choice_mix_edges_are_cumulative_step_shares(runs):
    one = runs[1]
    lines = lines_by_gid(FIGURES["choice_mix"]([one]))
    labels = choice_columns(one.metrics)
    rows = one.metrics[(one.metrics["policy"] == "flamingo") & (one.metrics["round"] >= 1)].sort_values("round")
    steps = rows[[f"steps_{c}" for c in labels]].to_numpy(float)
    cum = np.cumsum(steps / steps.sum(axis=1, keepdims=True), axis=1)
    drawn = [c for c in labels if f"{one.label}|flamingo|mix|{c}" in lines]
    assert drawn and all(rows[f"steps_{c}"].sum() > 0 for c in drawn)
    for c in drawn:
        line = lines[f"{one.label}|flamingo|mix|{c}"]
        np.testing.assert_allclose(line.get_xdata(), rows["round"])
        np.testing.assert_allclose(line.get_ydata(), cum[:, labels.index(c)])
    base = lines[f"{one.label}|baseline|mix|4567"]  # the baseline always runs on the four big cores
    np.testing.assert_allclose(base.get_ydata(), 1.0)


def test_interference_bars_are_mean_per_round_per_phone(runs):
    one = runs[1]
    fig = FIGURES["interference_per_phone"]([one])
    phones = phone_columns(one.metrics)
    bars = {c.get_label(): c for c in fig.axes[0].containers}
    for policy in ("baseline", "flamingo"):
        heights = [p.get_height() for p in bars[f"{one.label}|{policy}|interference"].patches]
        rows = one.metrics[(one.metrics["policy"] == policy) & (one.metrics["round"] >= 1)]  # rounds that trained
        np.testing.assert_allclose(heights, [rows[f"interference_s_{p}"].mean() for p in phones])
        assert bars[f"{one.label}|{policy}|interference"].patches[0].get_facecolor()[:3] == pytest.approx(
            tuple(int(POLICY_COLORS[policy][i : i + 2], 16) / 255 for i in (1, 3, 5))
        )


def test_several_runs_are_overlaid_with_one_style_each(runs):
    fig = FIGURES["accuracy_vs_time"](list(runs))
    lines = lines_by_gid(fig)
    two, one = runs
    a, b = lines[f"{two.label}|flamingo|accuracy_curve"], lines[f"{one.label}|flamingo|accuracy_curve"]
    assert a.get_color() == b.get_color() == POLICY_COLORS["flamingo"]
    assert a.get_linestyle() != b.get_linestyle()
    legend = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert {"baseline", "flamingo", two.label, one.label} <= set(legend)


def test_figures_label_their_axes_with_units(runs):
    figs = plots.make_figures([runs[1]])
    assert figs["accuracy_vs_time"].axes[0].get_xlabel() == "virtual time (h)"
    assert "(kJ" in figs["energy_cumulative"].axes[0].get_ylabel() or "(J" in figs["energy_cumulative"].axes[0].get_ylabel()
    assert figs["interference_per_phone"].axes[0].get_ylabel().endswith("(s)")
    for fig in figs.values():
        w, h = fig.get_size_inches()
        assert w <= 7.0 and h <= 6.0
        for ax in fig.axes:
            if ax.get_label() != "<colorbar>" and ax.axison:
                assert ax.get_xlabel() and (ax.get_ylabel() or ax.get_subplotspec().colspan.start > 0)


# --- files ---------------------------------------------------------------------------------------


def test_report_writes_valid_images_and_a_summary(run_dirs, tmp_path):
    result = write_report(list(run_dirs), tmp_path / "rep")
    assert set(result.figures) == set(FIGURES)
    for png, svg in result.figures.values():
        with Image.open(png) as im:
            im.verify()
        with Image.open(png) as im:
            assert im.format == "PNG" and im.size[0] >= 3.3 * DPI and im.size[1] > 200
        text = svg.read_text()
        assert text.lstrip().startswith("<?xml") and "<svg" in text and text.rstrip().endswith("</svg>")
    md = result.markdown.read_text()
    for stem in FIGURES:
        assert f"]({stem}.png)" in md
    two, _ = load_runs(run_dirs)
    t_h = two.summary["policies"]["flamingo"]["time_to_target_s"]
    assert f"{t_h / 3600:.2f}" in md if t_h is not None else "| - |" in md
    targets = ", ".join(f"{t:.4f}" for t in two.summary["target_accuracy_by_seed"].values())
    assert f"; target accuracy {targets} (highest_common - 0.0100 on the smoothed curve (mean of the last 3 evaluations)" in md
    html = result.html.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("<img ") == len(FIGURES)
    assert not list(result.out_dir.glob(".*.tmp"))  # nothing left half-written


def test_cli_report_writes_into_the_run_directory(run_dirs, tmp_path, capsys):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(run_dirs[1], run, ignore=shutil.ignore_patterns("checkpoints", "report"))
    assert main(["report", str(run), "--format", "png"]) == 0
    assert sorted(p.name for p in (run / "report").iterdir()) == sorted([f"{s}.png" for s in FIGURES] + ["report.md", "report.html", ".flamingo-sim.json"])
    assert "report.md" in capsys.readouterr().out


def test_not_a_run_directory_is_one_clear_line(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not a flamingo-sim run directory" in err
    (tmp_path / "metrics.parquet").write_bytes(b"not parquet")
    with pytest.raises(FlamingoError, match="cannot read"):
        write_report([tmp_path])
    with pytest.raises(FlamingoError, match="no such run directory"):
        load_runs([tmp_path / "missing"])


def test_a_refused_out_is_the_only_line_for_an_incomplete_run(run_dirs, tmp_path, capsys):
    """Issue 50: "RUN: incomplete run: ..." was printed before the --out refusal; it is said once the report is written."""
    import shutil

    run = tmp_path / "incomplete"
    shutil.copytree(run_dirs[1], run, ignore=shutil.ignore_patterns("checkpoints", "report", "summary.json"))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("x")
    assert main(["report", str(run), "--out", str(mine)]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == (f"flamingo-sim report: error: --out {mine}: holds files flamingo-sim did not write (no .flamingo-sim.json); "
                           "refusing to replace it - choose a new or empty directory\n")
    assert main(["report", str(run), "--out", str(tmp_path / "report"), "--format", "png"]) == 0
    assert capsys.readouterr().err.startswith(f"flamingo-sim report: {run}: incomplete run: ")


def test_a_label_given_twice_is_refused(run_dirs, tmp_path, capsys):
    """Issue 50: ``--labels a a`` drew two runs under one legend label, and exited 0."""
    assert main(["report", str(run_dirs[0]), str(run_dirs[1]), "--labels", "a", "a", "--out", str(tmp_path / "r")]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == "flamingo-sim report: error: --labels: 'a' given twice; each run directory needs its own legend label\n"
    assert not (tmp_path / "r").exists()


# --- trace-set figures -------------------------------------------------------------------------


def test_trace_figures_show_the_report_counts_and_the_shifts():
    from flamingo_sim.report import traces as tr
    from flamingo_sim.traces.store import load_client_traces

    report = json.loads((ROOT / "traces/synthetic/report.json").read_text())
    counts = tr.selection_counts(report).set_index("stage")["count"]
    assert counts["devices seen"] == report["devices"]["seen"] and counts["selected"] == report["devices"]["selected"]
    assert counts["clients"] == report["n_clients"]
    fig = tr.selection_figure(report)
    bars = [p.get_width() for c in fig.axes[0].containers for p in c.patches]
    assert bars[0] == report["devices"]["seen"] and bars[-1] == report["devices"]["selected"]

    traces = load_client_traces(ROOT / "traces/synthetic")
    fig = tr.shifts_figure(traces, hours=6)
    mesh = fig.axes[0].collections[0]
    row0 = np.flatnonzero(traces.client_device == 0)
    order = row0[np.argsort(traces.shift_s[row0])]
    expect = np.stack([traces.level_at(t)[order] for t in np.arange(0.0, 6 * 3600, traces.step_s)], axis=1)
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(expect.shape), expect)
    lines = lines_by_gid(tr.battery_days_figure(traces, days=1, n_devices=2))
    d0 = traces.device_ids[0]
    np.testing.assert_allclose(lines[f"device|{d0}"].get_ydata(), traces.level_pct[0, : 86400 // traces.step_s])
    share = tr.availability_by_hour(traces, hours=1)
    assert share["charging"].iloc[0] == pytest.approx(np.mean(traces.state_at(0.0) > 0))
