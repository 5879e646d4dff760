"""Benchmark: one experiment on the native engine and on FedScale, in the same run.

The proxy task with ``--clients`` clients (2,400: one per trace client), ``--participants``
per round (100), ``--steps`` local steps (20) of minibatch 16, plain SGD at lr 0.05, one
policy (``--policy``), the same seed. Engines:

- ``native``: :meth:`Simulation.step` (cohort trained at once with vmap);
- ``fedscale``: FedScale's aggregator + 1 executor in this process (gRPC stub replaced by calls);
- ``fedscale-grpc``: FedScale's aggregator here + ``--executors`` processes over gRPC on 127.0.0.1;
- ``fedscale-unweighted``: in-process with FedScale's own unweighted mean (accuracy check only).

Prints wall seconds per round (median over rounds; FedScale's one-time import and the
executors' start-up are reported apart), the ratio to native, and accuracy at every round.

Accuracy agreement is judged two ways: (1) the FedScale engines with FedAvg weighted by
samples run the native engine's minibatches, so their accuracy must equal native's to float
rounding (max |difference| reported); (2) FedScale's unweighted mean is a different
algorithm, so its curve is compared with the band of ``--seeds`` native seeds: the share of
rounds where it lies within [min - tol, max + tol] of them (tol = the band's mean
half-width), and its final accuracy against the seeds' mean +- 2 standard deviations.

    PYTHONPATH=. python benchmarks/fedscale_vs_native.py [--rounds 10] [--executors 2] [--json out.json]
    PYTHONPATH=. python benchmarks/fedscale_vs_native.py --smoke    # seconds: the same engines, tiny sizes
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flamingo_sim.fl.compose import build_components  # noqa: E402
from flamingo_sim.fl.config import load_experiment  # noqa: E402
from flamingo_sim.fl.plugins import experiment_policy  # noqa: E402
from flamingo_sim.fl.sim.simulation import Simulation  # noqa: E402
from flamingo_sim.fl.strategy.selection import make_selector  # noqa: E402
from flamingo_sim.provenance import command_line, stamp  # noqa: E402  (each results file's commit, command and machine)


def _overrides(a: argparse.Namespace) -> list[str]:
    return [
        f"data.proxy.n_clients={a.clients}",
        f"fl.participants_per_round={a.participants}",
        f"fl.local_steps={a.steps}",
        f"fl.rounds={a.rounds}",
        "fl.eval_every=1",
        f"policies=[{a.policy}]",
    ]


def _sim(parts, a, seed):
    return Simulation(parts, experiment_policy(parts.cfg, None, a.policy), a.policy, seed, make_selector(parts.cfg.fl.selection))


def _native(parts, a, seed):
    sim = _sim(parts, a, seed)
    rows, ends = [], []
    start = time.perf_counter()
    while not sim.is_done():
        rows.append(sim.step())
        ends.append(time.perf_counter())
    return rows, start, ends


def _per_round(start: float, ends: list[float]) -> list[float]:
    stamps = [start, *ends]
    return [b - a for a, b in zip(stamps, stamps[1:])]


def _median_s(per: list[float]) -> float:
    """Median wall seconds per round, round 1 (one-time set-up) left out when there are others."""
    return statistics.median(per[1:]) if len(per) > 1 else per[0]


# --smoke: every engine (one gRPC executor) on a tiny federation; explicit options still win
SMOKE = {"clients": 40, "participants": 4, "steps": 2, "rounds": 2, "seeds": 2, "executors": 1, "threads": 1}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default=str(ROOT / "experiments/openimage_mobilenet.yaml"))
    parser.add_argument("--clients", type=int, default=2400)
    parser.add_argument("--participants", type=int, default=100)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--policy", default="flamingo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=3, help="native seeds for the accuracy band (>= 2 for the sd check)")
    parser.add_argument("--executors", type=int, default=2, help="executor processes for fedscale-grpc (0: skip it)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--smoke", action="store_true", help=f"tiny sizes, seconds ({SMOKE})")
    a = parser.parse_args(argv)
    if a.smoke:
        parser.set_defaults(**SMOKE)
        a = parser.parse_args(argv)
    torch.set_num_threads(a.threads)

    from flamingo_sim.integrations import fedscale as fsi
    from flamingo_sim.integrations.fedscale.classes import fedscale_classes

    t = time.perf_counter()
    fsi.load_fedscale()
    fedscale_classes()
    import_s = time.perf_counter() - t

    over = _overrides(a)
    cfg = load_experiment(a.experiment, over)
    parts = build_components(cfg, a.experiment, a.seed, log=lambda _m: None)
    out: dict = {"setup": {k: getattr(a, k) for k in ("clients", "participants", "steps", "rounds", "policy", "seed", "executors", "threads")},
                 "fedscale_import_s": import_s, "engines": {}}

    _native(parts, a, a.seed)  # warm-up: vmap tracing, data caches
    native_rows, s, e = _native(parts, a, a.seed)
    runs = {"native": (native_rows, _per_round(s, e))}

    with tempfile.TemporaryDirectory() as tmp:
        for name, kwargs in (("fedscale", {}), ("fedscale-unweighted", {"weighted": False})):
            stats: dict = {}
            rows = fsi.run_in_process(_sim(parts, a, a.seed), work_dir=Path(tmp) / name, stats=stats, **kwargs)
            per = _per_round(stats["start_wall_s"], stats["round_end_wall_s"])
            runs[name] = (rows, per)  # round 1 includes building the aggregator and executor
        if a.executors:
            stats = {}
            rows = fsi.run_distributed(
                _sim(parts, a, a.seed), experiment=a.experiment, overrides=over, work_dir=Path(tmp) / "grpc",
                n_executors=a.executors, stats=stats,
            )
            per = _per_round(stats["start_wall_s"], stats["round_end_wall_s"])
            runs["fedscale-grpc"] = (rows, per)  # round 1 includes the executors' start-up

    band = []
    for seed in range(a.seed, a.seed + a.seeds):
        p = parts if seed == a.seed else build_components(cfg, a.experiment, seed, log=lambda _m: None)
        band.append([r.accuracy for r in (native_rows if seed == a.seed else _native(p, a, seed)[0])])
    band = np.array(band)
    lo, hi = band.min(axis=0), band.max(axis=0)
    tol = float(np.mean(hi - lo) / 2)

    native_acc = np.array([r.accuracy for r in native_rows])
    native_round_s = _median_s(runs["native"][1])
    print(f"{a.clients} clients, {a.participants} per round, {a.steps} local steps, {a.rounds} rounds, policy {a.policy}, seed {a.seed}, {a.threads} threads")
    print(f"FedScale import (once per process): {import_s:.2f} s")
    print(f"{'engine':<22} {'s/round (median)':>16} {'round 1 s':>10} {'x native':>9} {'max |acc - native|':>19} {'same clock':>10}")
    for name, (rows, per) in runs.items():
        acc = np.array([r.accuracy for r in rows])
        med = _median_s(per)
        same_clock = [r.time_s for r in rows] == [r.time_s for r in native_rows] and [r.energy_cum_j for r in rows] == [
            r.energy_cum_j for r in native_rows
        ]
        entry = {
            "wall_s_per_round_median": med,
            "wall_s_round_1": per[0],
            "wall_s_total": float(sum(per)),
            "ratio_to_native": med / native_round_s,
            "accuracy": acc.tolist(),
            "max_abs_accuracy_diff_vs_native": float(np.max(np.abs(acc - native_acc))),
            "same_clock_and_energy_as_native": bool(same_clock),
        }
        if name == "fedscale-unweighted":
            inside = (acc >= lo - tol) & (acc <= hi + tol)
            finals = band[:, -1]
            entry["share_of_rounds_within_native_seed_band"] = float(inside.mean())
            entry["final_accuracy_within_2sd_of_native_seeds"] = (
                bool(abs(acc[-1] - finals.mean()) <= 2 * finals.std(ddof=1) + 1e-12) if len(finals) > 1 else None
            )
        out["engines"][name] = entry
        print(f"{name:<22} {med:>16.3f} {per[0]:>10.2f} {med / native_round_s:>8.1f}x {entry['max_abs_accuracy_diff_vs_native']:>19.2e} {str(same_clock):>10}")
    print("accuracy per round:")
    print("  native seeds band: " + " ".join(f"[{a:.3f},{b:.3f}]" for a, b in zip(lo, hi)))
    for name, (rows, _) in runs.items():
        print(f"  {name:<20} " + " ".join(f"{r.accuracy:.3f}" for r in rows))
    uw = out["engines"]["fedscale-unweighted"]
    print(
        f"unweighted FedScale mean: {uw['share_of_rounds_within_native_seed_band']:.0%} of rounds within the native seeds' band (+-{tol:.3f}); "
        f"final accuracy within 2 sd of {a.seeds} native seeds: {uw['final_accuracy_within_2sd_of_native_seeds']}"
    )
    out["native_seed_band"] = {"low": lo.tolist(), "high": hi.tolist(), "tolerance": tol}
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=1))
        stamp([Path(a.json)], command_line())  # timings: no sources (they date with the whole tree)
    return out


if __name__ == "__main__":
    main()
