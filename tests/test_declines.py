"""Decline reasons are recorded (issue 42): one count per reason per round in metrics.parquet
(``declined_<reason>``: the shipped reasons in every run, a policy's own registered in its
``DECLINE_REASONS``), summing to ``dropped_declined``; a total per reason in summary.json, in the
printed summary and in the report; a reason the policy did not register stops the run in one line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from flamingo_sim.devices.policies import DECLINE_REASONS
from flamingo_sim.errors import FlamingoError
from flamingo_sim.fl.metrics.summary import format_summary
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.sim.records import RoundRecord, count_declines
from flamingo_sim.report.write import write_report

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = [f"declined_{r}" for r in DECLINE_REASONS]


def test_count_declines_counts_each_registered_reason_and_refuses_others():
    registered = ("too_hot", "in_use_exploring", "low_battery_in_use", "not_charging")
    reasons = np.array(["not_charging", "too_hot", "not_charging"], dtype=object)
    assert count_declines(registered, reasons, "charging") == {"too_hot": 1, "in_use_exploring": 0, "low_battery_in_use": 0, "not_charging": 2}
    assert count_declines(registered, reasons[:0], "charging") == dict.fromkeys(registered, 0)
    with pytest.raises(FlamingoError) as exc:
        count_declines(DECLINE_REASONS, reasons, "charging")
    assert str(exc.value) == ("policy 'charging' declined a request with reason 'not_charging', which it does not register: list each "
                              "reason it declines with in its class's DECLINE_REASONS (registered: too_hot, in_use_exploring, low_battery_in_use)")
    with pytest.raises(FlamingoError, match=r"declined a request without a reason \(decline_reason ''\)"):
        count_declines(DECLINE_REASONS, np.array([""], dtype=object), "quiet")


def test_a_record_round_trips_its_decline_columns_after_the_drops():
    record = RoundRecord(policy="p", seed=0, round=1, time_s=1.0, duration_s=1.0, accuracy=0.5, loss=1.0, train_loss=1.0, n_online=10,
                         n_selected=4, n_kept=1, dropped={"declined": 3, "unavailable": 0, "battery_exhausted": 0, "interrupted": 0, "too_slow": 0},
                         energy_j=1.0, energy_cum_j=1.0, interference_s=0.0, clients_lost=0, clients_lost_cum=0, steps_by_choice={"4567": 2},
                         interference_s_by_phone={"pixel_3": 0.0}, declined={"too_hot": 1, "not_charging": 2})
    row = record.to_row()
    keys = list(row)
    assert keys[keys.index("dropped_too_slow") + 1: keys.index("energy_j")] == ["declined_too_hot", "declined_not_charging"]
    assert RoundRecord.from_row(row) == record


@pytest.fixture(scope="module")
def charging_run(tmp_path_factory):
    """The guide's charging-only policy against the baseline on the example's tiny population, 3 rounds."""
    out = tmp_path_factory.mktemp("declines") / "run"
    result = run_experiment(ROOT / "examples" / "charging_only.yaml", out_dir=out, overrides=("fl.rounds=3",), log=lambda _m: None)
    return result


def test_declines_are_counted_per_reason_per_round_and_sum_to_dropped_declined(charging_run):
    m = charging_run.metrics
    charging = m[m["policy"] == "charging_only"]  # its display name: the class's name attribute, not the import path
    baseline = m[m["policy"] == "baseline"]
    assert len(charging) == len(baseline) == 4  # round 0 and three rounds
    for rows, own in ((charging, ["declined_not_charging"]), (baseline, [])):
        cols = SHIPPED + own
        assert (rows[cols].sum(axis=1) == rows["dropped_declined"]).all()
    assert charging["declined_not_charging"].sum() > 0  # most of the example's phones are unplugged
    assert baseline["declined_not_charging"].isna().all()  # not a reason of the baseline's
    keys = list(m.columns)
    assert keys[keys.index("dropped_too_slow") + 1: keys.index("dropped_too_slow") + 4] == SHIPPED


def test_the_summary_and_the_report_show_the_totals(charging_run, tmp_path):
    m, summary = charging_run.metrics, charging_run.summary
    entry = summary["policies"]["charging_only"]
    total = float(m.loc[m["policy"] == "charging_only", "declined_not_charging"].sum())
    assert entry["declined"] == {"too_hot": 0.0, "in_use_exploring": 0.0, "low_battery_in_use": 0.0, "not_charging": total}
    assert entry["per_seed"]["0"]["declined"]["not_charging"] == int(total)
    assert summary["policies"]["baseline"]["declined"] == {"too_hot": 0.0, "in_use_exploring": 0.0, "low_battery_in_use": 0.0}
    assert f"declined (charging_only, per seed): too hot 0, in use exploring 0, low battery in use 0, not charging {total:.0f}" in format_summary(summary)
    report = write_report([charging_run.out_dir], tmp_path / "report")
    md = report.markdown.read_text()
    assert "## Declined requests" in md
    assert "| run | policy | too hot | in use exploring | low battery in use | not charging |" in md
    assert f"| charging_only | 0.0 | 0.0 | 0.0 | {total:.1f} |" in md
    assert "| baseline | 0.0 | 0.0 | 0.0 | - |" in md
    assert "<h2>Declined requests</h2>" in report.html.read_text()


def test_the_summary_tables_columns_stay_aligned_with_a_long_display_name(charging_run):
    lines = format_summary(charging_run.summary).splitlines()
    header, rows = lines[0], [ln for ln in lines[2:4]]
    assert [r.split()[0] for r in rows] == ["baseline", "charging_only"]
    assert all(len(r) == len(header) for r in rows)


def test_an_unregistered_reason_stops_the_run_in_one_line(tmp_path):
    (tmp_path / "sloppy.py").write_text(textwrap.dedent('''
        import numpy as np
        from flamingo_sim.devices.policies import PricedPolicy


        class Sloppy(PricedPolicy):
            name = "sloppy"

            def run_tasks(self, request):
                ps = self.ready(request)
                reason = np.full(request.k, "busy", dtype=object)
                return self.run_fixed(request, ps.baseline_latency_s, ps.baseline_power_w, ps.baseline_label_idx, self.name, reason)
    '''))
    exp = tmp_path / "e.yaml"
    exp.write_text("name: sloppy\ntraces: {path: traces/synthetic}\ndata: {name: synthetic, proxy: {n_clients: 100}}\n"
                   "fl: {participants_per_round: 4, local_steps: 2, rounds: 1}\npolicies: [\"sloppy:Sloppy\"]\n")
    with pytest.raises(FlamingoError) as exc:
        run_experiment(exp, out_dir=tmp_path / "run", log=lambda _m: None)
    assert str(exc.value) == ("policy 'sloppy' broke its contract: TaskOutcome.decline_reason of a declined task must be one of its "
                              "DECLINE_REASONS (too_hot, in_use_exploring, low_battery_in_use), got 'busy', which it does not register; "
                              f"fix it, then continue it with: flamingo-sim run {exp} --out {tmp_path / 'run'} --resume")
    assert "\n" not in str(exc.value)
    assert (tmp_path / "run" / "config.yaml").is_file() and not (tmp_path / "run" / "summary.json").exists()  # resumable, not finished
