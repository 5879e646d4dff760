"""The toolkit's example experiments as a user runs them, against the main job in the same run.

Each ``experiments/toolkit_*.yaml`` is run whole, ``python -m flamingo_sim run <file>``, in a
fresh process and a fresh output directory; the main job
(``experiments/openimage_mobilenet.yaml``) is run before the first and after the last, and each
example's wall time is printed as a ratio of the median main-job time (the baseline, measured in
the same run, so that a machine shared with other jobs moves both). This is the one source of
the example run times that docs/fl-engine.md quotes.

    PYTHONPATH=. python benchmarks/toolkit_runs.py [--only fedyogi,least_energy] [--json benchmarks/results/toolkit_runs_2cores.json]
    PYTHONPATH=. python benchmarks/toolkit_runs.py --smoke     # seconds: 2 rounds, small cohorts
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

from main_job import run_once  # this folder: the script's own directory is on sys.path

from flamingo_sim.provenance import command_line, stamp  # each results file's commit, command and machine

ROOT = Path(__file__).resolve().parents[1]
MAIN = "openimage_mobilenet"
#: a tiny version of every experiment: the same code path in seconds (each key exists in all of them)
TINY = ["fl.rounds=2", "fl.participants_per_round=3", "fl.local_steps=2", "fl.eval_every=1"]
#: what the tiny runs add for the examples on the 14,477-client proxy task (and FedBuff's buffer)
TINY_PROXY = ["data.proxy.n_clients=100"]
TINY_FEDBUFF = ["fedbuff.buffer_size=2", "fedbuff.concurrency=4"]


def examples() -> list[str]:
    """The shipped toolkit examples, by name (``toolkit_fedyogi`` ...)."""
    return sorted(p.stem for p in (ROOT / "experiments").glob("toolkit_*.yaml"))


def smoke_sets(name: str) -> list[str]:
    text = (ROOT / "experiments" / f"{name}.yaml").read_text()
    sets = list(TINY)
    if "proxy:" in text:
        sets += TINY_PROXY
    if name == "toolkit_fedbuff":
        sets += TINY_FEDBUFF
    return sets


def run_example(name: str, out: Path, sets: list[str]) -> dict[str, float | str]:
    """One whole command into ``out``, timed as the main job's benchmark times it, and the policies it ran."""
    r: dict[str, float | str] = {"experiment": name, **run_once(out, sets, experiment=f"experiments/{name}.yaml")}
    r["policies"] = ",".join(json.loads((out / "summary.json").read_text())["policies"])
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated examples without the toolkit_ prefix (default: all)")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--smoke", action="store_true", help="2 rounds, 3 clients, 2 steps each: the same code path in seconds")
    args = ap.parse_args(argv)
    names = examples()
    if args.only:
        asked = [f"toolkit_{n.strip()}" for n in args.only.split(",") if n.strip()]
        unknown = [a for a in asked if a not in names]
        if unknown:
            ap.error(f"--only: no example {', '.join(unknown)} (shipped: {', '.join(n.removeprefix('toolkit_') for n in names)})")
        names = asked
    if args.smoke and not args.only:
        names = ["toolkit_fedyogi", "toolkit_fedbuff", "toolkit_arrays"]  # the three shapes: sync proxy, async, arrays
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start"
          f"{' (smoke: ' + ', '.join(TINY) + ')' if args.smoke else ''}")
    runs: list[dict[str, float | str]] = []
    with tempfile.TemporaryDirectory(prefix="toolkit-runs-bench-") as tmp:
        for i, name in enumerate([MAIN, *names, MAIN]):  # the main job first and last: the baseline brackets the examples
            r = run_example(name, Path(tmp) / f"run{i}", smoke_sets(name) if args.smoke else [])
            runs.append(r)
            print(f"  {name:28s} {r['wall_s']:7.1f} s wall, {r['cpu_s']:7.1f} s CPU (load {r['load_before']:.1f} -> {r['load_after']:.1f})",
                  flush=True)
    main_walls = [float(r["wall_s"]) for r in runs if r["experiment"] == MAIN]
    base = statistics.median(main_walls)
    print(f"main job (baseline): {base:.1f} s wall (median of {len(main_walls)}; range {min(main_walls):.1f}-{max(main_walls):.1f} s)")
    print(f"{'example':28s} {'policies':26s} {'wall s':>8s} {'vs main job':>12s}")
    for r in runs:
        if r["experiment"] != MAIN:
            r["vs_main_job"] = float(r["wall_s"]) / base
            print(f"{r['experiment']:28s} {r['policies']:26s} {float(r['wall_s']):8.1f} {r['vs_main_job']:11.2f}x")
    if args.json:
        doc = {"command": "python -m flamingo_sim run experiments/<example>.yaml", "cores": os.cpu_count(), "smoke": args.smoke,
               "main_job_median_wall_s": base, "main_job_walls_s": main_walls, "runs": runs}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        stamp([args.json], command_line())  # timings: no sources (they date with the whole tree)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
