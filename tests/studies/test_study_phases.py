"""A long study says where it is (issue 44): a header on stdout for each phase, one estimate for the whole
study, and a reading that says why there is none instead of "0 of 0"."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from flamingo_sim.fl.runner.executors.progress import Progress, StudyPlan
from flamingo_sim.fl.runner.unit_files import Unit
from flamingo_sim.studies.reproduce.tables import TaskResult, agreement_text, table2


def _unit(tmp_path: Path, seed: int) -> Unit:
    return Unit("x", (), None, str(tmp_path), "baseline", seed, f"baseline seed {seed}")


def test_a_phase_header_and_the_counts_over_every_phase():
    plan = StudyPlan([("paper's readings", 12), ("explore-then-share", 6), ("attribution", 12)])
    assert plan.start(1) == "== phase 2 of 3: explore-then-share (6 units) =="
    assert (plan.before, plan.after, plan.total) == (12, 12, 30)


def test_the_estimate_covers_the_later_phases_and_starts_from_the_earlier_ones(tmp_path):
    plan = StudyPlan([("one", 4), ("two", 2), ("three", 4)])
    plan.start(1)
    plan.durations.extend([10.0, 10.0, 10.0, 10.0])  # phase one's four units, 10 s each
    said: list[str] = []
    progress = Progress(2, 0, 1, said.append, plan=plan)
    # before any unit of this phase finished: this phase's 2 and the last phase's 4 units at 10 s each
    assert progress.eta_s() == pytest.approx(60.0)
    assert progress.summary() == "units of the study (phase 2 of 3): 4/10 done, 0 running, 0 failed, about 1:00 left"
    progress.start(_unit(tmp_path, 0))
    progress.finish(_unit(tmp_path, 0))
    assert progress.done == 1 and len(plan.durations) == 5  # this phase's units add to the study's
    assert progress.summary().startswith("units of the study (phase 2 of 3): 5/10 done, 0 running, 0 failed, about ")


def test_one_phase_reads_as_before(tmp_path):
    progress = Progress(3, 1, 1, lambda _m: None, plan=StudyPlan([("only", 3)]))
    assert progress.summary() == "units: 1/3 done, 0 running, 0 failed"


def test_reproduce_names_each_phase_on_stdout_with_its_units(tmp_path, monkeypatch):
    """``reproduce --quick --readings paper --attribution``: every phase announced with what it runs, every
    config of every phase checked and counted before the first runs."""
    import flamingo_sim.studies.reproduce.run as run_module
    from flamingo_sim.studies.reproduce import reproduce
    from flamingo_sim.studies.reproduce.attribution import run_configs

    calls = []

    class Stop(Exception):
        pass

    def fake_run_tasks(out_dir, *, overrides, phases, header=None, **_kw):
        calls.append((Path(out_dir), phases.index, list(phases.phases), header))
        raise Stop

    monkeypatch.setattr(run_module, "run_tasks", fake_run_tasks)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(Stop):
        reproduce(tmp_path / "out", quick=True, readings="paper", attribution=True)
    from flamingo_sim.studies.reproduce.mechanisms import MECHANISMS

    others = [n for n, c in run_configs().items() if c != run_configs()["paper"]]
    assert others
    n = 2 + len(others) + len(MECHANISMS) + 5  # the main runs, explore-then-share, the walk, the mechanisms, each phone left out
    # the header goes to the phase's run, which prints it once its checks passed (a refusal is then the only line)
    assert printed.getvalue() == ""
    (folder, index, phases, header), = calls
    assert header == f"== phase 1 of {n}: baseline and Flamingo, the paper's readings (12 units) =="
    assert (folder, index) == (tmp_path / "out", 0)
    # 3 tasks x 2 seeds x 2 policies in every phase
    assert phases[:2 + len(others)] == [("baseline and Flamingo, the paper's readings", 12),
                                        ("the paper's readings with Appendix B's explore-then-share", 12),
                                        *[(f"attribution, configuration {name!r}", 12) for name in others]]
    assert [t for t, _n in phases[2 + len(others):]] == [f"mechanism: {m.label}" for m in MECHANISMS] + [
        f"mechanism: phone mix: without the {p}" for p in ("Galaxy Tab S6", "OnePlus 8", "Google Pixel 3", "Samsung S10e", "Xiaomi Mi 10")]
    assert all(units == 12 for _t, units in phases)


def test_a_bad_override_of_a_later_phase_is_refused_before_the_first_runs(tmp_path, monkeypatch):
    import flamingo_sim.studies.reproduce.run as run_module
    from flamingo_sim.errors import ConfigError
    from flamingo_sim.studies.reproduce import reproduce

    monkeypatch.setattr(run_module, "run_tasks", lambda *_a, **_k: pytest.fail("a phase ran"))
    with pytest.raises(ConfigError, match=r"^reproduce: run openimage_mobilenet: .*fl\.nokey"):
        reproduce(tmp_path / "out", quick=True, overrides=["fl.nokey=1"])
    assert not (tmp_path / "out").exists()


def _result(task: str, base_s: list[float | None], flam_s: list[float | None]) -> TaskResult:
    def entry(times: list[float | None]) -> dict:
        per_seed = {str(i): {"time_to_target_s": t, "energy_to_target_j": t} for i, t in enumerate(times)}
        mean = None if None in times else sum(times) / len(times)  # type: ignore[arg-type]
        return {"time_to_target_s": mean, "energy_to_target_j": mean, "per_seed": per_seed}

    b, f = entry(base_s), entry(flam_s)
    ratio = None if b["time_to_target_s"] is None or f["time_to_target_s"] is None else b["time_to_target_s"] / f["time_to_target_s"]
    f.update(speedup=ratio, energy_efficiency=ratio)
    return TaskResult(task, Path("."), {"policies": {"baseline": b, "flamingo": f}}, None)


def test_no_reading_says_why_instead_of_0_of_0():
    """Issue 44: "direction agrees on 0 of 0 tasks" where Flamingo never reached the (paper's) target."""
    results = [_result("openimage_mobilenet", [3600.0, 7200.0], [None, 3600.0]), _result("speech_resnet34", [3600.0], [None])]
    reading = table2(results).reading
    assert "0 of 0" not in reading
    assert reading == ("Reading: speedup: no reading, none of the tasks has both our figure and the paper's (OpenImage / MobileNetV2: "
                       "flamingo in seed 0 never reached the target; Google Speech / ResNet-34: flamingo in seed 0 never reached the target); "
                       "energy efficiency: no reading, none of the tasks has both our figure and the paper's (OpenImage / MobileNetV2: "
                       "flamingo in seed 0 never reached the target; Google Speech / ResNet-34: flamingo in seed 0 never reached the target).")


def test_a_partial_reading_names_what_it_left_out():
    results = [_result("openimage_mobilenet", [3600.0], [1800.0]), _result("speech_resnet34", [None, 60.0], [60.0, None])]
    reading = table2(results).reading
    assert reading.startswith("Reading: speedup: direction agrees on 1 of 1 tasks, magnitude within 2x on 0 of 1 (not read: Google Speech / "
                              "ResNet-34: baseline in seed 0 and flamingo in seed 1 never reached the target); ")
    assert agreement_text(3, 2, 1, "tasks", []) == "direction agrees on 2 of 3 tasks, magnitude within 2x on 1 of 3"  # as before
