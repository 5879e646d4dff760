"""What selection and aggregation add to a round at 14,477 clients (issue 14's target: <= 10 %).

Builds the main job once (14,477 proxy clients, K = 100, 20 local steps, the baseline policy)
and runs, interleaved round by round in this one process, a simulation per (selector,
aggregator): uniform + FedAvg (the reference) and the toolkit's battery-aware and Oort
selectors and FedAdam/FedYogi server optimisers. Prints the median whole-round wall time of
each and its ratio to the reference, plus the median time of the selection call and of the
aggregation call alone (timed inside the same rounds) as a share of the reference round.

    PYTHONPATH=. python benchmarks/toolkit_overhead.py [--rounds 12]
    PYTHONPATH=. python benchmarks/toolkit_overhead.py --smoke    # seconds: 300 clients, K = 10, 2 steps
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from flamingo_sim.fl.compose import build_components
from flamingo_sim.fl.config import AggregationConfig, load_experiment
from flamingo_sim.fl.plugins import experiment_policy
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.fl.strategy.aggregators import make_aggregator
from flamingo_sim.fl.strategy.selection import make_selector

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "openimage_mobilenet.yaml"
VARIANTS = [("uniform", "fedavg"), ("battery", "fedavg"), ("oort", "fedavg"), ("uniform", "fedadam"), ("oort", "fedyogi")]
# --smoke: every variant on a tiny federation, one warm-up and two timed rounds; explicit options still win
SMOKE = {"rounds": 2, "warmup": 1, "clients": 300, "participants": 10, "steps": 2}


class Timed:
    """Wraps a selector's ``select`` or an aggregator's ``aggregate`` and records its wall time."""

    def __init__(self, inner: Any, *methods: str) -> None:
        self.inner, self.methods, self.times_s = inner, methods, []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.methods:
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            out = attr(*args, **kwargs)
            self.times_s.append(time.perf_counter() - t)
            return out

        return timed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--clients", type=int, help="proxy clients (default: the main job's)")
    parser.add_argument("--participants", type=int, help="K (default: the main job's)")
    parser.add_argument("--steps", type=int, help="local steps (default: the main job's)")
    parser.add_argument("--smoke", action="store_true", help=f"tiny sizes, seconds ({SMOKE})")
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**SMOKE)
        args = parser.parse_args(argv)
    torch.set_num_threads(1)
    overrides = ["fl.eval_every=1000000", f"fl.rounds={args.rounds + args.warmup + 1}"]
    for key, value in (("data.proxy.n_clients", args.clients), ("fl.participants_per_round", args.participants), ("fl.local_steps", args.steps)):
        if value is not None:
            overrides.append(f"{key}={value}")
    cfg = load_experiment(EXPERIMENT, overrides)
    parts = build_components(cfg, EXPERIMENT, 0, log=lambda _m: None)
    sims, sel_t, agg_t = {}, {}, {}
    for sel, agg in VARIANTS:
        selector = Timed(make_selector(sel), "select", "select_online")  # the engine calls select_online where a selector has it
        aggregator = Timed(make_aggregator(AggregationConfig(name=agg)), "aggregate")
        sims[sel, agg] = Simulation(parts, experiment_policy(cfg, None, "baseline"), "baseline", 0, selector, aggregator=aggregator)  # type: ignore[arg-type]
        sel_t[sel, agg], agg_t[sel, agg] = selector.times_s, aggregator.times_s
    round_s: dict[tuple[str, str], list[float]] = {v: [] for v in VARIANTS}
    for r in range(args.warmup + args.rounds):
        for v in VARIANTS:
            t = time.perf_counter()
            sims[v].step()
            if r >= args.warmup:
                round_s[v].append(time.perf_counter() - t)
    ref = float(np.median(round_s[VARIANTS[0]]))
    print(f"{parts.population.n_clients} clients, K={cfg.fl.participants_per_round}, {cfg.fl.local_steps} local steps, {args.rounds} rounds each (interleaved)")
    print(f"{'selection':<9} {'aggregation':<11} {'round ms (median)':>17} {'ratio':>6} {'spread (p10-p90) ms':>20} "
          f"{'select ms':>9} {'aggregate ms':>12} {'(sel+agg)/ref round':>19}")
    for v in VARIANTS:
        rs = np.array(round_s[v]) * 1000
        if len(sel_t[v]) <= args.warmup or len(agg_t[v]) <= args.warmup:  # the wrappers must see the engine's calls
            raise SystemExit(f"{v}: timed {len(sel_t[v])} selections and {len(agg_t[v])} aggregations in {args.warmup + args.rounds} rounds")
        s_ms = 1000 * float(np.median(sel_t[v][args.warmup :]))
        a_ms = 1000 * float(np.median(agg_t[v][args.warmup :]))
        print(f"{v[0]:<9} {v[1]:<11} {np.median(rs):>17.1f} {np.median(rs) / (ref * 1000):>5.3f}x {np.percentile(rs, 10):>9.1f}-{np.percentile(rs, 90):<10.1f} "
              f"{s_ms:>9.2f} {a_ms:>12.2f} {(s_ms + a_ms) / (ref * 1000):>19.1%}")


if __name__ == "__main__":
    main()
