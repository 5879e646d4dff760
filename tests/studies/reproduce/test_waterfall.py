"""The attribution figure reads without the report's caption (issue 44): a legend, ticks on every panel,
"no ratio" inside the plot, factor labels clear of their error bars. Drawn from the committed
``docs/results/reproduce_quick/attribution.json`` (a walk with a step without a ratio, and a panel within one decade)."""

from __future__ import annotations

import json

import pytest

from flamingo_sim.studies.reproduce.why import LEGEND, log_ticks, walks_from_json, waterfall
from tests.report_runs import ROOT

RESULTS = ROOT / "docs/results/reproduce_quick/attribution.json"


@pytest.fixture(scope="module")
def drawn():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = waterfall(walks_from_json(json.loads(RESULTS.read_text())))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return fig, canvas.get_renderer()


def test_a_legend_says_what_the_colours_and_lines_mean(drawn):
    fig, _r = drawn
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts[: len(LEGEND)] == [text for _k, _c, text in LEGEND]
    assert texts[-1].startswith("no ratio: ")


def test_every_panel_has_at_least_two_labelled_ticks_in_its_range(drawn):
    fig, _r = drawn
    for ax in fig.axes:
        lo, hi = ax.get_ylim()
        ticks = [t for t in ax.get_yticks() if lo <= t <= hi]
        assert len(ticks) >= 2, (ax.get_title(), ticks)
        labels = [t.get_text() for t in ax.get_yticklabels() if lo <= t.get_position()[1] <= hi]
        assert all(labels) and len(labels) == len(ticks)
    # the speech speedup panel spans less than a decade around 1 (issue 44: it showed only the tick "1")
    assert log_ticks(0.35, 1.9) == pytest.approx([0.5, 0.7, 1.0, 1.5])
    assert log_ticks(0.8, 30) == pytest.approx([1.0, 3.0, 10.0, 30.0])


def test_no_ratio_is_text_inside_the_plot_not_along_an_axis(drawn):
    fig, renderer = drawn
    found = 0
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        for text in ax.texts:
            if (text.get_gid() or "").endswith("|no ratio"):
                found += 1
                assert text.get_rotation() == 0
                extent = text.get_window_extent(renderer)
                assert box.x0 + 2 < extent.x0 and extent.x1 < box.x1 and box.y0 < extent.y0 and extent.y1 < box.y1
    assert found == 6  # the paper's readings have no ratio in any of the 3 tasks x 2 quantities


def test_factor_labels_sit_above_their_error_bars_and_clear_of_each_other(drawn):
    fig, renderer = drawn
    for ax in fig.axes:
        tops = {}  # x -> the highest point of its error bar, in pixels (errorbar draws its bars as a LineCollection)
        for coll in ax.collections:
            for seg in getattr(coll, "get_segments", lambda: [])():
                if len(seg) == 2 and seg[0][0] == seg[1][0]:  # a vertical segment: an error bar
                    tops[float(seg[0][0])] = ax.transData.transform((seg[0][0], max(seg[0][1], seg[1][1])))[1]
        labels = [t for t in ax.texts if (t.get_gid() or "").endswith("|label")]
        assert labels
        extents = [t.get_window_extent(renderer) for t in labels]
        checked = 0
        for t, e in zip(labels, extents):
            x = float(t.xy[0])
            if x in tops:
                assert e.y0 >= tops[x] - 0.5, t.get_text()
                checked += 1
        assert checked >= 1 and len(tops) >= 1, (ax.get_title(), sorted(tops))  # the check ran (it never did before: issue 50)
        for i, a in enumerate(extents):
            for b in extents[i + 1:]:
                assert not a.overlaps(b)
