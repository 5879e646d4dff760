"""The main job as a user runs it: ``python -m flamingo_sim run experiments/openimage_mobilenet.yaml``.

The whole command (both policies, 100 rounds, the embedded default data), each repeat in a fresh
process and a fresh output directory: its wall seconds, CPU seconds (with its children) and the
machine's load average before and after. The baseline is the brief's target for the main job on
2 cores, 10 minutes: the script prints how many times under it the median run is. Every repeat's
``metrics.parquet`` is checked identical to the first's (``DataFrame.equals``). This is the one
source of the main job's time that the docs quote (README, quickstart, studies, benchmarks).

    PYTHONPATH=. python benchmarks/main_job.py [--repeats 3] [--json benchmarks/results/main_job_2cores.json]
    PYTHONPATH=. python benchmarks/main_job.py --smoke     # seconds: 3 rounds on 100 clients
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from flamingo_sim.provenance import command_line, stamp  # each results file's commit, command and machine

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "experiments/openimage_mobilenet.yaml"
TARGET_S = 600.0  # the brief's target for the main job: 10 minutes on 2 cores
TINY = ["fl.rounds=3", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=1", "data.proxy.n_clients=100"]


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(out: Path, sets: list[str], experiment: str = EXPERIMENT) -> dict[str, float]:
    """One whole command into ``out``: wall and CPU seconds, the load average before and after
    (``benchmarks/toolkit_runs.py`` times its examples with it too)."""
    argv = [sys.executable, "-m", "flamingo_sim", "run", experiment, "--out", str(out), *[a for s in sets for a in ("--set", s)]]
    env = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "PYTHONPATH": str(ROOT)}
    load0, cpu0, t0 = os.getloadavg()[0], _children_cpu_s(), time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{experiment} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return {"wall_s": wall, "cpu_s": _children_cpu_s() - cpu0, "load_before": load0, "load_after": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--smoke", action="store_true", help="3 rounds on 100 clients, 2 repeats: the same code path in seconds")
    args = ap.parse_args(argv)
    sets = TINY if args.smoke else []
    repeats = 2 if args.smoke else args.repeats
    if repeats < 1:
        ap.error("--repeats: expected at least 1")
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    print(f"main job: python -m flamingo_sim run {EXPERIMENT}{' (smoke: ' + ', '.join(TINY) + ')' if args.smoke else ''}")
    runs, first = [], None
    with tempfile.TemporaryDirectory(prefix="main-job-bench-") as tmp:
        for i in range(repeats):
            out = Path(tmp) / f"run{i}"
            r = run_once(out, sets)
            metrics = pd.read_parquet(out / "metrics.parquet")
            r["identical"] = True if first is None else bool(metrics.equals(first))
            first = metrics if first is None else first
            runs.append(r)
            print(f"  repeat {i + 1}: {r['wall_s']:6.1f} s wall, {r['cpu_s']:6.1f} s CPU (load {r['load_before']:.1f} -> {r['load_after']:.1f})"
                  f"{'' if r['identical'] else '  metrics DIFFERENT from repeat 1'}")
    walls = [r["wall_s"] for r in runs]
    median = statistics.median(walls)
    identical = all(r["identical"] for r in runs)
    print(f"main job: {median:.1f} s wall (median of {len(walls)}; range {min(walls):.1f}-{max(walls):.1f} s); "
          f"{TARGET_S / median:.1f}x under the 10-minute target; metrics identical across repeats: {identical}")
    if args.json:
        doc = {"command": f"python -m flamingo_sim run {EXPERIMENT}", "cores": os.cpu_count(), "smoke": args.smoke,
               "runs": runs, "median_wall_s": median, "min_wall_s": min(walls), "max_wall_s": max(walls),
               "target_s": TARGET_S, "identical": identical}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        stamp([args.json], command_line())  # timings: no sources (they date with the whole tree)
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
