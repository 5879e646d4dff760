"""Benchmark: pricing 10,000 training tasks of 20 steps (duration, energy, interference).

Compares :func:`flamingo_sim.devices.execution.run_ladder` (event-based, vectorised over tasks)
with a plain per-step Python loop over the same tasks, in the same run, for the baseline (one
rung, no control) and for Flamingo's control loop on the shipped Mi 10 / Pixel 3 MobileNetV2
profiles, with owners using their phones about half of the time.

    PYTHONPATH=. python benchmarks/devices.py [--tasks 10000] [--steps 20]
    PYTHONPATH=. python benchmarks/devices.py --smoke     # seconds: 200 tasks of 4 steps
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from flamingo_sim.devices.execution import InterferenceModel, run_ladder
from flamingo_sim.devices.policies import BaselinePolicy, FlamingoPolicy, TaskRequest
from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.devices.scheduling import contention_table
from flamingo_sim.rng import rng
from tests.devices.ladder_reference import run_ladder_reference

REPO = Path(__file__).resolve().parents[1]
SMOKE = {"tasks": 200, "steps": 4}  # --smoke: the same calls on a few tasks; explicit options still win


def _best_of(fn, repeat: int) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--slot-s", type=float, default=60.0)
    ap.add_argument("--smoke", action="store_true", help=f"tiny sizes, seconds ({SMOKE})")
    args = ap.parse_args(argv)
    if args.smoke:
        ap.set_defaults(**SMOKE)
        args = ap.parse_args(argv)

    ps = ProfileSet.load(REPO / "profiles", ["pixel_3", "mi_10", "galaxy_s10e", "oneplus_8", "galaxy_tab_s6"], "mobilenet_v2")
    g = rng(0, "bench-devices")
    k = args.tasks
    phone = g.integers(0, ps.n_phones, k)
    in_use = g.random((k, 40)) < 0.5
    steps = np.full(k, args.steps)
    # what the owner's use does to each (phone, choice): Android's scheduling (the default model), pinned
    # threads for Flamingo's choices, PyTorch's unpinned threads for the baseline's
    im = InterferenceModel()
    pinned, unpinned = contention_table(ps, im, pinned=True), contention_table(ps, im, pinned=False)
    cases = {
        "baseline": (ps.baseline_latency_s[phone][:, None], ps.baseline_power_w[phone][:, None], np.ones(k, dtype=np.int64),
                     unpinned.at(phone, ps.baseline_label_idx[phone][:, None]), np.zeros(k, bool)),
        "flamingo": (ps.latency_s[phone], ps.power_w[phone], ps.n_viable[phone], pinned.at(phone, ps.label_idx[phone]), np.ones(k, bool)),
    }
    print(f"{k} tasks x {args.steps} steps, slot {args.slot_s:g} s, ~50 % in use")
    for name, (lat, pw, nr, con, ctl) in cases.items():
        call = (lat, pw, nr, steps, in_use, args.slot_s, ctl)
        fast = run_ladder(*call, contention=con)
        ref = run_ladder_reference(*call, contention=con)
        assert np.array_equal(fast.steps, ref.steps) and np.allclose(fast.duration_s, ref.duration_s)
        t_fast = _best_of(lambda call=call, con=con: run_ladder(*call, contention=con), 5)
        t_ref = _best_of(lambda call=call, con=con: run_ladder_reference(*call, contention=con), 1)
        print(f"{name:>9}: vectorised {t_fast * 1e3:8.1f} ms   per-step loop {t_ref * 1e3:8.1f} ms   ratio {t_ref / t_fast:6.1f}x")
    # End to end through the policy API (decisions, ladders, choice counts), profiles shared.
    for pol in (BaselinePolicy(), FlamingoPolicy()):
        pol.init(k, phone, ps)
        if isinstance(pol, FlamingoPolicy):
            pol.shared_table[:] = True
        req = TaskRequest(np.arange(k), phone, args.steps, 0.0, g.uniform(0, 100, k), g.random(k) < 0.3,
                          g.uniform(25, 38, k), in_use, args.slot_s)
        t_pol = _best_of(lambda pol=pol, req=req: pol.run_tasks(req), 5)
        print(f"{pol.name:>9}: policy.run_tasks {t_pol * 1e3:8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
