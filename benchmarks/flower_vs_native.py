"""Benchmark: one experiment's rounds on the native engine and through Flower's simulation engine, in the same run.

The proxy task with ``--clients`` clients (2,400), ``--participants`` per round (100),
``--steps`` local steps (20) of minibatch 16, one policy (``--policy``), the same seed, on the
same parts. Engines:

- ``native``: :meth:`Simulation.step` (the cohort trained at once, this process);
- ``flower``: :func:`flamingo_sim.integrations.flower.run_flower`: a Flower ServerApp in this
  process (FlamingoStrategy around the experiment's aggregation) and the experiment's ClientApp
  on ``--cpus`` Ray actors, one virtual SuperNode per client, one message per kept client.

Ray is started by this script (``ray.init``, timed: "Ray start-up") before Flower runs, which
then uses it and shuts it down at the end ("teardown"). Round 1 through Flower also includes the
actors' start and their building the experiment's parts; the per-round figure is the median of
rounds 2 and on. ``--repeats`` runs both engines that many times, interleaved, and prints the
spread. The script checks that both engines give the same clock and energy, and the largest
accuracy difference.

    PYTHONPATH=. python benchmarks/flower_vs_native.py [--rounds 10] [--repeats 2] [--json out.json]
    PYTHONPATH=. python benchmarks/flower_vs_native.py --smoke   # seconds of work (plus Ray's start): tiny sizes, same code path
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
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

SMOKE = {"clients": 40, "participants": 4, "steps": 3, "rounds": 3, "repeats": 1}


def _overrides(a: argparse.Namespace) -> list[str]:
    return [f"data.proxy.n_clients={a.clients}", f"fl.participants_per_round={a.participants}", f"fl.local_steps={a.steps}",
            f"fl.rounds={a.rounds}", "fl.eval_every=1", f"policies=[{a.policy}]"]


def _sim(parts, a):
    return Simulation(parts, experiment_policy(parts.cfg, None, a.policy), a.policy, a.seed, make_selector(parts.cfg.fl.selection))


def _per_round(start: float, ends: list[float]) -> list[float]:
    stamps = [start, *ends]
    return [b - s for s, b in zip(stamps, stamps[1:])]


def _native(parts, a) -> tuple[list, list[float]]:
    sim = _sim(parts, a)
    rows, ends = [], []
    start = time.perf_counter()
    while not sim.is_done():
        rows.append(sim.step().to_row())
        ends.append(time.perf_counter())
    return rows, _per_round(start, ends)


def _flower(parts, a, over: list[str]) -> tuple[list, list[float], dict]:
    import ray

    from flamingo_sim.integrations.flower import run_flower

    t = time.perf_counter()
    path = os.pathsep.join(sys.path)
    ray.init(num_cpus=a.cpus, include_dashboard=False, logging_level="warning", runtime_env={"env_vars": {"PYTHONPATH": path}})
    ray_init_s = time.perf_counter() - t
    stats: dict = {}
    start = time.perf_counter()
    records = run_flower(_sim(parts, a), experiment=a.experiment, overrides=over, num_cpus=a.cpus, stats=stats)
    done = time.perf_counter()
    ends = stats["round_end_wall_s"]
    timing = {"ray_init_s": ray_init_s, "round_1_s": ends[0] - start, "teardown_s": done - ends[-1], "total_s": done - start + ray_init_s}
    return [r.to_row() for r in records], _per_round(start, ends), timing


def _importable(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ValueError:  # in sys.modules as None: a blocked import
        return False


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default=str(ROOT / "experiments/openimage_mobilenet.yaml"))
    parser.add_argument("--clients", type=int, default=2400)
    parser.add_argument("--participants", type=int, default=100)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--policy", default="flamingo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpus", type=int, default=2, help="Ray's CPUs: one ClientApp actor each")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the native engine")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help=f"tiny sizes ({SMOKE}), the same code path")
    parser.add_argument("--json", help="write the figures here too")
    a = parser.parse_args(argv)
    missing = [m for m in ("ray", "flwr") if not _importable(m)]
    if missing:  # one line, before any run, instead of a traceback from the first Flower round
        parser.exit(2, f"{parser.prog}: needs {' and '.join(missing)}: pip install 'flamingo-sim[flower]'\n")
    if a.smoke:
        for key, value in SMOKE.items():
            setattr(a, key, value)
    torch.set_num_threads(a.threads)
    load_before = os.getloadavg()[0]

    over = _overrides(a)
    cfg = load_experiment(a.experiment, over)
    parts = build_components(cfg, a.experiment, a.seed, log=lambda _m: None)
    _native(parts, a)  # warm-up: vmap tracing, data caches
    native_s: list[float] = []
    flower_s: list[float] = []
    timings: list[dict] = []
    max_acc_diff, same = 0.0, True
    for _ in range(a.repeats):  # interleaved: the machine's load hits both alike
        n_rows, n_per = _native(parts, a)
        f_rows, f_per, timing = _flower(parts, a, over)
        native_s.append(statistics.median(n_per))
        flower_s.append(statistics.median(f_per[1:]) if len(f_per) > 1 else f_per[0])
        timings.append(timing)
        same &= [r["time_s"] for r in f_rows] == [r["time_s"] for r in n_rows[: len(f_rows)]] and len(f_rows) == len(n_rows)
        same &= [r["energy_cum_j"] for r in f_rows] == [r["energy_cum_j"] for r in n_rows]
        same &= [r["n_kept"] for r in f_rows] == [r["n_kept"] for r in n_rows]
        acc = np.array([r["accuracy"] for r in f_rows]) - np.array([r["accuracy"] for r in n_rows])
        max_acc_diff = max(max_acc_diff, float(np.nanmax(np.abs(acc))))
    ratios = [f / n for f, n in zip(flower_s, native_s)]
    load_after = os.getloadavg()[0]

    def spread(xs: list[float], unit: str = " s") -> str:
        return f"{statistics.median(xs):.3f}{unit}" + (f" (min {min(xs):.3f}, max {max(xs):.3f}, {len(xs)} runs)" if len(xs) > 1 else "")

    print(f"{a.clients} clients, {a.participants} per round, {a.steps} local steps, {a.rounds} rounds, policy {a.policy}, seed {a.seed}; "
          f"Ray CPUs {a.cpus}, native torch threads {a.threads}")
    print(f"machine load (1 min) {load_before:.1f} before, {load_after:.1f} after, on {os.cpu_count()} cores: a shared machine, timings are noisy")
    print(f"native  s/round (median of rounds): {spread(native_s)}")
    print(f"flower  s/round (median of rounds 2-): {spread(flower_s)}")
    print(f"flower / native per round: {spread(ratios, 'x')}")
    print(f"Ray start-up (ray.init): {spread([t['ray_init_s'] for t in timings])}; Flower round 1 (actors start, build the parts, train): "
          f"{spread([t['round_1_s'] for t in timings])}; teardown: {spread([t['teardown_s'] for t in timings])}")
    print(f"same clock, energy and kept clients: {same}; max |accuracy difference|: {max_acc_diff:.2e}")
    out = {"setup": {k: getattr(a, k) for k in ("clients", "participants", "steps", "rounds", "policy", "seed", "cpus", "threads", "repeats", "smoke")},
           "native_s_per_round": native_s, "flower_s_per_round": flower_s, "ratio": ratios, "flower_timings": timings,
           "same_clock_energy_kept": bool(same), "max_abs_accuracy_diff": max_acc_diff, "load_1min": [load_before, load_after]}
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=1))
        stamp([Path(a.json)], command_line())  # timings: no sources (they date with the whole tree)
    return out


if __name__ == "__main__":
    main()
