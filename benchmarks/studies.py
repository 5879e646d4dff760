"""A study's units in parallel: wall time with ``--jobs 1`` against ``--jobs 2`` and ``--executor ray``.

Each candidate is the real command (``python -m flamingo_sim ...``, as a user runs it) into a
fresh directory; the candidates of one comparison run one after the other, interleaved when
repeated (``--repeat``), and every result is checked identical to the first candidate's:

1. ``reproduce --quick``: ``--jobs 1`` against ``--jobs 2`` (the goal: >= 1.6x on 2 cores);
   identical means ``tables.json`` and every run's ``metrics.parquet`` and ``summary.json``, byte for byte;
2. a 6-point ``sensitivity`` grid (7 runs with the reference): ``--jobs 1`` against ``--jobs 2``;
3. the same grid with ``--executor ray`` on a local Ray instance of 2 CPUs against ``--jobs 2``,
   and Ray's own start-up and per-task overhead (empty tasks), when Ray is installed.

The load average of the machine before and after each command is printed beside its time, with
the CPU seconds the command and its children used: on a shared machine the wall-time ratio
means little without them.

    PYTHONPATH=. python benchmarks/studies.py [--repeat 1] [--no-ray] [--only reproduce|grid|ray] [--keep DIR]
    PYTHONPATH=. python benchmarks/studies.py --smoke    # seconds: tiny runs, the same code path
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The 6 points of the grid (two knobs of three values, none equal to the reference's).
GRID = ["--vary", "fl.overcommit=1.0,1.6,2.0", "--vary", "policy.interference.shared_core_slowdown=1,1.5,3"]
#: --smoke: a run of a few seconds.
TINY = ["fl.rounds=3", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=1", "data.proxy.n_clients=100"]


def _sets(items: list[str]) -> list[str]:
    return [a for s in items for a in ("--set", s)]


def _timed(argv: list[str]) -> tuple[float, float, str]:
    """Run ``flamingo-sim ARGV``; its wall seconds, CPU seconds (with its children) and the load before/after."""
    before_load = os.getloadavg()[0]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "flamingo_sim", *argv], capture_output=True, text=True,
                          env={**os.environ, "FLAMINGO_SIM_QUIET": "1"}, check=False)
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): flamingo-sim {' '.join(argv)}\n{proc.stderr[-3000:]}")
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return wall, cpu, f"load {before_load:.1f} -> {os.getloadavg()[0]:.1f}"


def _outputs(out: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    """The files that must be identical: ``names`` in ``out`` and every run's metrics and summary."""
    files = {n: (out / n).read_bytes() for n in names}
    for run in sorted((out / "runs").iterdir()):
        for n in ("metrics.parquet", "summary.json"):
            files[f"runs/{run.name}/{n}"] = (run / n).read_bytes()
    return files


def compare(title: str, base: tuple[str, list[str]], other: tuple[str, list[str]], command: list[str], names: tuple[str, ...],
            work: Path, repeat: int) -> None:
    """Time ``command`` with each candidate's extra arguments, interleaved; check the outputs are identical."""
    print(f"\n== {title}")
    walls: dict[str, list[float]] = {base[0]: [], other[0]: []}
    reference: dict[str, bytes] | None = None
    for i in range(repeat):
        order = [base, other] if i % 2 == 0 else [other, base]
        for name, extra in order:
            out = work / f"{title.split()[0]}-{name.replace(' ', '_')}-{i}"
            wall, cpu, load = _timed([*command, "--out", str(out), *extra])
            walls[name].append(wall)
            print(f"  {name:>12}: {wall:7.1f} s wall, {cpu:7.1f} s CPU ({load})")
            files = _outputs(out, names)
            if reference is None:
                reference = files
            elif files != reference:
                differ = sorted(k for k in reference if files.get(k) != reference[k])
                raise SystemExit(f"  results differ from the first candidate's: {', '.join(differ)}")
            shutil.rmtree(out)
    b, o = min(walls[base[0]]), min(walls[other[0]])
    print(f"  speed-up of {other[0]} over {base[0]}: {b / o:.2f}x (best of {repeat}; all: "
          f"{', '.join(f'{w:.1f}' for w in walls[base[0]])} s against {', '.join(f'{w:.1f}' for w in walls[other[0]])} s); "
          f"outputs identical ({len(reference or {})} files)")


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
    parser.add_argument("--repeat", type=int, default=1, help="runs per candidate, interleaved (default 1)")
    parser.add_argument("--no-ray", action="store_true", help="leave out the Ray comparison")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (default: a temporary directory)")
    parser.add_argument("--only", choices=("reproduce", "grid", "ray"), help="run only this comparison")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="studies-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.smoke:
            reproduce = ["reproduce", "--quick", "--tasks", "openimage_mobilenet", "--seeds", "1", *_sets(TINY)]
            grid = ["sensitivity", "openimage_mobilenet", "--vary", "fl.overcommit=1.0", *_sets(TINY)]
        else:
            reproduce = ["reproduce", "--quick"]
            grid = ["sensitivity", "openimage_mobilenet", *GRID, *_sets(["fl.rounds=40", "fl.eval_every=4"])]
        if args.only in (None, "reproduce"):
            compare("reproduce --quick", ("--jobs 1", ["--jobs", "1"]), ("--jobs 2", ["--jobs", "2"]), reproduce, ("tables.json",),
                    work, args.repeat)
        if not args.smoke and args.only in (None, "grid"):
            compare("sensitivity grid", ("--jobs 1", ["--jobs", "1"]), ("--jobs 2", ["--jobs", "2"]), grid, ("sensitivity.csv",),
                    work, args.repeat)
        if args.no_ray or args.only not in (None, "ray"):
            return
        if importlib.util.find_spec("ray") is None:
            print("\n== Ray: not installed (pip install 'flamingo-sim[cluster]'), left out")
            return
        compare("sensitivity ray", ("--jobs 2", ["--jobs", "2"]), ("ray 2 CPUs", ["--executor", "ray", "--jobs", "2"]), grid,
                ("sensitivity.csv",), work, args.repeat)
        ray_overhead()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
