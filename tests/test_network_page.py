"""docs/modelling-notes.md's measured network section quotes docs/results/network/network.json, number for number."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "network" / "network.json"
PAGE = ROOT / "docs" / "modelling-notes.md"
START = "<!-- network-measured: written from docs/results/network/network.json; tests/test_network_page.py checks it -->\n"
END = "\n<!-- /network-measured -->"
NAMES = {"openimage_mobilenet": "OpenImage / MobileNetV2", "openimage_shufflenet": "OpenImage / ShuffleNetV2 x2",
         "speech_resnet34": "Google Speech / ResNet-34"}


def _x(v: float | None, ci: list[float] | None = None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "no ratio"
    return f"{v:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"


def _h(v: float | None) -> str:
    return "not reached" if v is None else f"{v / 3600:.1f} h"


def _where(a: float, a_ci: list[float], b: float, b_ci: list[float]) -> str:
    """Whether each of two ratios lies in the other's interval, in words (the page's claim, read off the file)."""
    in_a, in_b = a_ci[0] <= b <= a_ci[1], b_ci[0] <= a <= b_ci[1]
    if in_a and in_b:
        return "inside both intervals"
    if in_b:
        return "inside the traces run's interval, outside the log-normal run's"
    if in_a:
        return "inside the log-normal run's interval, outside the traces run's"
    return "outside both intervals"


def network_md(results: dict[str, Any]) -> str:
    """The section's measured part (``python tests/test_network_page.py`` prints it)."""
    studies = results["studies"]
    log, tr = studies["lognormal"]["tasks"], studies["traces"]["tasks"]
    lines = [f"`{results['command']}` (commit `{results['commit'][:12]}`, {results['machine']}; the four `reproduce` commands "
             "it ran are in the results file): each task's 3 seeds x 100 rounds, both policies, on the generated proxy task, "
             "with the log-normal network (the default) and with the traces' (`--set network.model=traces`), 95 % paired "
             "bootstrap intervals over the seeds. The log-normal runs' transfer share is replayed without the training and "
             "matched round for round against the runs.", "",
             "| task | speedup, lognormal | speedup, traces | energy efficiency, lognormal | energy efficiency, traces |",
             "|---|---|---|---|---|"]
    for task in log:
        a, b = log[task]["policies"]["flamingo"], tr[task]["policies"]["flamingo"]
        lines.append(f"| {NAMES[task]} | {_x(a['speedup'], a['speedup_ci'])} | {_x(b['speedup'], b['speedup_ci'])} | "
                     f"{_x(a['energy_efficiency'], a['energy_efficiency_ci'])} | {_x(b['energy_efficiency'], b['energy_efficiency_ci'])} |")
    lines += ["", "Per policy (means over the seeds): time to the target, the share of the rounds' time the client each round "
              "waited for spent on its transfers, the radio's share of all energy drawn, and the mean round's length with the "
              "traces' network over the log-normal one:", "",
              "| task | policy | time to target, lognormal / traces | transfers' share of round time, lognormal / traces | "
              "radio's share of energy, traces | mean round, traces / lognormal |",
              "|---|---|---|---|---|---|"]
    for task in log:
        for policy in log[task]["policies"]:
            a, b = log[task]["policies"][policy], tr[task]["policies"][policy]
            ratio = tr[task]["mean_round_s"][policy] / log[task]["mean_round_s"][policy]
            lines.append(f"| {NAMES[task]} | {policy} | {_h(a['time_to_target_s'])} / {_h(b['time_to_target_s'])} | "
                         f"{_pct(a['network']['transfer_time_share'])} / {_pct(b['network']['transfer_time_share'])} | "
                         f"{_pct(b['network']['radio_energy_share'])} | {ratio:.2f}x |")
    lines += ["", "`network.unmetered_only` on the main job (OpenImage / MobileNetV2), under each pricing: clients lost to "
              "training at the end, time to the target, the mean round, requests declined in a run (means over the seeds), "
              "clients left unreachable per round, and Flamingo's speedup:", "",
              "| pricing | policy | clients lost, off / on | time to target, off / on | mean round, off / on | declined, off / on | "
              "unreachable per round, on | speedup, on |",
              "|---|---|---|---|---|---|---|---|"]
    for pricing in ("lognormal", "traces"):
        off, on = studies[pricing]["tasks"]["openimage_mobilenet"], studies[f"{pricing}_unmetered"]["tasks"]["openimage_mobilenet"]
        for policy in off["policies"]:
            p, q = off["policies"][policy], on["policies"][policy]
            speedup = _x(q["speedup"], q["speedup_ci"]) if policy != "baseline" else "-"
            lines.append(f"| {pricing} | {policy} | {p['clients_lost']:.0f} / {q['clients_lost']:.0f} | {_h(p['time_to_target_s'])} / "
                         f"{_h(q['time_to_target_s'])} | {off['mean_round_s'][policy] / 3600:.2f} h / {on['mean_round_s'][policy] / 3600:.2f} h | "
                         f"{p['dropped']['declined']:.0f} / {q['dropped']['declined']:.0f} | {q['network']['n_unreachable_per_round']:.0f} | {speedup} |")
    a, b = log["speech_resnet34"]["policies"]["flamingo"], tr["speech_resnet34"]["policies"]["flamingo"]
    where = _where(a["speedup"], a["speedup_ci"], b["speedup"], b["speedup_ci"])
    lines += ["", f"Google Speech / ResNet-34, the task the network decides: the speedup moves from {_x(a['speedup'])} to "
              f"{_x(b['speedup'])} ({b['speedup'] - a['speedup']:+.2f}, {where}; the paper: 1.2x), the energy "
              f"efficiency from {_x(a['energy_efficiency'])} to {_x(b['energy_efficiency'])} (the paper: 1.6x)."]
    return "\n".join(lines)


def test_the_page_quotes_the_results_file():
    results = json.loads(RESULTS.read_text())
    page = PAGE.read_text()
    quoted = page[page.index(START) + len(START): page.index(END)]
    assert quoted == network_md(results)


def test_the_results_file_holds_every_study_and_its_replay_matched():
    results = json.loads(RESULTS.read_text())
    assert set(results["studies"]) == {"lognormal", "traces", "lognormal_unmetered", "traces_unmetered"}
    assert set(results["studies"]["traces"]["tasks"]) == set(NAMES)
    assert all(t.get("replay_matches_run", True) for s in results["studies"].values() for t in s["tasks"].values())
    assert "(with uncommitted changes)" not in results["commit"]


if __name__ == "__main__":
    print(network_md(json.loads(RESULTS.read_text())))


def test_the_lognormal_identity_check_is_recorded_as_identical():
    """The modelling notes say the default model's output is the code-before's, byte for byte: the results file says so."""
    doc = json.loads((ROOT / "docs" / "results" / "network" / "lognormal_identity.json").read_text())
    assert doc["identical"] is True
    assert doc["before"]["metrics_sha256"] == doc["after"]["metrics_sha256"] and doc["before"]["summary_sha256"] == doc["after"]["summary_sha256"]
    assert "docs/results/network/lognormal_identity.json" in PAGE.read_text().replace("\n  ", " ")
