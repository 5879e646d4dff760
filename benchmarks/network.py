"""The network from the traces against the log-normal one, on the paper's three tasks; and ``unmetered_only`` on the main job.

Virtual-time results (deterministic: the machine's load does not change them). Four studies, each
the real command (``python -m flamingo_sim reproduce ...``) into its own directory:

1. ``reproduce`` as shipped (``network.model: lognormal``, the default): 3 tasks x 3 seeds x 100 rounds;
2. the same with ``--set network.model=traces``;
3. the main job (``openimage_mobilenet``) with ``--set network.unmetered_only=true`` (log-normal pricing);
4. the main job with both ``network.model=traces`` and ``network.unmetered_only=true``.

Per task and policy it reads each run's ``summary.json``: time and energy to the target (with the
95 % bootstrap intervals), speedup and energy efficiency, clients lost, and (``traces``) the
share of the energy the radio drew and of the rounds' time the client each round waited for spent
on its transfers. The log-normal runs record no transfer column (their output stays as it was),
so their transfer share is measured by replaying each run's rounds in this process without the
training (with uniform selection, who is selected, how long each round lasts and what it costs do
not depend on the model) and checked against the run: every round's ``duration_s`` must be the
run's, bit for bit. ``--json PATH`` writes every figure with the commit, the command and the machine.

    PYTHONPATH=. python benchmarks/network.py --jobs 2 --keep runs/network --json docs/results/network/network.json
    PYTHONPATH=. python benchmarks/network.py --smoke     # a minute: 3 rounds on 100 clients, one seed
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TASKS = ("openimage_mobilenet", "openimage_shufflenet", "speech_resnet34")
MAIN = "openimage_mobilenet"
#: The four studies: name -> (tasks, --set values).
STUDIES = {
    "lognormal": (TASKS, []),
    "traces": (TASKS, ["network.model=traces"]),
    "lognormal_unmetered": ((MAIN,), ["network.unmetered_only=true"]),
    "traces_unmetered": ((MAIN,), ["network.model=traces", "network.unmetered_only=true"]),
}
SMOKE = ["--quick", "--seeds", "1", "--set", "fl.rounds=3", "--set", "fl.participants_per_round=4", "--set", "fl.local_steps=2",
         "--set", "fl.eval_every=1", "--set", "data.proxy.n_clients=100"]
SMOKE_TASKS = ("openimage_mobilenet", "speech_resnet34")


def _reproduce(out: Path, tasks: tuple[str, ...], sets: list[str], jobs: int, smoke: bool) -> dict[str, Any]:
    argv = ["reproduce", "--out", str(out), "--jobs", str(jobs), "--tasks", *tasks, *[a for s in sets for a in ("--set", s)],
            *(SMOKE if smoke else [])]
    env = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "PYTHONPATH": str(ROOT)}
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "flamingo_sim", *argv], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): flamingo-sim {' '.join(argv)}\n{proc.stderr[-3000:]}")
    return {"command": "flamingo-sim " + " ".join(argv), "wall_s": time.perf_counter() - t0, "load_before": load0,
            "load_after": os.getloadavg()[0]}


def _replay_transfer_share(run_dir: Path) -> tuple[dict[str, float], bool]:
    """Per policy: the share of the rounds' time the client each round waited for spent on transfers, replayed without
    training from the run's own config; and whether every replayed round lasted what the run recorded."""
    from flamingo_sim.fl.compose import build_components, compose
    from flamingo_sim.fl.config import load_experiment

    cfg_path = run_dir / "config.yaml"
    cfg = load_experiment(cfg_path)
    metrics = pd.read_parquet(run_dir / "metrics.parquet")
    shares: dict[str, list[float]] = {}
    same = True
    for seed in cfg.seeds:
        parts = build_components(cfg, cfg_path, seed, log=lambda _m: None)
        for policy in cfg.policies:
            sim = compose(cfg, cfg_path, seed, policy, parts=parts)
            transfer = duration = 0.0
            recorded = metrics[(metrics["seed"] == seed) & (metrics["policy"] == policy)].set_index("round")["duration_s"]
            while not sim.is_done():
                plan = sim.plan_round()
                if len(plan.settled.kept):
                    transfer += float(plan.comm_s[plan.settled.kept[-1]])
                duration += plan.settled.duration_s
                same &= bool(plan.settled.duration_s == recorded.loc[plan.round])
                sim.finish_round(plan, float("nan"))
            shares.setdefault(policy, []).append(transfer / duration if duration > 0 else float("nan"))
    return {p: float(np.mean(v)) for p, v in shares.items()}, same


def _task_figures(run_dir: Path) -> dict[str, Any]:
    summary = json.loads((run_dir / "summary.json").read_text())
    out: dict[str, Any] = {"target_accuracy_by_seed": summary["target_accuracy_by_seed"], "policies": {}}
    for policy, e in summary["policies"].items():
        row = {k: e.get(k) for k in ("time_to_target_s", "time_to_target_s_ci", "energy_to_target_j", "energy_to_target_j_ci", "clients_lost",
                                      "speedup", "speedup_ci", "energy_efficiency", "energy_efficiency_ci", "total_energy_j")}
        row["dropped"] = {r: float(np.mean([s["dropped"][r] for s in e["per_seed"].values()])) for r in next(iter(e["per_seed"].values()))["dropped"]}
        if "network" in e:
            row["network"] = e["network"]
        out["policies"][policy] = row
    metrics = pd.read_parquet(run_dir / "metrics.parquet")
    out["mean_round_s"] = {p: float(g.loc[g["round"] > 0, "duration_s"].mean()) for p, g in metrics.groupby("policy")}
    return out


def _x(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}x"


def _ci(v: list[float] | None) -> str:
    return "" if not v else f" [{v[0]:.2f}, {v[1]:.2f}]"


def _pct(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}%"


def _h(v: float | None) -> str:
    return "-" if v is None else f"{v / 3600:.2f} h"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1, help="reproduce --jobs (the results are the same for any N)")
    ap.add_argument("--keep", type=Path, help="leave the four study directories here (default: a temporary directory)")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--smoke", action="store_true", help="3 rounds on 100 clients, one seed, two tasks: the same code path in a minute")
    args = ap.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="flamingo-network-"))
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip())
    doc: dict[str, Any] = {"commit": commit + (" (with uncommitted changes)" if dirty else ""), "machine": f"{platform.node()}, {os.cpu_count()} CPUs",
                           "command": "PYTHONPATH=. python benchmarks/network.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                           "studies": {}}
    for name, (tasks, sets) in STUDIES.items():
        tasks = tuple(t for t in tasks if t in SMOKE_TASKS) if args.smoke else tasks
        run = _reproduce(root / name, tasks, sets, args.jobs, args.smoke)
        study: dict[str, Any] = {**run, "tasks": {}}
        for task in tasks:
            run_dir = root / name / "runs" / task
            figures = _task_figures(run_dir)
            if "network.model=traces" not in sets:
                shares, same = _replay_transfer_share(run_dir)
                figures["replay_matches_run"] = same
                for policy, share in shares.items():
                    figures["policies"][policy].setdefault("network", {})["transfer_time_share"] = share
                    figures["policies"][policy]["network"].setdefault("radio_energy_share", 0.0)
            study["tasks"][task] = figures
        doc["studies"][name] = study
        print(f"{name}: {run['wall_s']:.0f} s wall (load {run['load_before']:.1f} -> {run['load_after']:.1f}): {run['command']}", flush=True)

    log, tr = doc["studies"]["lognormal"]["tasks"], doc["studies"]["traces"]["tasks"]
    for task in log:
        a, b = log[task]["policies"]["flamingo"], tr[task]["policies"]["flamingo"]
        print(f"{task}: speedup lognormal {_x(a['speedup'])}{_ci(a['speedup_ci'])}, traces {_x(b['speedup'])}{_ci(b['speedup_ci'])}; "
              f"energy efficiency lognormal {_x(a['energy_efficiency'])}{_ci(a['energy_efficiency_ci'])}, "
              f"traces {_x(b['energy_efficiency'])}{_ci(b['energy_efficiency_ci'])}")
        for policy in log[task]["policies"]:
            na, nb = log[task]["policies"][policy]["network"], tr[task]["policies"][policy]["network"]
            ratio = tr[task]["mean_round_s"][policy] / log[task]["mean_round_s"][policy]
            print(f"  {policy}: transfers {_pct(na['transfer_time_share'])} of the round time (lognormal) / {_pct(nb['transfer_time_share'])} "
                  f"(traces); radio {_pct(nb['radio_energy_share'])} of the energy (traces); mean round traces / lognormal {ratio:.2f}x")
    for pricing in ("lognormal", "traces"):
        base, unmetered = doc["studies"][pricing]["tasks"][MAIN], doc["studies"][f"{pricing}_unmetered"]["tasks"][MAIN]
        cells = []
        for policy in base["policies"]:
            p, q = base["policies"][policy], unmetered["policies"][policy]
            cells.append(f"{policy} clients lost {p['clients_lost']} -> {q['clients_lost']}, time to target {_h(p['time_to_target_s'])} -> "
                         f"{_h(q['time_to_target_s'])}, unreachable per round {q['network']['n_unreachable_per_round']:.1f}")
        f = unmetered["policies"]["flamingo"]
        print(f"{MAIN} unmetered_only ({pricing} pricing): " + "; ".join(cells) + f"; speedup {_x(f['speedup'])}{_ci(f['speedup_ci'])}")
    same = all(t.get("replay_matches_run", True) for s in doc["studies"].values() for t in s["tasks"].values())
    print(f"the log-normal replays match the runs' round durations: {same}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
