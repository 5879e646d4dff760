"""Cost per round and peak memory against the population's size, 10^3 ... 10^7 clients.

Runs what ``flamingo-sim run experiments/openimage_mobilenet.yaml`` runs (``run_experiment``,
one thread) with ``data.proxy.n_clients=N`` and a small cohort (``fl.participants_per_round=10``,
``fl.local_steps=1``: the simulation's own work, not training, dominates), one policy per
process, for ``--long`` rounds; a callback after the built-in ones (progress, checkpoints
every 10 rounds, metrics files) notes when each round ended, and the cost of a round is the
time from the end of round ``--short`` to the end of round ``--long`` over the rounds between
(the difference between a 24- and a 4-round run, without two start-ups' noise; evaluation
every 5 rounds and the checkpoints stay in). Peak memory is the process's maximum resident
set. The runs are interleaved (sizes and policies in every repeat), so all see the same load.
Prints the median and the spread of each, and the ratio of the largest population's cost per
round to the smallest's (1.0x: the round does not grow with the population). ``--baseline-ref REF`` measures the code at git ``REF`` (``git archive``) the same
way at the sizes in ``--baseline-sizes``, interleaved, and prints old / new.

    PYTHONPATH=. python benchmarks/population.py [--repeats 3] [--out benchmarks/results/population_2cores.json]
    PYTHONPATH=. python benchmarks/population.py --plot docs/img/population.svg   # the figure from the results file
    PYTHONPATH=. python benchmarks/population.py --smoke    # seconds: 1,000 and 20,000 clients, one policy
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

from flamingo_sim.provenance import command_line, stamp  # each results file's commit, command and machine

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "experiments/openimage_mobilenet.yaml"
COHORT = ["fl.participants_per_round=10", "fl.local_steps=1"]
SMOKE = {"repeats": 1, "sizes": "1000,20000", "policies": "flamingo", "short": 2, "long": 4}
RESULTS = ROOT / "benchmarks" / "results" / "population_2cores.json"


WORKER = r"""
import json, resource, sys, time
from flamingo_sim.fl.runner.callbacks import Callback
from flamingo_sim.fl.runner.run import run_experiment

experiment, out, rounds, overrides = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
ends = {}


class Clock(Callback):  # after the built-in callbacks: a round's time includes its checkpoint and metrics writes
    def on_round_end(self, sim, record):
        ends[sim.round] = (time.perf_counter(), time.process_time())
        return False


run_experiment(experiment, out_dir=out, overrides=overrides, callbacks=[Clock()], threads=1, jobs=1, log=lambda _m: None)
print(json.dumps({"ends": ends, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))
"""


def run_once(tree: Path, n_clients: int, policy: str, rounds: int, work: Path) -> dict:
    """One ``run`` of ``rounds`` rounds in its own process: when each round ended, and the peak RSS (MB)."""
    out = work / f"run-{n_clients}-{policy}"
    overrides = [f"data.proxy.n_clients={n_clients}", f"fl.rounds={rounds}", f"policies=[{policy}]", *COHORT]
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", WORKER, str(tree / EXPERIMENT), str(out), str(rounds), json.dumps(overrides)],
                          cwd=tree, env=env, capture_output=True, text=True)
    subprocess.run(["rm", "-rf", str(out)], check=False)
    if done.returncode:
        raise SystemExit(f"run failed ({tree}, {n_clients} clients, {policy}):\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"ends": {int(k): tuple(v) for k, v in result["ends"].items()}, "rss_mb": result["rss_mb"]}


def baseline_tree(ref: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "flamingo_sim", "profiles", "traces", "experiments"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def summarise(runs: list[dict]) -> dict:
    out: dict = {}
    for key in ("round_ms", "round_cpu_ms"):
        values = [r[key] for r in runs]
        out.update({key: statistics.median(values), f"{key}_min": min(values), f"{key}_max": max(values)})
    return {**out, "peak_rss_mb": max(r["rss_mb"] for r in runs), "runs": runs}


def plot(results: dict, path: Path) -> None:
    """Cost per round and peak memory against the population, from a results file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (cost, mem) = plt.subplots(1, 2, figsize=(9, 3.4))
    for policy, rows in results["new"].items():
        sizes = sorted(int(n) for n in rows)
        ms = [rows[str(n)]["round_cpu_ms"] for n in sizes]
        err = [[m - rows[str(n)]["round_cpu_ms_min"] for n, m in zip(sizes, ms)], [rows[str(n)]["round_cpu_ms_max"] - m for n, m in zip(sizes, ms)]]
        cost.errorbar(sizes, ms, yerr=err, marker="o", capsize=3, label=policy)
        mem.plot(sizes, [rows[str(n)]["peak_rss_mb"] / 1024 for n in sizes], marker="o", label=policy)
    for policy, rows in results.get("old", {}).items():
        sizes = sorted(int(n) for n in rows)
        cost.plot(sizes, [rows[str(n)]["round_cpu_ms"] for n in sizes], marker="x", linestyle=":", label=f"{policy}, before")
        mem.plot(sizes, [rows[str(n)]["peak_rss_mb"] / 1024 for n in sizes], marker="x", linestyle=":", label=f"{policy}, before")
    for ax, label in ((cost, "CPU ms per round (median, min-max)"), (mem, "peak memory (GB)")):
        ax.set_xscale("log")
        ax.set_xlabel("clients in the population")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    cost.set_yscale("log")
    cost.legend(fontsize=7)
    fig.suptitle(f"10 clients x 1 step a round, {results['cores']} cores, load {results['load']}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)


def collect(runs: dict, args: argparse.Namespace, load: list[float]) -> dict:
    """The results file's content from the runs so far."""
    results: dict = {"command": "PYTHONPATH=. python benchmarks/population.py " + " ".join(sys.argv[1:]),
                     "cores": os.cpu_count(), "load": f"{min(load):.1f}-{max(load):.1f}", "short_rounds": args.short,
                     "long_rounds": args.long, "cohort": COHORT, "baseline_ref": args.baseline_ref}
    for (name, policy, n), rows in runs.items():
        results.setdefault(name, {}).setdefault(policy, {})[str(n)] = summarise(rows)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000,10000000")
    parser.add_argument("--policies", default="baseline,flamingo")
    parser.add_argument("--short", type=int, default=4, help="rounds of the short run")
    parser.add_argument("--long", type=int, default=24, help="rounds of the long run")
    parser.add_argument("--baseline-ref", help="also measure the code at this git ref (old / new)")
    parser.add_argument("--baseline-sizes", default="10000000", help="sizes at which --baseline-ref is measured")
    parser.add_argument("--out", type=Path, help="write the results (JSON) here")
    parser.add_argument("--plot", type=Path, help="draw the figure from --results into this file and stop")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results file that --plot reads")
    parser.add_argument("--smoke", action="store_true", help=f"tiny sizes, seconds ({SMOKE})")
    args = parser.parse_args(argv)
    if args.plot:
        plot(json.loads(args.results.read_text()), args.plot)
        return
    if args.smoke:
        parser.set_defaults(**SMOKE)
        args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    policies = args.policies.split(",")
    old_sizes = [int(s) for s in args.baseline_sizes.split(",")] if args.baseline_ref else []
    runs: dict[tuple[str, str, int], list[dict]] = {}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        trees = {"new": ROOT}
        if args.baseline_ref:
            trees["old"] = baseline_tree(args.baseline_ref, work / "old")
        for _ in range(args.repeats):
            for n in sizes:
                for policy in policies:
                    for name, tree in trees.items():
                        if name == "old" and n not in old_sizes:
                            continue
                        res = run_once(tree, n, policy, args.long, work)
                        (wall0, cpu0), (wall1, cpu1) = res["ends"][args.short], res["ends"][args.long]
                        per = 1000.0 / (args.long - args.short)
                        runs.setdefault((name, policy, n), []).append({"round_ms": per * (wall1 - wall0), "round_cpu_ms": per * (cpu1 - cpu0),
                                                                       "rss_mb": res["rss_mb"]})
                        load.append(os.getloadavg()[0])
            if args.out:  # after every repeat: a run cut short keeps what it measured
                args.out.write_text(json.dumps(collect(runs, args, load), indent=1) + "\n")
                stamp([args.out], command_line())  # timings: no sources (they date with the whole tree)
    results = collect(runs, args, load)
    print(f"ms per round, wall and CPU (rounds {args.short}-{args.long}, median of {args.repeats}, min-max), peak RSS; load {results['load']}")
    print(f"{'policy':<10} {'clients':>11} {'wall ms':>8} {'spread':>15} {'CPU ms':>7} {'spread':>15} {'peak MB':>8}")
    for policy in policies:
        for n in sizes:
            r = results["new"][policy][str(n)]
            print(f"{policy:<10} {n:>11,} {r['round_ms']:>8.1f} {r['round_ms_min']:>7.1f}-{r['round_ms_max']:<7.1f} "
                  f"{r['round_cpu_ms']:>7.1f} {r['round_cpu_ms_min']:>7.1f}-{r['round_cpu_ms_max']:<7.1f} {r['peak_rss_mb']:>8.0f}")
        first, last = results["new"][policy][str(sizes[0])], results["new"][policy][str(sizes[-1])]
        print(f"{policy}: a round at {sizes[-1]:,} clients costs {last['round_cpu_ms'] / first['round_cpu_ms']:.2f}x the CPU of one at {sizes[0]:,} "
              f"({last['round_ms'] / first['round_ms']:.2f}x the wall time)")
        for n in old_sizes:
            old, new = results["old"][policy][str(n)], results["new"][policy][str(n)]
            print(f"{policy} at {n:,} clients: {args.baseline_ref} {old['round_ms']:.1f} ms ({old['round_cpu_ms']:.1f} ms CPU) per round, "
                  f"{old['peak_rss_mb']:.0f} MB; now {old['round_ms'] / new['round_ms']:.1f}x faster ({old['round_cpu_ms'] / new['round_cpu_ms']:.1f}x "
                  f"less CPU), {old['peak_rss_mb'] / new['peak_rss_mb']:.2f}x less memory")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        stamp([args.out], command_line())  # timings: no sources (they date with the whole tree)


if __name__ == "__main__":
    main()
