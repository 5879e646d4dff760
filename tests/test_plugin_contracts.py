"""Every plug-in is held to its contract before anything runs (issue 42): a required method that is
only the contract's stub counts as missing, signatures are checked, and the error is one line naming
the plug-in, the method and the contract, for each contract, with and without subclassing; the
issue's two mistakes (a misspelt ``run_tasks`` in a ``PricedPolicy``, a misspelt ``select`` in a
``Selector``) give that line before any output is written."""

from __future__ import annotations

import textwrap

import numpy as np
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
