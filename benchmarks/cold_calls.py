"""The round's bookkeeping, warm and cold: what a few of a round's calls cost back to back, and right after training.

A round of ``flamingo-sim run`` is its local training (about 0.1 s of torch on the MLP proxy) and then a burst of
bookkeeping: hundreds of small numpy calls, the device model, the battery, the tallies. Between two bursts the training
(and every other process on the machine) evicts their code and data from the caches, so each call starts cold. This
script measures by how much, on five of the round's own calls with the main job's sizes (2,400 clients, a cohort of 100):

- **tallies**: :meth:`~flamingo_sim.devices.sparse.SparseVector.add` of the cohort into a population vector (the
  rounds kept, the energy drawn);
- **minibatch indices**: :func:`~flamingo_sim.fl.training.trainer.cohort_indices` of the cohort (20 steps x 16);
- **a new client's data**: the proxy task generating a client it has not made before;
- **battery**: :meth:`~flamingo_sim.devices.battery.EnergyBudget.advance_steps`, every client through 16 trace ticks;
- **policy ladder**: :func:`~flamingo_sim.devices.execution.run_ladder`, the cohort's tasks on their rungs.

Each call is timed three ways, interleaved in every repeat: **warm** (right after the same call), **after training**
(right after one cohort's real local training: the trainer's vmapped SGD steps on the proxy MLP, 100 clients x 20 steps
x 16 samples, one torch thread, the run's CPU kernels) and **after idle** (right after sleeping as long as that
training took: what the rest of the machine does to the caches meanwhile). It prints each call's median (and spread)
in microseconds and the ratio after training / warm, the issue-52 reading of why a round's bookkeeping costs more
than the same calls timed in a loop (``benchmarks/round_overhead.py`` measures the round itself).

    PYTHONPATH=. python benchmarks/cold_calls.py [--repeats 30] [--json benchmarks/results/cold_calls_2cores.json]
    PYTHONPATH=. python benchmarks/cold_calls.py --smoke     # seconds: a cohort of 10, 2 steps, 3 repeats
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from flamingo_sim.provenance import command_line, stamp

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "openimage_mobilenet.yaml"
#: the code each figure comes from (the results file's sources)
SOURCES = ["benchmarks/cold_calls.py", "flamingo_sim/devices/sparse.py", "flamingo_sim/fl/training/trainer.py", "flamingo_sim/fl/data/proxy.py",
           "flamingo_sim/rng.py", "flamingo_sim/devices/battery.py", "flamingo_sim/devices/execution.py", "flamingo_sim/fl/training/batched.py"]
MODES = ("warm", "after training", "after idle")


def build(n_clients: int, cohort: int, steps: int) -> tuple[dict[str, Callable[[], Any]], Callable[[], float]]:
    """The five calls (each a closure over real objects of the main job's sizes) and the training between them."""
    from flamingo_sim.devices.battery import EnergyBudget
    from flamingo_sim.devices.execution import run_ladder
    from flamingo_sim.devices.sparse import SparseVector
    from flamingo_sim.fl.compose import build_components, resolve_config
    from flamingo_sim.fl.data.proxy import SyntheticFederated
    from flamingo_sim.fl.runner.kernels import pin_run_kernels
    from flamingo_sim.fl.training.device import set_threads
    from flamingo_sim.fl.training.trainer import CohortTask, CohortTrainer, cohort_indices, model_state

    cfg = resolve_config(EXPERIMENT, [f"data.proxy.n_clients={n_clients}", f"fl.participants_per_round={cohort}", f"fl.local_steps={steps}",
                                      "fl.batch_size=16"], None)
    _, unpinned = pin_run_kernels(cfg)  # the run's CPU kernels, before torch's first one
    if unpinned:
        raise SystemExit(unpinned)
    set_threads(1, small_model=True)
    parts = build_components(cfg, EXPERIMENT, 0, log=lambda _m: None)
    g = np.random.default_rng(0)
    ids = np.sort(g.choice(n_clients, cohort, replace=False))
    datas = [parts.dataset.client_data(int(c)) for c in ids]
    sizes = [int(x.shape[0]) for x, _ in datas]
    trainer = CohortTrainer(parts.model, strategy=cfg.fl.train_mode)
    state = model_state(parts.model)
    task = CohortTask(datas, ids.tolist(), n_steps=steps, batch_size=16, lr=cfg.fl.lr, seed=0, round_idx=1)

    def train() -> float:
        began = time.perf_counter()
        trainer.train(state, task)
        return time.perf_counter() - began

    tallies = SparseVector(n_clients, np.float64)
    tallies.add(np.sort(g.choice(n_clients, n_clients * 9 // 10, replace=False)), 1.0)
    amounts = g.uniform(100.0, 900.0, cohort)
    fresh = SyntheticFederated(n_clients, seed=1, cache_clients=1)  # holds one client: each call makes one anew
    turn = iter(range(10**9))
    budget = EnergyBudget(g.uniform(30e3, 60e3, n_clients))
    levels = np.clip(80.0 + np.cumsum(g.normal(0.0, 0.3, (16, n_clients)), axis=0), 0.0, 100.0)
    # the ladder: the cohort's tasks on four rungs, the owner using the phone in a fifth of the minutes
    lat, pw = g.uniform(2.0, 8.0, (cohort, 4)), g.uniform(1.0, 4.0, (cohort, 4))
    use = g.random((cohort, 30)) < 0.2
    calls: dict[str, Callable[[], Any]] = {
        f"tallies (SparseVector.add, {cohort} of {n_clients:,})": lambda: tallies.add(ids, amounts),
        f"minibatch indices ({cohort} clients x {steps} steps x 16)": lambda: cohort_indices(sizes, ids.tolist(), steps, 16, 0, 1),
        "a new client's data (proxy task)": lambda: fresh.client_data(next(turn) % 2),
        f"battery (EnergyBudget, {n_clients:,} clients x 16 ticks)": lambda: budget.advance_steps(levels),
        f"policy ladder (run_ladder, {cohort} tasks)": lambda: run_ladder(lat, pw, np.full(cohort, 4), np.full(cohort, 20), use, 60.0,
                                                                           np.ones(cohort, dtype=bool)),
    }
    return calls, train


def timed(call: Callable[[], Any]) -> float:
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


def measure(calls: dict[str, Callable[[], Any]], train: Callable[[], float], repeats: int) -> dict[str, Any]:
    """Every call in every mode, ``repeats`` times, interleaved (the call order turns each repeat); seconds."""
    out: dict[str, dict[str, list[float]]] = {name: {m: [] for m in MODES} for name in calls}
    trained: list[float] = []
    for call in calls.values():  # each once, untimed: the set-up of a first call
        call()
    train()
    names = list(calls)
    for r in range(repeats):
        for name in names[r % len(names):] + names[: r % len(names)]:
            call = calls[name]
            took = train()
            trained.append(took)
            out[name]["after training"].append(timed(call))
            time.sleep(took)
            out[name]["after idle"].append(timed(call))
            call()
            out[name]["warm"].append(timed(call))
    return {"calls": out, "training_s": trained}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--json", type=Path, help="write every figure here (stamped with its commit, command, machine and sources)")
    ap.add_argument("--smoke", action="store_true", help="a cohort of 10, 2 local steps, 3 repeats: the same code path in seconds")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats: expected at least 1")
    n_clients, cohort, steps, repeats = (2400, 10, 2, 3) if args.smoke else (2400, 100, 20, args.repeats)
    load0 = os.getloadavg()[0]
    calls, train = build(n_clients, cohort, steps)
    got = measure(calls, train, repeats)
    load1 = os.getloadavg()[0]
    med = {name: {m: statistics.median(v) for m, v in modes.items()} for name, modes in got["calls"].items()}
    print(f"{os.cpu_count()} cores, load average {load0:.2f} -> {load1:.2f}; one torch thread; {repeats} repeats, interleaved")
    print(f"training between calls: {cohort} clients x {steps} steps x 16 samples (proxy MLP, vmapped SGD): "
          f"{statistics.median(got['training_s']) * 1e3:.1f} ms median")
    width = max(map(len, med)) + 2
    cells = {name: [f"{med[name][m] * 1e6:.1f} ({min(v) * 1e6:.0f}-{max(v) * 1e6:.0f})" for m, v in modes.items()] for name, modes in got["calls"].items()}
    cw = max(max(len(c) for row in cells.values() for c in row), max(len(m) for m in MODES) + 3) + 2
    print(f"{'call':<{width}}" + "".join(f"{m + ' us':>{cw}}" for m in MODES) + f"{'training / warm':>17}")
    for name, row in cells.items():
        print(f"{name:<{width}}" + "".join(f"{c:>{cw}}" for c in row) + f"{med[name]['after training'] / med[name]['warm']:>16.1f}x")
    total = {m: sum(med[name][m] for name in med) for m in MODES}
    print(f"all {len(med)} calls: warm {total['warm'] * 1e3:.2f} ms, after training {total['after training'] * 1e3:.2f} ms "
          f"({total['after training'] / total['warm']:.1f}x), after idle {total['after idle'] * 1e3:.2f} ms ({total['after idle'] / total['warm']:.1f}x)")
    if args.json:
        doc = {"cores": os.cpu_count(), "load_average": [load0, load1], "smoke": args.smoke, "repeats": repeats, "n_clients": n_clients,
               "cohort": cohort, "local_steps": steps, "training_ms": [t * 1e3 for t in got["training_s"]],
               "calls_us": {name: {m: [t * 1e6 for t in v] for m, v in modes.items()} for name, modes in got["calls"].items()},
               "median_us": {name: {m: t * 1e6 for m, t in modes.items()} for name, modes in med.items()},
               "total_median_ms": {m: t * 1e3 for m, t in total.items()}}
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
        stamp([args.json], command_line(), SOURCES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
