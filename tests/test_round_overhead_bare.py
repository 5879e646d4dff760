"""benchmarks/round_overhead.py's bare loop is the training a round contains: the same SGD steps and the round's own
FedAvg, so that the issue's ratio charges the round only for what the bare loop leaves out (issue 52)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from flamingo_sim.fl.compose import build_components
from flamingo_sim.fl.config import load_experiment
from flamingo_sim.fl.plugins import experiment_policy
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.fl.strategy.selection import make_selector
from tests.fl.runner.test_run import SMALL

ROOT = Path(__file__).resolve().parents[1]
EXP = ROOT / "experiments" / "openimage_mobilenet.yaml"


def _script():
    spec = importlib.util.spec_from_file_location("round_overhead", ROOT / "benchmarks" / "round_overhead.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_bare_loop_gives_the_rounds_global_model_bit_for_bit():
    """Trained from the global model a round started from, on the jobs it trained (the same clients, minibatches and
    kernels, in this process), the bare loop's model is the one the round made, entry for entry: it runs the round's
    float64 FedAvg (a float32 sum, as it ran before, differs in the last bits, and the round's float64 copy was then
    counted as overhead)."""
    script = _script()
    cfg = load_experiment(EXP, [*SMALL, "policies=[baseline]", "devices.memory=none"])
    parts = build_components(cfg, EXP, cfg.seeds[0], log=lambda _m: None)
    sim = Simulation(parts, experiment_policy(cfg, None, "baseline"), "baseline", cfg.seeds[0], make_selector(cfg.fl.selection))
    sim.step()
    before = {k: v.clone() for k, v in sim.params.items()}
    jobs: list = []
    train = sim.seam.train
    sim.seam.train = lambda job: jobs.append(job) or train(job)  # type: ignore[method-assign]
    sim.step()
    assert len(jobs) == 1 and len(jobs[0].clients) > 1
    bare = script.Bare(parts.model, sim.dataset, sim.rules.fl, sim.seed)
    got = bare.round([bare.ready(sim.round, list(job.clients), job.batch_size) for job in jobs], before)
    assert list(got) == list(sim.params)
    for name, value in sim.params.items():
        assert torch.equal(got[name], value), name
    assert not all(torch.equal(before[k], v) for k, v in sim.params.items())  # the round trained
