"""Another revision's code against this tree's on a shortened main job and a shortened FedBuff job: identical outputs?

Each job (``experiments/openimage_mobilenet.yaml`` and ``experiments/toolkit_fedbuff.yaml``, both
policies, ``--set fl.rounds=N``) runs as a user runs it (``python -m flamingo_sim run``, a fresh
process and a fresh directory) twice: with the code of ``--base REV`` (``git archive`` into a
temporary folder, run from there, its own experiments and trace set) and with this tree's. Then:

- by default, ``metrics.parquet`` and ``summary.json`` compared byte for byte (what a refactor must
  keep: issue 42's refactor of ``fl/runner`` is checked against the commit before it, :data:`BASE`);
- with ``--lenient`` (a base from before issue 42's deliberate change: the decline columns), the
  tables compared value for value and exactly after dropping the ``declined_<reason>`` columns,
  and the summaries after dropping their ``declined`` entries (and the base's
  ``device_limits.declined_too_hot``, which the ``too_hot`` decline column now carries); the line
  also says whether this tree's ``declined.too_hot`` equals the base's ``declined_too_hot``.

The wall seconds of both, and their ratio, are printed beside (one run each: a rough figure on a
shared machine, not a benchmark of the refactor). ``--json PATH`` writes every figure.

    PYTHONPATH=. python benchmarks/identity.py [--base REV] [--rounds 5] [--lenient] [--json PATH]
    PYTHONPATH=. python benchmarks/identity.py --smoke     # HEAD's committed code against this tree, 1 round each
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
#: The commit before issue 42's refactor of fl/runner (the decline columns, display names and guide already in).
BASE = "7d93b8cea408e957bac5038e70b8e40c605b0465"
JOBS = ("openimage_mobilenet", "toolkit_fedbuff")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def checkout(rev: str, into: Path) -> Path:
    """``rev``'s tracked files under ``into`` (``git archive``); the folder."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_job(code: Path, job: str, rounds: int, out: Path) -> float:
    """``job`` run by the code in ``code`` into ``out``; its wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(code), "FLAMINGO_SIM_QUIET": "1"}
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "flamingo_sim", "run", f"experiments/{job}.yaml", "--out", str(out), "--set", f"fl.rounds={rounds}"],
                          cwd=code, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{job} with the code in {code} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - began


def _drop_declines(summary: Any) -> Any:
    """``summary`` without its ``declined`` entries and ``device_limits.declined_too_hot`` (what issue 42 moved or added)."""
    if isinstance(summary, dict):
        out = {k: _drop_declines(v) for k, v in summary.items() if k != "declined"}
        if isinstance(out.get("device_limits"), dict):
            out["device_limits"] = {k: v for k, v in out["device_limits"].items() if k != "declined_too_hot"}
        return out
    if isinstance(summary, list):
        return [_drop_declines(v) for v in summary]
    return summary


def compare(base: Path, mine: Path, lenient: bool) -> dict[str, Any]:
    """The two run directories' ``metrics.parquet`` and ``summary.json``: identical (byte for byte, or as ``--lenient`` says)."""
    out: dict[str, Any] = {name: {"base_sha256": _sha256(base / name), "this_sha256": _sha256(mine / name)}
                           for name in ("metrics.parquet", "summary.json")}
    if not lenient:
        for entry in out.values():
            entry["identical"] = entry["base_sha256"] == entry["this_sha256"]
        return out
    a, b = pd.read_parquet(base / "metrics.parquet"), pd.read_parquet(mine / "metrics.parquet")
    keep = lambda m: m[[c for c in m.columns if not c.startswith("declined_")]]  # noqa: E731
    out["metrics.parquet"]["identical"] = bool(keep(a).equals(keep(b)) and list(keep(a).columns) == list(keep(b).columns))
    sa, sb = json.loads((base / "summary.json").read_text()), json.loads((mine / "summary.json").read_text())
    out["summary.json"]["identical"] = _drop_declines(sa) == _drop_declines(sb)
    if "declined_too_hot" in a.columns:
        out["too_hot_carried"] = bool(a.groupby("policy")["declined_too_hot"].sum().equals(b.groupby("policy")["declined_too_hot"].sum()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default=BASE, help=f"the revision to compare with (default {BASE}: the commit before issue 42's refactor)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of each job (default 5)")
    ap.add_argument("--lenient", action="store_true", help="a base from before the decline columns: compare without them")
    ap.add_argument("--json", help="write every figure to this file")
    ap.add_argument("--smoke", action="store_true", help="HEAD's committed code against this tree, 1 round each")
    args = ap.parse_args()
    if args.smoke:
        args.base, args.rounds = "HEAD", 1
    record: dict[str, Any] = {"base": args.base, "base_commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.base], check=True,
                                                                               capture_output=True, text=True).stdout.strip(),
                              "rounds": args.rounds, "lenient": args.lenient, "command": "PYTHONPATH=. python benchmarks/identity.py " + " ".join(sys.argv[1:]),
                              "cpus": os.cpu_count(), "jobs": {}}
    with tempfile.TemporaryDirectory(prefix="identity-") as tmp:
        base_code = checkout(args.base, Path(tmp) / "base")
        for job in JOBS:
            base_s = run_job(base_code, job, args.rounds, Path(tmp) / f"{job}-base")
            this_s = run_job(ROOT, job, args.rounds, Path(tmp) / f"{job}-this")
            result = compare(Path(tmp) / f"{job}-base", Path(tmp) / f"{job}-this", args.lenient)
            result.update(base_wall_s=round(base_s, 1), this_wall_s=round(this_s, 1))
            record["jobs"][job] = result
            carried = f"; too_hot carried: {result['too_hot_carried']}" if "too_hot_carried" in result else ""
            print(f"{job} ({args.rounds} rounds, base {record['base_commit'][:8]}{', lenient' if args.lenient else ''}): "
                  f"metrics.parquet identical: {result['metrics.parquet']['identical']}, summary.json identical: "
                  f"{result['summary.json']['identical']}{carried}; wall base {base_s:.1f} s, this {this_s:.1f} s, ratio {this_s / base_s:.2f}x",
                  flush=True)
    record["identical"] = all(j[n]["identical"] for j in record["jobs"].values() for n in ("metrics.parquet", "summary.json"))
    if args.json:
        from flamingo_sim import provenance

        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
        provenance.stamp([args.json], record["command"])  # the commit, command and machine that wrote it


if __name__ == "__main__":
    main()
