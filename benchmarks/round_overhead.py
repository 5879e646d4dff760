"""Everything but training: the per-round cost of availability, energy, selection, pricing and
bookkeeping, at 2,400 and 100,000 clients (issue 4's target: <= 5 ms per round at 2,400, linear).

Runs the real engine on the shipped traces and the proxy task, both policies, and subtracts the
wall time the engine itself measures in local training, FedAvg and evaluation
(``Simulation.model_wall_s``). Prints ms per round per population size and the growth ratio
against the linear expectation, both measured in this run.

    PYTHONPATH=. python benchmarks/round_overhead.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from flamingo_sim.fl.config import load_experiment
from flamingo_sim.fl.engine import Simulation
from flamingo_sim.fl.selection import make_selector
from flamingo_sim.fl.setup import build_components, make_policy

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "openimage_mobilenet.yaml"


def overhead_ms(n_clients: int, policy: str, rounds: int, warmup: int = 3) -> float:
    overrides = [f"data.proxy.n_clients={n_clients}", f"fl.rounds={rounds + warmup + 1}", "fl.eval_every=1000000"]
    cfg = load_experiment(EXPERIMENT, overrides)
    parts = build_components(cfg, EXPERIMENT, 0, log=lambda _m: None)
    sim = Simulation(parts, make_policy(policy, cfg), policy, 0, make_selector("uniform"))
    for _ in range(warmup):
        sim.step()
    model_before = sim.model_wall_s
    started = time.perf_counter()
    for _ in range(rounds):
        sim.step()
    total = time.perf_counter() - started
    return 1000.0 * (total - (sim.model_wall_s - model_before)) / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    torch.set_num_threads(2)
    sizes = (2_400, 100_000)
    print(f"{'policy':<10} {'clients':>8} {'ms/round (all but training)':>28}")
    for policy in ("baseline", "flamingo"):
        ms = {}
        for n in sizes:
            ms[n] = overhead_ms(n, policy, args.rounds)
            print(f"{policy:<10} {n:>8} {ms[n]:>28.2f}")
        growth = ms[sizes[1]] / ms[sizes[0]]
        print(f"{policy:<10} growth x{growth:.1f} for x{sizes[1] / sizes[0]:.1f} clients (linear or better if <= that)")


if __name__ == "__main__":
    main()
