"""Every plug-in is held to its contract before anything runs (issue 42): a required method that is
only the contract's stub counts as missing, signatures are checked, and the error is one line naming
the plug-in, the method and the contract, for each contract, with and without subclassing; the
issue's two mistakes (a misspelt ``run_tasks`` in a ``PricedPolicy``, a misspelt ``select`` in a
``Selector``) give that line before any output is written. What a plug-in returns is held to the
contract as the run goes (issue 49): a selector or an aggregator that breaks it mid-run stops the
command in one line with the resume hint, before any further round."""

from __future__ import annotations

import re
import subprocess
import textwrap

import numpy as np
import pandas as pd
import pytest

from flamingo_sim.cli import main
from flamingo_sim.devices.policies import PricedPolicy, make_policy
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import AggregationConfig
from flamingo_sim.fl.runner.engines import Engine, EngineOptions, make_engine
from flamingo_sim.fl.runner.executors import Executor, make_executor
from flamingo_sim.fl.strategy.aggregators import make_aggregator
from flamingo_sim.fl.strategy.base import Aggregator, Selector
from flamingo_sim.fl.strategy.selection import make_selector
from tests.cli_runs import cli_argv, cli_env

HERE = __name__
POLICY = "flamingo_sim.devices.policies.base.Policy"
SELECTOR = "flamingo_sim.fl.strategy.base.Selector"
AGGREGATOR = "flamingo_sim.fl.strategy.base.Aggregator"
ENGINE = "flamingo_sim.fl.runner.engines.Engine"
EXECUTOR = "flamingo_sim.fl.runner.executors.base.Executor"


# -- the plug-ins: each contract's required method misspelt, subclassed and not -----------------------------------
class MisspeltPriced(PricedPolicy):
    name = "misspelt"

    def run_task(self, request):  # run_tasks misspelt: the contract's stub would answer None
        return None


class MisspeltPlainPolicy:
    name = "plain"

    def __init__(self, config=None):
        pass

    def init(self, n_clients, phone_idx, profile_set):
        pass

    def run_task(self, request):
        return None

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


class MisspeltSelector(Selector):
    def selct(self, online, n, generator, view):
        return online[:n]


class MisspeltPlainSelector:
    def selct(self, online, n, generator, view):
        return online[:n]


class MisspeltAggregator(Aggregator):
    def aggregat(self, global_state, stacked, n_samples):
        return global_state


class MisspeltPlainAggregator:
    def aggregat(self, global_state, stacked, n_samples):
        return global_state


class MisspeltEngine(Engine):
    def __init__(self, options):
        pass

    def runn(self, sim, callbacks, done, work_dir):
        return list(done)


class MisspeltPlainEngine:
    def __init__(self, options):
        pass

    def runn(self, sim, callbacks, done, work_dir):
        return list(done)


class MisspeltExecutor(Executor):  # abstract: without the check it could not even be made
    def rnu(self, pending, dispatch):
        return None


class MisspeltPlainExecutor:
    def rnu(self, pending, dispatch):
        return None


# -- wrong signatures ---------------------------------------------------------------------------------------------
class ShortSelect(Selector):
    def select(self, online, n):  # the engine passes four arguments
        return online[:n]


class ShortRunTasks(PricedPolicy):
    def run_tasks(self):
        return None


class ShortSettle(PricedPolicy):  # an optional method of its own is checked too
    def run_tasks(self, request):
        return None

    def settle(self, outcome):
        return None


class RunTasksNotAMethod(PricedPolicy):
    run_tasks = None  # type: ignore[assignment]


class StaticSelect:
    @staticmethod
    def select(online, n, generator, view):  # a static method taking the four arguments is fine
        return online[:n]


class BadReasons(PricedPolicy):
    DECLINE_REASONS = ("Not Charging",)

    def run_tasks(self, request):
        return None


class ReservedReason(PricedPolicy):
    DECLINE_REASONS = ("out_of_memory",)

    def run_tasks(self, request):
        return None


class DropReason(PricedPolicy):
    DECLINE_REASONS = ("not_charging", "interrupted")  # the engine's own drop reason (dropped_interrupted)

    def run_tasks(self, request):
        return None


class NotAWord(PricedPolicy):
    DECLINE_REASONS = ("not-charging",)

    def run_tasks(self, request):
        return None


def _error(build) -> str:
    with pytest.raises(ConfigError) as exc:
        build()
    message = str(exc.value)
    assert "\n" not in message
    return message


STUB = "only the stub it inherits from the contract {}, which does nothing"


@pytest.mark.parametrize("cls, subclassed", [("MisspeltPriced", True), ("MisspeltPlainPolicy", False)])
def test_a_policy_with_run_tasks_misspelt_is_one_line(cls, subclassed):
    message = _error(lambda: make_policy(f"{HERE}:{cls}", source="e.yaml"))
    found = f"has no run_tasks of its own, {STUB.format(POLICY)}" if subclassed else f"lacks run_tasks, which the contract {POLICY} requires"
    assert message == (f"e.yaml: policies: policy '{HERE}:{cls}' {found}; it defines run_task (for run_tasks?): a misspelling? "
                       "(a policy needs init, run_tasks, state_dict, load_state_dict; settle, DECLINE_REASONS are optional)")


@pytest.mark.parametrize("cls, subclassed", [("MisspeltSelector", True), ("MisspeltPlainSelector", False)])
def test_a_selector_with_select_misspelt_is_one_line(cls, subclassed):
    message = _error(lambda: make_selector(f"{HERE}:{cls}", source="e.yaml"))
    found = f"has no select of its own, {STUB.format(SELECTOR)}" if subclassed else f"lacks select, which the contract {SELECTOR} requires"
    assert message == (f"e.yaml: fl.selection: selector '{HERE}:{cls}' {found}; it defines selct (for select?): a misspelling? "
                       "(a selector needs select; observe, state_dict, load_state_dict are optional)")


@pytest.mark.parametrize("cls, subclassed", [("MisspeltAggregator", True), ("MisspeltPlainAggregator", False)])
def test_an_aggregator_with_aggregate_misspelt_is_one_line(cls, subclassed):
    message = _error(lambda: make_aggregator(AggregationConfig(name=f"{HERE}:{cls}"), source="e.yaml"))
    found = f"has no aggregate of its own, {STUB.format(AGGREGATOR)}" if subclassed else f"lacks aggregate, which the contract {AGGREGATOR} requires"
    assert message == (f"e.yaml: aggregation.name: aggregator '{HERE}:{cls}' {found}; it defines aggregat (for aggregate?): a misspelling? "
                       "(an aggregator needs aggregate; proximal_mu, state_dict, load_state_dict are optional)")


@pytest.mark.parametrize("cls, subclassed", [("MisspeltEngine", True), ("MisspeltPlainEngine", False)])
def test_an_engine_with_run_misspelt_is_one_line(cls, subclassed):
    message = _error(lambda: make_engine(f"{HERE}:{cls}", EngineOptions()))
    found = f"has no run of its own, {STUB.format(ENGINE)}" if subclassed else f"lacks run, which the contract {ENGINE} requires"
    assert message == f"engine: engine '{HERE}:{cls}' {found}; it defines runn (for run?): a misspelling? (an engine needs run; resumable are optional)"


@pytest.mark.parametrize("cls, subclassed", [("MisspeltExecutor", True), ("MisspeltPlainExecutor", False)])
def test_an_executor_with_run_misspelt_is_one_line(cls, subclassed):
    message = _error(lambda: make_executor(f"{HERE}:{cls}"))
    found = f"has no run of its own, {STUB.format(EXECUTOR)}" if subclassed else f"lacks run, which the contract {EXECUTOR} requires"
    assert message == (f"--executor: executor '{HERE}:{cls}' {found}; it defines rnu (for run?): a misspelling? "
                       "(an executor needs run; check, warm_up, validate, close, describe are optional)")


def test_signatures_are_checked_against_the_contract():
    assert _error(lambda: make_selector(f"{HERE}:ShortSelect", source="e.yaml")) == (
        f"e.yaml: fl.selection: selector '{HERE}:ShortSelect' select(online, n) cannot take the arguments the engine passes, "
        f"select(online, n, generator, view) (see the contract {SELECTOR})")
    assert _error(lambda: make_policy(f"{HERE}:ShortRunTasks")) == (
        f"policies: policy '{HERE}:ShortRunTasks' run_tasks() cannot take the arguments the engine passes, run_tasks(request) "
        f"(see the contract {POLICY})")
    assert _error(lambda: make_policy(f"{HERE}:ShortSettle")) == (
        f"policies: policy '{HERE}:ShortSettle' settle(outcome) cannot take the arguments the engine passes, settle(outcome, done_frac) "
        f"(see the contract {POLICY})")
    assert _error(lambda: make_policy(f"{HERE}:RunTasksNotAMethod")) == (
        f"policies: policy '{HERE}:RunTasksNotAMethod' run_tasks is a NoneType, not a method (see the contract {POLICY})")
    selector = make_selector(f"{HERE}:StaticSelect")
    assert list(selector.select(np.arange(5), 2, np.random.default_rng(0), None)) == [0, 1]  # type: ignore[arg-type]


def test_a_policys_own_decline_reasons_are_checked():
    assert _error(lambda: make_policy(f"{HERE}:BadReasons")) == (
        f"policies: policy '{HERE}:BadReasons' DECLINE_REASONS must be a tuple of lower-case words with underscores "
        "(each a column declined_<reason>), got ('Not Charging',)")
    assert _error(lambda: make_policy(f"{HERE}:ReservedReason")) == (
        f"policies: policy '{HERE}:ReservedReason' DECLINE_REASONS: 'out_of_memory' is the engine's own drop reason, not a decline; "
        "give the reason another name")
    assert _error(lambda: make_policy(f"{HERE}:DropReason", source="e.yaml")) == (
        f"e.yaml: policies: policy '{HERE}:DropReason' DECLINE_REASONS: 'interrupted' is the engine's own drop reason, not a decline; "
        "give the reason another name")
    assert _error(lambda: make_policy(f"{HERE}:NotAWord")) == (
        f"policies: policy '{HERE}:NotAWord' DECLINE_REASONS must be a tuple of lower-case words with underscores "
        "(each a column declined_<reason>), got ('not-charging',)")


# -- the issue's two cases, end to end: one line before any output -----------------------------------------------
EXPERIMENT = """\
name: contract_check
traces: {path: traces/synthetic}
data: {name: synthetic, proxy: {n_clients: 200}}
fl: {participants_per_round: 8, local_steps: 2, rounds: 2, eval_every: 1%s}
policies: %s
"""

MISSPELT_POLICY = '''
import numpy as np
from flamingo_sim.devices.policies import PricedPolicy


class ChargingPolicy(PricedPolicy):
    name = "charging"

    def run_task(self, request):
        ps = self.ready(request)
        return self.run_fixed(request, ps.baseline_latency_s, ps.baseline_power_w, ps.baseline_label_idx, self.name)
'''

MISSPELT_SELECTOR = '''
import numpy as np
from flamingo_sim.fl.strategy.base import Selector


class MostBattery(Selector):
    def selct(self, online, n, generator, view):
        return np.sort(online[np.argsort(-view.battery_pct_at(online), kind="stable")[:n]])
'''


@pytest.mark.parametrize("module, spec, fl, policies", [
    (MISSPELT_POLICY, "my_policy:ChargingPolicy", "", '[baseline, "my_policy:ChargingPolicy"]'),
    (MISSPELT_SELECTOR, "my_selector:MostBattery", ", selection: my_selector:MostBattery", "[baseline]"),
], ids=["policy", "selector"])
def test_the_issues_two_mistakes_are_one_line_before_any_output(tmp_path, capsys, module, spec, fl, policies):
    name = spec.partition(":")[0]
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(module))
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT % (fl, policies))
    out = tmp_path / "run"
    code = main(["run", str(exp), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not out.exists()
    assert len(err) == 1 and "Traceback" not in err[0]
    kind, method = ("policy", "run_tasks") if "policy" in name else ("selector", "select")
    contract = POLICY if kind == "policy" else SELECTOR
    assert f"{kind} '{spec}' has no {method} of its own, {STUB.format(contract)}" in err[0]
    assert err[0].startswith(f"flamingo-sim run: error: {exp}: ")


def test_the_shipped_plugins_meet_their_contracts():
    for name in ("baseline", "flamingo", "least_energy"):
        make_policy(name)
    for name in ("uniform", "battery", "oort"):
        make_selector(name)
    for name in ("fedavg", "fedprox", "fedadam", "fedyogi"):
        make_aggregator(AggregationConfig(name=name))
    make_engine("native")
    make_executor("local")


# -- what a plug-in returns, end to end: one line, the resume hint, no further round (issue 49) ---------------------
BAD_SELECTOR = '''
import numpy as np
from flamingo_sim.fl.strategy.base import Selector


class Duplicates(Selector):
    """Uniform for two rounds, then two of its picks twice."""

    def select(self, online, n, generator, view):
        chosen = np.sort(generator.choice(online, size=min(n, len(online)), replace=False))
        return chosen if view.round < 3 else np.concatenate([chosen, chosen[:2]])
'''

BAD_AGGREGATOR = '''
import torch
from flamingo_sim.fl.strategy.aggregate import fedavg
from flamingo_sim.fl.strategy.base import Aggregator


class Diverges(Aggregator):
    """FedAvg for two rounds, then NaN in the last entry that is a float."""

    def __init__(self):
        self.calls = 0

    def aggregate(self, global_state, stacked, n_samples):
        self.calls += 1
        out = fedavg(stacked, n_samples)
        if self.calls >= 3:
            name = [k for k, v in out.items() if v.is_floating_point()][-1]
            out[name] = torch.full_like(out[name], float("nan"))
        return out
'''


@pytest.mark.parametrize("module, override, said", [
    (BAD_SELECTOR, "fl.selection=bad_selector:Duplicates",
     r"selector 'bad_selector:Duplicates' broke its contract at round 3: select must return at most (\d+) unique online integer "
     r"client ids, got (\d+) ids, 2 duplicated"),
    (BAD_AGGREGATOR, "aggregation.name=bad_aggregator:Diverges",
     r"aggregator 'bad_aggregator:Diverges' broke its contract at round 3: aggregate must return the global state's \d+ entries with "
     r"their shapes and dtypes, all values finite, got '[\w.]+' with \d+ non-finite values \(nan\)"),
], ids=["selector", "aggregator"])
@pytest.mark.slow
def test_a_plug_in_that_breaks_its_contract_mid_run_stops_in_one_line_with_the_resume_hint(tmp_path, module, override, said):
    """The plug-in registered as the guide shows (an import path, its module beside the experiment), run by the command line."""
    (tmp_path / f"{override.partition('=')[2].partition(':')[0]}.py").write_text(textwrap.dedent(module))
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: output_check\ntraces: {path: traces/synthetic}\ndata: {name: synthetic, proxy: {n_clients: 200}}\n"
                   "fl: {participants_per_round: 8, local_steps: 2, rounds: 4, eval_every: 1}\npolicies: [baseline]\ncheckpoint_every: 1\n")
    out = tmp_path / "run"
    proc = subprocess.run(cli_argv(out, [override], experiment=exp),
                          capture_output=True, text=True, env=cli_env(), timeout=600, check=False, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, proc.stderr
    again = f"flamingo-sim run {exp} --out {out} --set {override} --resume"
    match = re.fullmatch(f"flamingo-sim run: error: {said}; fix it, then continue it with: {re.escape(again)}", errors[0])
    assert match, errors[0]
    if match.groups():
        asked, got = map(int, match.groups())
        assert got == asked + 2
    # rounds 1 and 2 were checkpointed and kept; round 3 never finished, and the run did not go on
    assert pd.read_parquet(out / "metrics.parquet")["round"].tolist() == [0, 1, 2]
    assert not (out / "summary.json").exists() and (out / "resume.txt").read_text().strip().endswith("--resume")
