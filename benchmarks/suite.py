"""The test suite as a user runs it: ``python -m pytest -q`` (the default suite), and the slow tests counted.

Counts the tests of the default suite (``-m "not slow"``, pyproject's default) and the slow ones
with pytest's own collection, then times the default suite, each repeat in a fresh process: its
wall seconds, how many passed, failed and were skipped, and the machine's load average before and
after. The baseline, measured before each repeat in the same way, is the collection alone (the
same interpreter start, imports and collection, no test run): the script prints how many times
the collection the suite takes. This is the one source of the suite's size and time that
docs/install.md quotes (``tests/test_docs.py`` holds the page to the results file).

    PYTHONPATH=. python benchmarks/suite.py [--repeats 1] [--json benchmarks/results/suite_2cores.json]
    PYTHONPATH=. python benchmarks/suite.py --smoke     # one small test file, counted and timed
    PYTHONPATH=. python benchmarks/suite.py --count-only --json benchmarks/results/suite_count.json

``--count-only`` counts and times nothing else (two collections, under a minute): the suite's size, which docs/install.md
quotes with the commit it was counted at and ``tests/test_docs.py`` recounts (a slow test), so that the page's count
cannot go stale silently; the time, which takes the whole suite to measure, stays the last full measurement's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The test file the smoke run counts and times: the same code path in seconds.
SMOKE_FILE = "tests/test_errors.py"


def _pytest(args: list[str]) -> tuple[float, str]:
    """``python -m pytest -q -p no:cacheprovider ARGS`` in a fresh process from the checkout: wall seconds and its last line."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False)
    wall = time.perf_counter() - t0
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode not in (0, 1, 5) or not lines:  # 1: some test failed (counted below); 5: none selected; else pytest failed
        raise SystemExit(f"pytest {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return wall, lines[-1]


def _count(line: str, word: str) -> int:
    m = re.search(rf"(\d+) {word}", line)
    return int(m.group(1)) if m else 0


def collected(args: list[str]) -> tuple[int, float]:
    """The tests ``args`` select (pytest's ``--collect-only``), and the seconds it took."""
    wall, line = _pytest(["--collect-only", *args])
    if line.startswith("no tests collected"):
        return 0, wall
    m = re.match(r"(\d+)(?:/\d+)? tests? collected", line)
    if not m:
        raise SystemExit(f"cannot read the count from pytest's line {line!r}")
    return int(m.group(1)), wall


def count_only(out: Path | None, target: list[str]) -> int:
    """The default suite's and the slow tests' counts (no test run); with ``out``, written there and stamped (commit, command)."""
    default, _ = collected(target)
    slow, _ = collected([*target, "-m", "slow"])
    print(f"{' '.join(target) or 'the default suite'}: {default:,} tests (python -m pytest -q); slow tests besides: {slow:,}")
    if out is not None:
        from flamingo_sim.provenance import stamp

        out.write_text(json.dumps({"command": "python -m pytest -q --collect-only" + "".join(f" {t}" for t in target),
                                   "default_tests": default, "slow_tests": slow}, indent=2) + "\n")
        stamp([out], "PYTHONPATH=. python benchmarks/suite.py --count-only --json " + (out.as_posix() if not out.is_absolute() else out.name),
              ["benchmarks/suite.py"])
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--smoke", action="store_true", help=f"only {SMOKE_FILE}, once: the same code path in seconds")
    ap.add_argument("--count-only", action="store_true", help="count the default and the slow tests, run none (the docs' count)")
    args = ap.parse_args(argv)
    if args.count_only:
        return count_only(args.json, [SMOKE_FILE] if args.smoke else [])
    repeats = 1 if args.smoke else args.repeats
    if repeats < 1:
        ap.error("--repeats: expected at least 1")
    target = [SMOKE_FILE] if args.smoke else []
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    default, _ = collected(target)
    slow, _ = collected([*target, "-m", "slow"])
    print(f"{'smoke: ' + SMOKE_FILE if args.smoke else 'the default suite'}: {default:,} tests (python -m pytest -q); slow tests besides: {slow:,}")
    runs = []
    for i in range(repeats):
        _n, collect_s = collected(target)  # the baseline: the same start and collection, no test run
        load0 = os.getloadavg()[0]
        wall, line = _pytest(target)
        run = {"wall_s": wall, "collect_s": collect_s, "passed": _count(line, "passed"), "failed": _count(line, "failed"),
               "skipped": _count(line, "skipped"), "load_before": load0, "load_after": os.getloadavg()[0]}
        runs.append(run)
        print(f"  repeat {i + 1}: {wall:6.1f} s wall, collection alone {collect_s:.1f} s; {run['passed']} passed, {run['failed']} failed, "
              f"{run['skipped']} skipped (load {load0:.1f} -> {run['load_after']:.1f})")
    walls = [r["wall_s"] for r in runs]
    median = statistics.median(walls)
    ratio = median / statistics.median(r["collect_s"] for r in runs)
    print(f"default suite: {default:,} tests, {median:.1f} s wall (median of {len(walls)}; range {min(walls):.1f}-{max(walls):.1f} s), "
          f"{ratio:.1f}x the collection alone; failed: {sum(r['failed'] for r in runs)}")
    if args.json:
        args.json.write_text(json.dumps({
            "command": "python -m pytest -q" + (f" {SMOKE_FILE}" if args.smoke else ""), "cores": os.cpu_count(), "smoke": args.smoke,
            "default_tests": default, "slow_tests": slow, "runs": runs, "median_wall_s": median, "min_wall_s": min(walls),
            "max_wall_s": max(walls), "ratio_to_collection": ratio}, indent=2) + "\n")
    return 1 if any(r["failed"] for r in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
