"""A run's state is read from its experiment once, recorded in its directory, and read forward (issue 49).

Every unit builds from the run's record (``config.yaml``, which each unit carries), never from the
experiment file again: an edit of the file mid-run changes nothing. The run reads its experiment once,
writes ``metrics.parquet`` once per unit and reads each unit's result back once; its ``summary.json``
names the plug-ins that ran with their parameters, and records no key a plug-in does not take.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner import unit_files, units
from flamingo_sim.fl.runner.callbacks import Callback
from flamingo_sim.fl.runner.plan import prepare_run
from flamingo_sim.fl.runner.results import finish_run
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.runner.rundir import run_guard
from flamingo_sim.fl.runner.worker import run_logged
from flamingo_sim.io import as_written
from tests.cli_runs import assert_identical
from tests.fl.runner.test_run import quiet  # noqa: F401  (quiet: autouse, no progress bars)

ROOT = Path(__file__).resolve().parents[3]

#: Two units (baseline and flamingo, seed 0) of four rounds on 200 clients, one checkpoint at the end.
EXPERIMENT = """\
extends: openimage_mobilenet
name: recorded
data: {proxy: {n_clients: 200}}
fl: {rounds: 4, participants_per_round: 8, local_steps: 4, eval_every: 2}
checkpoint_every: 4
"""
#: The same file as a user might edit it while the run goes on: a policy's threshold, the selector, the rounds
#: (units that built from the file took the first two and ran 4 rounds: issue 49's "two configurations").
EDITED = EXPERIMENT.replace("fl: {rounds: 4,", "policy: {min_battery_pct: 100}\nfl: {selection: battery, rounds: 2,")


def _quiet(_msg: str) -> None:
    return None


def experiment(tmp_path: Path) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT)
    return path


class EditAfterFirstUnit(Callback):
    """Rewrites the experiment file once the first (policy, seed) run ends, before the second starts."""

    def __init__(self, path: Path) -> None:
        self.path, self.ended = path, 0

    def on_run_end(self, sim: Any, records: Any) -> None:
        self.ended += 1
        if self.ended == 1:
            self.path.write_text(EDITED)


def test_an_edit_of_the_experiment_between_units_changes_nothing(tmp_path):
    exp = experiment(tmp_path)
    whole = run_experiment(exp, out_dir=tmp_path / "whole", log=_quiet)
    editor = EditAfterFirstUnit(exp)
    edited = run_experiment(exp, out_dir=tmp_path / "edited", callbacks=[editor], log=_quiet)
    assert editor.ended == 2 and exp.read_text() == EDITED  # the second unit ran after the edit
    assert_identical(edited.metrics, whole.metrics)
    assert edited.summary == whole.summary
    assert (tmp_path / "edited" / "config.yaml").read_text() == (tmp_path / "whole" / "config.yaml").read_text()


def test_a_unit_in_a_worker_builds_from_the_record_not_the_edited_file(tmp_path, monkeypatch):
    """What a ``--jobs N`` worker or a Ray task runs (:func:`run_logged` of the unit's JSON), after the file changed."""
    exp = experiment(tmp_path)
    whole = run_experiment(exp, out_dir=tmp_path / "whole", log=_quiet)
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")  # run_logged sets it; restored after the test
    run = prepare_run(exp, (), None, tmp_path / "edited", resume=False, say=_quiet)
    with run_guard(run.out, run.cfg, run.experiment, resume=False, record=run.record):
        exp.write_text(EDITED)
        loads = counting(monkeypatch, units.unit_config)
        for unit in run.units(2):
            assert run_logged(unit.to_json()) is None, unit.path(".log").read_text()
        assert len(loads) == 2  # one config per unit, from the record it carries
        result = finish_run(run, _quiet, print_summary=False)
    assert_identical(result.metrics, whole.metrics)
    assert result.summary["policies"] == whole.summary["policies"]


def counting(monkeypatch: pytest.MonkeyPatch, func: Callable[..., Any], when: Callable[[Any], bool] = lambda _r: True) -> list[Any]:
    """Count the calls of ``func`` (whose result satisfies ``when``) wherever the package has bound it."""
    calls: list[Any] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        result = func(*args, **kwargs)
        if when(result):
            calls.append(args)
        return result

    bound = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("flamingo_sim") and module is not None:
            for attr, value in list(vars(module).items()):
                if value is func:
                    monkeypatch.setattr(module, attr, counted)
                    bound += 1
    assert bound
    return calls


def test_a_run_reads_its_experiment_once_and_writes_its_metrics_once_per_unit(tmp_path, monkeypatch):
    from flamingo_sim.fl import config, plugins
    from flamingo_sim.fl.strategy import aggregators

    exp = experiment(tmp_path)
    loads = counting(monkeypatch, config.load_experiment)
    records = counting(monkeypatch, units.unit_config)
    writes = counting(monkeypatch, unit_files.write_metrics)
    reads = counting(monkeypatch, unit_files.unit_result, when=lambda res: res is not None)  # a finished unit's file read back
    gathers = counting(monkeypatch, unit_files.gather)
    policies = counting(monkeypatch, plugins.experiment_policy)
    aggregators_built = counting(monkeypatch, aggregators.make_aggregator)
    result = run_experiment(exp, out_dir=tmp_path / "run", log=_quiet)
    assert result.metrics["policy"].nunique() == 2  # two units, in this process
    assert len(loads) == 1 and records == []  # the experiment read once; the units took the run's config
    assert len(writes) == 2  # metrics.parquet once per unit (checkpoint_every: the last round), none at the end
    assert len(reads) == 2 and gathers == []  # each unit's result read back once, as it finished
    assert len(policies) == 2 and len(aggregators_built) == 2  # one each per simulation: the check's taken by the first


def test_the_summary_names_the_plugins_and_their_parameters_as_used(tmp_path):
    exp = experiment(tmp_path)
    run = run_experiment(exp, out_dir=tmp_path / "run", overrides=["aggregation.name=fedprox", "aggregation.mu=0.1",
                                                                   "fl.selection=oort", "selector.exploration=0.3"], log=_quiet)
    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert written["plugins"] == run.summary["plugins"]
    plugins = written["plugins"]
    assert plugins["policies"] == {"baseline": {"name": "baseline", "params": {}}, "flamingo": {"name": "flamingo", "params": {}}}
    assert plugins["selector"] == {"name": "oort", "params": {"exploration": 0.3, "straggler_penalty": 2.0, "preferred_duration_s": None}}
    assert plugins["aggregator"] == {"name": "fedprox", "params": {"mu": 0.1, "weighting": "samples"}}
    assert plugins["policy"]["min_battery_pct"] == 30.0  # the section every policy is built with
    assert list(written)[-1] == "plugins"  # after every key a summary had before


def test_a_key_the_aggregator_does_not_take_is_not_recorded(tmp_path):
    exp = ROOT / "examples" / "trimmed_mean.yaml"  # trimmed_mean:TrimmedMean takes trim, and no weighting
    out = tmp_path / "run"
    run_experiment(exp, out_dir=out, log=_quiet)
    assert yaml.safe_load((out / "config.yaml").read_text())["aggregation"] == {"name": "trimmed_mean:TrimmedMean", "trim": 0.2}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["plugins"]["aggregator"] == {"name": "trimmed_mean:TrimmedMean", "params": {"trim": 0.2}}
    assert summary["plugins"]["policies"] == {"baseline": {"name": "baseline", "params": {}}}
    resumed = run_experiment(exp, out_dir=out, resume=True, log=_quiet)  # the record without the key still resumes
    assert as_written(resumed.summary) == summary
    with pytest.raises(ConfigError, match=r"trimmed_mean\.yaml: aggregation\.weighting: aggregator 'trimmed_mean:TrimmedMean' takes no "
                                          r"weighting \(its constructor has no weighting parameter\), so the key would not apply; remove it$"):
        run_experiment(exp, out_dir=tmp_path / "uniform", overrides=["aggregation.weighting=uniform"], log=_quiet)


def test_fedbuff_records_no_aggregation_section_and_names_its_own_step(tmp_path):
    exp = experiment(tmp_path)
    out = tmp_path / "run"
    run = run_experiment(exp, out_dir=out, overrides=["fl.mode=fedbuff", "fedbuff.buffer_size=4", "policies=[baseline]"], log=_quiet)
    assert "aggregation" not in yaml.safe_load((out / "config.yaml").read_text())
    assert run.summary["plugins"]["aggregator"]["name"] == "fedbuff"
    assert run.summary["plugins"]["aggregator"]["params"]["buffer_size"] == 4
