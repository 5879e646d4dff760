"""A study's units in parallel: wall time with ``--jobs 1`` against ``--jobs 2`` and ``--executor ray``.

Each candidate is the real command (``python -m flamingo_sim ...``, as a user runs it) into a
fresh directory; the candidates of one comparison run one after the other, interleaved when
repeated (``--repeat``), and every result is checked identical to the first candidate's:

1. ``reproduce --quick``: ``--jobs 1`` against ``--jobs 2`` (the goal: >= 1.8x on an idle 2-core
   machine); identical means ``tables.json``, every figure (``figure6``, each task's ``figures/<task>/``,
   PNG and SVG) and every run's ``metrics.parquet`` and ``summary.json``, byte for byte. The ``--jobs 2`` runs record the pool's schedule
   (``FLAMINGO_SIM_SCHEDULE``): each worker's start-up, which worker ran which unit when, which
   units reused their seed's components and what building them cost;
2. a 6-point ``sensitivity`` grid (7 runs with the reference): ``--jobs 1`` against ``--jobs 2``;
3. the same grid with ``--executor ray`` on a local Ray instance of 2 CPUs against ``--jobs 2``,
   and Ray's own start-up and per-task overhead (empty tasks), when Ray is installed;
4. ``--jobs J`` on J cores, simulated: the pool's own scheduler (``pick``) replayed over the units'
   measured times (training, and building a seed's components where the worker does not hold
   them), plus the command's measured serial head (start, validation) and tail (summaries,
   report): for ``reproduce --quick`` (checked against the measured ``--jobs 2``) and for the
   full ``reproduce`` (100 rounds instead of 40, 3 seeds: each unit's training scaled by the
   rounds, a third seed's units as the mean of the first two).

``--only full`` runs the full ``reproduce`` (100 rounds, 3 seeds) the same way, ``--jobs 1`` against
``--jobs 2`` (with ``--keep DIR``, both output directories are left in DIR).

The load average of the machine before and after each command is printed beside its time, with
the CPU seconds of the command (and of its workers, from the schedule): on a shared machine the
wall-time ratio means little without them. ``--json PATH`` writes every figure.

    PYTHONPATH=. python benchmarks/studies.py [--repeat 2] [--no-ray] [--only reproduce|grid|ray] [--keep DIR] [--json PATH]
    PYTHONPATH=. python benchmarks/studies.py --smoke    # seconds: tiny runs, the same code path
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flamingo_sim.provenance import command_line, stamp  # each results file's commit, command and machine

ROOT = Path(__file__).resolve().parents[1]
#: The 6 points of the grid (two knobs of three values, none equal to the reference's).
GRID = ["--vary", "fl.overcommit=1.0,1.6,2.0", "--vary", "policy.interference.shared_core_slowdown=1,1.5,3"]
#: --smoke: a run of a few seconds.
TINY = ["fl.rounds=3", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=1", "data.proxy.n_clients=100"]


def _sets(items: list[str]) -> list[str]:
    return [a for s in items for a in ("--set", s)]


def _timed(argv: list[str], schedule: Path | None = None) -> tuple[float, float, str, float]:
    """Run ``flamingo-sim ARGV``; its wall seconds, CPU seconds (with the children it waited for), the
    load before/after and the wall-clock time it started (``schedule``: where its pool writes its schedule)."""
    before_load = os.getloadavg()[0]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "FLAMINGO_SIM_QUIET": "1", **({"FLAMINGO_SIM_SCHEDULE": str(schedule)} if schedule else {})}
    began = time.time()
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "flamingo_sim", *argv], capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): flamingo-sim {' '.join(argv)}\n{proc.stderr[-3000:]}")
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return wall, cpu, f"load {before_load:.1f} -> {os.getloadavg()[0]:.1f}", began


def _outputs(out: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    """The files that must be identical: ``names`` in ``out``, every figure (PNG, SVG) and every run's metrics and summary."""
    files = {n: (out / n).read_bytes() for n in names}
    files.update({str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.suffix in (".png", ".svg")})
    for run in sorted((out / "runs").iterdir()):
        for n in ("metrics.parquet", "summary.json"):
            files[f"runs/{run.name}/{n}"] = (run / n).read_bytes()
    return files


def read_schedule(path: Path, began: float, wall: float) -> dict[str, Any]:
    """The pool's schedule of one command: workers' start-up, each unit (worker, start, wall,
    reused or build seconds), the command's serial head and tail, the workers' CPU seconds."""
    events = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    sends = {(e["worker"], e["run"], e["unit"]): e for e in events if e["event"] == "send"}
    units = [{"worker": e["worker"], "run": e["run"], "unit": e["unit"], "start_s": round(sends[(e["worker"], e["run"], e["unit"])]["at"] - began, 3),
              "wall_s": e["wall_s"], "reused": e["reused"], "build_s": e["build_s"]} for e in events if e["event"] == "done"]
    cpu: dict[int, float] = {}
    for e in events:
        if e["event"] == "done":
            cpu[e["worker"]] = e["cpu_s"]
    starts = [e["at"] for e in events if e["event"] == "send"]
    ends = [e["at"] for e in events if e["event"] == "done"]
    return {"start_up_s": [e["start_up_s"] for e in events if e["event"] == "ready"], "units": units,
            "head_s": round(min(starts) - began, 3) if starts else None, "tail_s": round(began + wall - max(ends), 3) if ends else None,
            "workers_cpu_s": round(sum(cpu.values()), 2)}


def compare(title: str, base: tuple[str, list[str]], other: tuple[str, list[str]], command: list[str], names: tuple[str, ...],
            work: Path, repeat: int, keep: bool = False) -> dict[str, Any]:
    """Time ``command`` with each candidate's extra arguments, interleaved; check the outputs are identical
    (``keep``: leave every output directory in ``work``)."""
    print(f"\n== {title}")
    walls: dict[str, list[float]] = {base[0]: [], other[0]: []}
    runs: list[dict[str, Any]] = []
    reference: dict[str, bytes] | None = None
    for i in range(repeat):
        order = [base, other] if i % 2 == 0 else [other, base]
        for name, extra in order:
            slug = re.sub(r"\W+", "_", f"{title}-{name}").strip("_")  # the whole title: two comparisons may share a first word
            out = work / f"{slug}-{i}"
            schedule = work / f"schedule-{slug}-{i}.jsonl"
            wall, cpu, load, began = _timed([*command, "--out", str(out), *extra], schedule)
            walls[name].append(wall)
            sched = read_schedule(schedule, began, wall)
            workers = f" + {sched['workers_cpu_s']:.1f} s in its workers" if sched["units"] else ""
            print(f"  {name:>12}: {wall:7.1f} s wall, {cpu:7.1f} s CPU{workers} ({load})")
            if sched["units"]:
                print(f"  {'':>12}  workers' start-up {', '.join(f'{s:.2f}' for s in sched['start_up_s'])} s; first unit sent at "
                      f"{sched['head_s']:.1f} s, last done {sched['tail_s']:.1f} s before the end; "
                      f"{sum(u['reused'] for u in sched['units'])} of {len(sched['units'])} units reused their seed's components")
            runs.append({"candidate": name, "repeat": i, "wall_s": round(wall, 3), "cpu_s": round(cpu, 2), "load": load, "schedule": sched})
            files = _outputs(out, names)
            if reference is None:
                reference = files
            elif files != reference:
                differ = sorted(k for k in reference if files.get(k) != reference[k])
                raise SystemExit(f"  results differ from the first candidate's: {', '.join(differ)}")
            if not keep:
                shutil.rmtree(out)
    b, o = statistics.median(walls[base[0]]), statistics.median(walls[other[0]])
    ratios = sorted(x / y for x, y in zip(walls[base[0]], walls[other[0]]))
    print(f"  speed-up of {other[0]} over {base[0]}: {b / o:.2f}x (medians of {repeat}; spread {ratios[0]:.2f}-{ratios[-1]:.2f}x; "
          f"per repeat {', '.join(f'{r:.2f}x' for r in ratios)}; all: "
          f"{', '.join(f'{w:.1f}' for w in walls[base[0]])} s against {', '.join(f'{w:.1f}' for w in walls[other[0]])} s); "
          f"outputs identical ({len(reference or {})} files)")
    return {"title": title, "base": base[0], "other": other[0], "speedup_median": round(b / o, 3), "speedup_per_repeat": [round(r, 3) for r in ratios],
            "identical_files": len(reference or {}), "runs": runs}


# -- the schedule on J cores, simulated -----------------------------------------------------------
def simulate(units: list[dict[str, Any]], jobs: int, start_up_s: float) -> float:
    """The makespan of ``units`` (``run``, ``seed``, ``cost``, ``train_s``, ``build_s``) on ``jobs`` workers
    under the pool's own order and choice (``_order``, ``pick``): a worker builds a seed's
    components unless it holds them."""
    from flamingo_sim.fl.runner.executors.pool import _order, pick
    from flamingo_sim.fl.runner.unit_files import Unit

    objs = [Unit("x", (), None, u["run"], u["policy"], u["seed"], f"{u['run']} {u['policy']} {u['seed']}", cost=u["cost"]) for u in units]
    times = {(u["run"], u["policy"], u["seed"]): u for u in units}
    queue = _order(objs)
    free: list[tuple[float, int, list[tuple[str, int]]]] = [(start_up_s, w, []) for w in range(jobs)]  # (free at, worker, seeds held)
    end = 0.0
    while queue:
        free.sort(key=lambda f: (f[0], f[1]))
        t, w, holds = free.pop(0)
        busy = {held[-1] for until, _, held in free if until > t and held}
        unit = queue.pop(pick(queue, holds, busy))
        u = times[(unit.run_dir, unit.policy, unit.seed)]
        key = (unit.run_dir, unit.seed)
        t += u["train_s"] + (0.0 if key in holds else u["build_s"])
        free.append((t, w, [k for k in holds if k != key][-1:] + [key]))
        end = max(end, t)
    return end


def unit_times(sched: dict[str, Any], rounds_scale: float = 1.0, seeds: int | None = None) -> list[dict[str, Any]]:
    """The units of a measured schedule as (training, build) seconds, training scaled by ``rounds_scale``;
    ``seeds``: as many seeds per run (a seed not measured: the mean of the measured ones)."""
    builds: dict[str, list[float]] = {}
    for u in sched["units"]:
        if not u["reused"]:
            builds.setdefault(u["run"], []).append(u["build_s"])
    measured: dict[tuple[str, str], list[float]] = {}
    for u in sched["units"]:
        policy, _, seed = u["unit"].rpartition("-seed")
        measured.setdefault((u["run"], policy), []).append(u["wall_s"] - u["build_s"])
    out = []
    for (run, policy), trains in measured.items():
        build = statistics.mean(builds.get(run, [0.0]))
        n = seeds or len(trains)
        for seed in range(n):
            train = trains[seed] if seed < len(trains) else statistics.mean(trains)
            out.append({"run": run, "policy": policy, "seed": seed, "cost": train, "train_s": train * rounds_scale, "build_s": build})
    return out


def schedule_estimate(measured: dict[str, Any], smoke: bool) -> dict[str, Any]:
    """``--jobs J`` on J cores, from the median ``--jobs 2`` run's schedule (see the module's docstring)."""
    jobs2 = [r for r in measured["runs"] if r["candidate"] == "--jobs 2"]
    jobs1 = [r for r in measured["runs"] if r["candidate"] == "--jobs 1"]
    run = sorted(jobs2, key=lambda r: r["wall_s"])[len(jobs2) // 2]
    sched = run["schedule"]
    head, tail = sched["head_s"], sched["tail_s"]
    start_up = max(sched["start_up_s"], default=0.0)
    print("\n== --jobs J on J cores, simulated from the measured units (the pool's own scheduler)")
    print(f"  from the median --jobs 2 run: serial head {head:.1f} s (start, validation), tail {tail:.1f} s (summaries, report), "
          f"worker start-up {start_up:.2f} s; units: " + ", ".join(f"{u['run']}/{u['unit']} {u['wall_s']:.1f} s"
                                                                   + ("" if u["reused"] else f" (build {u['build_s']:.1f})") for u in sched["units"]))
    out: dict[str, Any] = {"from_run": {"wall_s": run["wall_s"], "head_s": head, "tail_s": tail, "start_up_s": start_up}}
    plans = {"reproduce --quick": (1.0, None)} if smoke else {"reproduce --quick": (1.0, None), "reproduce (full: 100 rounds, 3 seeds)": (100 / 40, 3),
                                                             "reproduce, 100 rounds, 16 seeds": (100 / 40, 16)}
    for name, (scale, seeds) in plans.items():
        units = unit_times(sched, scale, seeds)
        # one job: the units one after another in the command's process, each seed's components built once
        one = head + sum(u["train_s"] for u in units) + sum({(u["run"], u["seed"]): u["build_s"] for u in units}.values()) + tail
        rows = {}
        for jobs in (1, 2, 4, 8, 16):
            total = head + simulate(units, jobs, start_up if jobs > 1 else 0.0) + tail
            rows[jobs] = {"wall_s": round(total, 2), "speedup": round(one / total, 3)}
        line = ", ".join(f"--jobs {j}: {r['wall_s']:.0f} s ({r['speedup']:.2f}x)" for j, r in rows.items())
        print(f"  {name}, {len(units)} units: {line}")
        out[name] = {"units": len(units), "jobs": rows}
    if jobs1:
        measured_ratio = statistics.median(r["wall_s"] for r in jobs1) / statistics.median(r["wall_s"] for r in jobs2)
        print(f"  check: simulated --jobs 2 of --quick {out['reproduce --quick']['jobs'][2]['speedup']:.2f}x, measured {measured_ratio:.2f}x (medians)")
        out["measured_jobs2_speedup"] = round(measured_ratio, 3)
    return out


def ray_overhead(tasks: int = 20) -> None:
    """Ray's own costs on a local instance of 2 CPUs: start-up, a first task (a worker process
    starts), and the mean round trip of an empty task once workers are up."""
    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    started = time.perf_counter() - t0
    noop = ray.remote(_noop)
    t0 = time.perf_counter()
    ray.get(noop.remote())
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(tasks):
        ray.get(noop.remote())
    each = (time.perf_counter() - t0) / tasks
    ray.shutdown()
    print(f"  Ray itself: ray.init {started:.1f} s, first task {first:.2f} s, then {each * 1000:.0f} ms per empty task "
          f"(mean of {tasks}, one after another)")


def _noop() -> None:
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny runs (seconds), the same code path")
    parser.add_argument("--repeat", type=int, default=2, help="runs per candidate, interleaved (default 2)")
    parser.add_argument("--json", metavar="PATH", help="write every figure here (benchmarks/results/studies_2cores.json)")
    parser.add_argument("--no-ray", action="store_true", help="leave out the Ray comparison")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (default: a temporary directory)")
    parser.add_argument("--only", choices=("reproduce", "grid", "ray", "full"),
                        help="run only this comparison (full: the full reproduce, 100 rounds x 3 seeds, not run otherwise)")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    results: dict[str, Any] = {"cores": os.cpu_count(), "load_at_start": round(os.getloadavg()[0], 2)}
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="studies-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.smoke:
            reproduce = ["reproduce", "--quick", "--tasks", "openimage_mobilenet", "--seeds", "1", *_sets(TINY)]
            grid = ["sensitivity", "openimage_mobilenet", "--vary", "fl.overcommit=1.0", *_sets(TINY)]
        else:
            reproduce = ["reproduce", "--quick"]
            grid = ["sensitivity", "openimage_mobilenet", *GRID, *_sets(["fl.rounds=40", "fl.eval_every=4"])]
        repeat = 1 if args.smoke else args.repeat
        if args.only in (None, "reproduce"):
            results["reproduce_quick"] = compare("reproduce --quick", ("--jobs 1", ["--jobs", "1"]), ("--jobs 2", ["--jobs", "2"]), reproduce,
                                                 ("tables.json",), work, repeat)
            results["simulated"] = schedule_estimate(results["reproduce_quick"], args.smoke)
        if not args.smoke and args.only == "full":
            results["reproduce_full"] = compare("reproduce (full)", ("--jobs 1", ["--jobs", "1"]), ("--jobs 2", ["--jobs", "2"]), ["reproduce"],
                                                ("tables.json",), work, repeat, keep=bool(args.keep))
        if not args.smoke and args.only in (None, "grid"):
            results["sensitivity_grid"] = compare("sensitivity grid", ("--jobs 1", ["--jobs", "1"]), ("--jobs 2", ["--jobs", "2"]), grid,
                                                  ("sensitivity.csv",), work, repeat)
        if not (args.no_ray or args.only not in (None, "ray")):
            if importlib.util.find_spec("ray") is None:
                print("\n== Ray: not installed (pip install 'flamingo-sim[cluster]'), left out")
            else:
                results["sensitivity_ray"] = compare("sensitivity ray", ("--jobs 2", ["--jobs", "2"]), ("ray 2 CPUs", ["--executor", "ray", "--jobs", "2"]),
                                                     grid, ("sensitivity.csv",), work, repeat)
                ray_overhead()
        results["load_at_end"] = round(os.getloadavg()[0], 2)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
            stamp([Path(args.json)], command_line())  # timings: no sources (they date with the whole tree)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
