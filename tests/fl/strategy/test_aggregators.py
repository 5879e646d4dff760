"""Aggregators (FedAvg, FedProx, FedAdam, FedYogi) against hand-computed numbers, config and resume."""

from __future__ import annotations

import math
import types
from pathlib import Path

import pytest
import torch

from flamingo_sim.cli import main
from flamingo_sim.config import from_mapping
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import AggregationConfig, ExperimentConfig
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.strategy.aggregate import server_adam_step, server_yogi_step
from flamingo_sim.fl.strategy.aggregators import FedAdam, FedAvg, FedProx, FedYogi, make_aggregator
from flamingo_sim.fl.training.trainer import CohortTask, train_cohort
from flamingo_sim.models import build_model
from tests.cli_runs import assert_identical
from tests.fl.interrupt import run_interrupted

ROOT = Path(__file__).resolve().parents[3]
F64 = torch.float64


def yogi(**kw):
    return FedYogi(server_lr=0.5, beta1=0.9, beta2=0.99, tau=0.1, **kw)


def test_yogi_two_rounds_by_hand():
    agg = yogi()
    x0 = {"w": torch.tensor([1.0, 2.0], dtype=F64)}
    # round 1: clients (1.2, 2.0) and (1.6, 2.0133...) with 1 and 3 samples -> mean (1.5, 2.01): delta (0.5, 0.01)
    c1 = {"w": torch.tensor([[1.2, 2.0], [1.6, 2.0 + 0.04 / 3]], dtype=F64)}
    x1 = agg.aggregate(x0, c1, torch.tensor([1.0, 3.0]))
    # m1 = 0.1 * delta = (0.05, 0.001); v0 = tau^2 = 0.01
    # v1[0]: 0.01 - 0.01 * 0.25 * sign(0.01 - 0.25) = 0.0125; v1[1]: 0.01 - 0.01 * 1e-4 * sign(+) = 0.009999
    assert agg.m["w"].tolist() == pytest.approx([0.05, 0.001])
    assert agg.v["w"].tolist() == pytest.approx([0.0125, 0.009999])
    # x1 = x0 + 0.5 * m1 / (sqrt(v1) + 0.1) = (1.1180340, 2.0025001)
    exp1 = [1.0 + 0.025 / (math.sqrt(0.0125) + 0.1), 2.0 + 0.0005 / (math.sqrt(0.009999) + 0.1)]
    assert x1["w"].tolist() == pytest.approx(exp1, abs=1e-12)
    assert x1["w"].tolist() == pytest.approx([1.1180340, 2.0025001], abs=1e-6)
    # round 2: both clients at x1 - 0.2 (first entry), x1 (second): delta (-0.2, 0)
    c2 = {"w": torch.stack([x1["w"] - torch.tensor([0.2, 0.0], dtype=F64)] * 2)}
    x2 = agg.aggregate(x1, c2, torch.tensor([5.0, 5.0]))
    # m2 = 0.9 m1 + 0.1 delta = (0.025, 0.0009); v2[0] = 0.0125 + 0.01 * 0.04 = 0.0129; v2[1] = v1[1] (delta^2 = 0)
    assert agg.m["w"].tolist() == pytest.approx([0.025, 0.0009])
    assert agg.v["w"].tolist() == pytest.approx([0.0129, 0.009999])
    exp2 = [exp1[0] + 0.0125 / (math.sqrt(0.0129) + 0.1), exp1[1] + 0.00045 / (math.sqrt(0.009999) + 0.1)]
    assert x2["w"].tolist() == pytest.approx(exp2, abs=1e-12)


def test_adam_step_by_hand():
    x, m, v = server_adam_step(
        torch.tensor([1.0], dtype=F64), torch.tensor([0.5], dtype=F64), torch.zeros(1, dtype=F64), torch.full((1,), 0.01, dtype=F64),
        server_lr=0.5, beta1=0.9, beta2=0.99, tau=0.1,
    )
    # v = 0.99 * 0.01 + 0.01 * 0.25 = 0.0124; x = 1 + 0.5 * 0.05 / (sqrt(0.0124) + 0.1)
    assert v.item() == pytest.approx(0.0124) and m.item() == pytest.approx(0.05)
    assert x.item() == pytest.approx(1.0 + 0.025 / (math.sqrt(0.0124) + 0.1), abs=1e-12)


def test_fedavg_weighting_samples_or_plain_mean():
    stacked = {"w": torch.tensor([[0.0], [4.0]])}
    assert FedAvg("samples").aggregate({}, stacked, torch.tensor([3.0, 1.0]))["w"].item() == pytest.approx(1.0)
    assert FedAvg("uniform").aggregate({}, stacked, torch.tensor([3.0, 1.0]))["w"].item() == pytest.approx(2.0)


def test_server_optimiser_averages_buffers_and_integers():
    agg = FedAdam(server_lr=1.0, tau=0.1, buffers=("bn.running_mean",))
    g = {"w": torch.zeros(1), "bn.running_mean": torch.zeros(1), "bn.num_batches_tracked": torch.tensor(4)}
    stacked = {"w": torch.tensor([[1.0], [1.0]]), "bn.running_mean": torch.tensor([[2.0], [4.0]]), "bn.num_batches_tracked": torch.tensor([6, 6])}
    out = agg.aggregate(g, stacked, torch.tensor([1.0, 1.0]))
    assert out["bn.running_mean"].item() == 3.0 and out["bn.num_batches_tracked"].item() == 6
    assert out["w"].item() != 1.0 and set(agg.m) == {"w"}


def test_state_round_trip_continues_identically():
    a = yogi()
    x = {"w": torch.tensor([1.0, 2.0], dtype=F64)}
    x = a.aggregate(x, {"w": torch.tensor([[1.5, 1.0]], dtype=F64)}, torch.tensor([1.0]))
    b = yogi()
    b.load_state_dict(a.state_dict())
    nxt = {"w": torch.tensor([[0.3, 0.7]], dtype=F64)}
    assert torch.equal(a.aggregate(x, nxt, torch.tensor([1.0]))["w"], b.aggregate(x, nxt, torch.tensor([1.0]))["w"])


def test_fedprox_step_by_hand():
    torch.manual_seed(0)
    model = build_model("logreg", (3,), 2, seed=0).double()
    x, y = torch.randn(8, 3, dtype=F64), torch.tensor([0, 1] * 4)
    w0 = {k: v.clone() for k, v in model.state_dict().items()}
    mu, lr = 0.7, 0.1
    out = {}
    for mode in ("vmap", "streams", "sequential"):
        res = train_cohort(model, w0, CohortTask([(x, y)], [3], n_steps=2, batch_size=8, lr=lr, seed=0, round_idx=1, prox_mu=mu), mode=mode)
        out[mode] = res.client_params(0)
    # by hand, full-batch: w1 = w0 - lr g(w0); w2 = w1 - lr (g(w1) + mu (w1 - w0))
    def grads(state):
        ps = {k: v.clone().requires_grad_(True) for k, v in state.items()}
        loss = torch.nn.functional.cross_entropy(torch.func.functional_call(model, ps, (x,)), y)
        return dict(zip(ps, torch.autograd.grad(loss, list(ps.values()))))

    g0 = grads(w0)
    w1 = {k: w0[k] - lr * g0[k] for k in w0}
    g1 = grads(w1)
    w2 = {k: w1[k] - lr * (g1[k] + mu * (w1[k] - w0[k])) for k in w0}
    for mode, got in out.items():
        for k in w0:
            assert torch.allclose(got[k], w2[k], atol=1e-12), (mode, k)
    plain = train_cohort(model, w0, CohortTask([(x, y)], [3], n_steps=2, batch_size=8, lr=lr, seed=0, round_idx=1)).client_params(0)
    assert any(not torch.allclose(plain[k], w2[k], atol=1e-9) for k in w0)  # the term matters


def cfg(section):
    return from_mapping(ExperimentConfig, {"name": "x", "aggregation": section}, source="exp.yaml")


@pytest.mark.parametrize(
    "section, message",
    [
        ({"name": "fedyogi", "beta3": 0.9}, "exp.yaml: unknown key 'aggregation.beta3' (known here: beta1, beta2, server_lr, tau)"),
        ({"name": "fedyogi", "beta2": 1.0}, "exp.yaml: aggregation.beta2: expected a number in [0, 1), got 1.0"),
        ({"name": "fedadam", "server_lr": -1}, "exp.yaml: aggregation.server_lr: expected a number > 0 that fits float32, the training's "
                                               "dtype (its size between 1.2e-38 and 3.4e+38, or 0), got -1.0"),
        ({"name": "fedavg", "mu": 0.1}, "exp.yaml: aggregation: aggregator 'fedavg' takes no parameters (it declares no Params), got mu"),
        ({"name": "fedprox", "tau": 0.1}, "exp.yaml: unknown key 'aggregation.tau' (known here: mu)"),
        ({"name": "fedsgd"}, "exp.yaml: aggregation.name: unknown aggregator 'fedsgd'; expected one of 'fedavg', 'fedprox', 'fedadam', 'fedyogi' "
                             "(built-in or installed in entry-point group 'flamingo_sim.aggregators') or an import path 'package.module:ClassName'"),
        ({"weighting": "equal"}, "exp.yaml: aggregation.weighting: expected one of 'samples' or 'uniform', got 'equal'"),
    ],
)
def test_bad_aggregation_sections(section, message):
    with pytest.raises(ConfigError) as exc:
        cfg(section)
    assert str(exc.value) == message


def test_registry_builds_with_defaults_and_overrides():
    agg = make_aggregator(AggregationConfig(name="fedyogi", params={"server_lr": 0.03}))
    assert isinstance(agg, FedYogi) and agg.hyper == {"server_lr": 0.03, "beta1": 0.9, "beta2": 0.99, "tau": 1e-3}
    assert make_aggregator(AggregationConfig(name="fedprox", params={"mu": 0.2})).proximal_mu == 0.2
    assert make_aggregator(AggregationConfig(name="fedavg")).proximal_mu == 0.0  # the contract's default, inherited
    with pytest.raises(ConfigError, match=r"aggregation\.name: aggregator 'nope\.mod:Agg': cannot import"):
        make_aggregator(AggregationConfig(name="nope.mod:Agg"))


SMALL = ["fl.rounds=4", "fl.participants_per_round=8", "fl.local_steps=4", "fl.eval_every=2", "data.proxy.n_clients=200", "policies=[baseline]"]


@pytest.mark.slow
def test_fedyogi_run_resumes_bit_identical(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    exp = ROOT / "experiments/toolkit_fedyogi.yaml"
    overrides = SMALL + ["checkpoint_every=2"]
    whole = run_experiment(exp, out_dir=tmp_path / "whole", overrides=overrides, log=lambda m: None)
    run_interrupted(monkeypatch, exp, tmp_path / "cut", overrides, after_round=3)
    resumed = run_experiment(exp, out_dir=tmp_path / "cut", overrides=overrides, resume=True, log=lambda m: None)
    assert_identical(resumed.metrics, whole.metrics)
    fedavg = run_experiment(exp, out_dir=tmp_path / "avg", overrides=overrides + ["aggregation={name: fedavg}"], log=lambda m: None)
    assert not fedavg.metrics["accuracy"].equals(whole.metrics["accuracy"])


def test_fedscale_engine_refuses_other_aggregators(tmp_path, capsys, monkeypatch):
    from flamingo_sim.fl.runner import engines

    monkeypatch.setitem(engines.ENGINES.builtin, "fedscale", lambda options: engines.NativeEngine(engines.EngineOptions()))  # no FedScale needed
    args = ["run", str(ROOT / "experiments/toolkit_fedyogi.yaml"), "--out", str(tmp_path / "o"), "--engine", "fedscale"]
    assert main(args) == 2
    assert "aggregation: FedScale runs only the default (fedavg, weighting: samples); run 'fedyogi' natively" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# -- what mutation testing found unchecked (docs/benchmarks.md, "Mutation testing") -----------------
def test_fedavg_and_fedprox_weight_by_samples_by_default_and_equally_when_asked():
    stacked = {"w": torch.tensor([[0.0], [4.0]], dtype=F64)}
    n = torch.tensor([1, 3])
    for cls in (FedAvg, FedProx):
        assert torch.equal(cls().aggregate({}, stacked, n)["w"], torch.tensor([3.0], dtype=F64)), cls  # (0 x 1 + 4 x 3) / 4
        assert torch.equal(cls(weighting="uniform").aggregate({}, stacked, n)["w"], torch.tensor([2.0], dtype=F64)), cls


def test_the_registry_passes_weighting_and_buffers():
    stacked = {"w": torch.tensor([[0.0], [4.0]], dtype=F64), "bn.running_mean": torch.tensor([[0.0], [4.0]], dtype=F64)}
    start = {"w": torch.zeros(1, dtype=F64), "bn.running_mean": torch.zeros(1, dtype=F64)}
    n = torch.tensor([1, 3])
    assert torch.equal(make_aggregator(AggregationConfig(name="fedavg", weighting="uniform")).aggregate({}, stacked, n)["w"],
                       torch.tensor([2.0], dtype=F64))
    adam = make_aggregator(AggregationConfig(name="fedadam"), buffers=["bn.running_mean"])
    out = adam.aggregate(start, stacked, n)
    assert torch.equal(out["bn.running_mean"], torch.tensor([3.0], dtype=F64))  # a buffer takes the weighted mean
    assert not torch.equal(out["w"], torch.tensor([3.0], dtype=F64))  # a parameter takes the server step
    with pytest.raises(ConfigError, match=r"^aggregation\.name: unknown aggregator 'nope'; expected one of 'fedavg', 'fedprox', 'fedadam', 'fedyogi' "):
        make_aggregator(types.SimpleNamespace(name="nope", parameters=dict, weighting="samples"))


def test_yogi_leaves_the_second_moment_where_it_equals_the_squared_step():
    """sign(v - delta^2) = 0: v stays (a mutant dividing by the sign sends it to infinity)."""
    x, delta, m, v = (torch.tensor([t], dtype=F64) for t in (0.0, 2.0, 0.0, 4.0))
    _, _, v_new = server_yogi_step(x, delta, m, v, server_lr=0.1, beta1=0.9, beta2=0.99, tau=1e-3)
    assert torch.equal(v_new, v)


def test_moment_shapes_that_differ_are_named():
    with pytest.raises(ValueError, match=r"^shapes differ: global \(2,\), delta \(3,\), m \(2,\), v \(2,\)$"):
        server_yogi_step(torch.zeros(2), torch.zeros(3), torch.zeros(2), torch.zeros(2), server_lr=0.1, beta1=0.9, beta2=0.99, tau=1e-3)
