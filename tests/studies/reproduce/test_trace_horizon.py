"""The reproduction report says which runs went past their trace set's wrap-free horizon (issue 50: the quick
ShuffleNetV2 task's baseline reached 709.7 h on the shipped traces' 697.3 h, said only once on a unit's log)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from flamingo_sim.studies.reproduce.tables import TaskResult
from flamingo_sim.studies.reproduce.write import horizon_note, trace_horizon_s

ROOT = Path(__file__).resolve().parents[3]
H = 697.3333 * 3600  # the shipped traces/synthetic: 4,322 ten-minute slots (720.3 h) less the largest shift, 23 h


def _result(task: str, ends_h: dict[tuple[str, int], list[float]], horizon_s: float | None) -> TaskResult:
    rows = [{"policy": p, "seed": s, "round": i, "time_s": t * 3600} for (p, s), times in ends_h.items() for i, t in enumerate(times)]
    return TaskResult(task, Path("."), {}, pd.DataFrame(rows), extra={"horizon_s": horizon_s})


def test_the_shipped_traces_horizon_read_from_a_runs_inputs(tmp_path):
    # inputs.json as a run writes it: each input file by its config key, with its absolute path
    (tmp_path / "inputs.json").write_text(json.dumps({
        "traces.path devices.parquet": {"path": str(ROOT / "traces/synthetic/devices.parquet"), "sha256": "-"},
        "phones.profiles_dir x": {"path": str(ROOT / "profiles/phones.yaml"), "sha256": "-"}}))
    assert abs(trace_horizon_s(tmp_path) - (4322 * 600 - 23 * 3600)) < 1e-6  # 697.3 h
    assert trace_horizon_s(tmp_path / "absent") is None


def test_a_run_past_the_horizon_is_named_with_its_round_and_time():
    # ShuffleNetV2's baseline seed 1 ends its rounds 0-2 at 690, 700.2 and 709.7 h: past 697.3 h from round 1, 2 rounds
    shuffle = _result("openimage_shufflenet", {("baseline", 0): [0.0, 300.0, 600.0], ("baseline", 1): [690.0, 700.2, 709.7],
                                               ("flamingo", 1): [0.0, 100.0, 200.0]}, H)
    speech = _result("speech_resnet34", {("baseline", 0): [0.0, 50.0]}, H)
    note = horizon_note([shuffle, speech])
    assert note == ("Trace horizon: 1 run passed the trace set's wrap-free horizon, after which clients replay their battery traces "
                    "from the start: OpenImage / ShuffleNetV2 x2, baseline seed 1, from round 1 (2 of its rounds; 709.7 h at its last "
                    "against the traces' 697.3 h). Fewer rounds (`fl.rounds`) or a longer trace set keeps a run inside it.")


def test_runs_within_the_horizon_say_so_and_an_unknown_horizon_says_that():
    inside = _result("openimage_mobilenet", {("baseline", 0): [0.0, 697.3]}, H)  # at the horizon, not past it
    assert horizon_note([inside]) == "Trace horizon: every run stayed within its trace set's wrap-free horizon (697.3 h)."
    assert horizon_note([_result("openimage_mobilenet", {("baseline", 0): [0.0, 900.0]}, None)]).startswith("Trace horizon: not known")
