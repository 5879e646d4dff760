"""The real-data ``reproduce``, end to end, on random data in FedScale's layouts: packing, the study's own estimate, and
the whole study's time extrapolated from the rounds measured.

It writes OpenImage (``open_images/``: PNG images) and Google Speech (``google_speech/``: WAV clips) in FedScale's
layouts under one folder (``tests/layouts.py``'s writers, ``--clients`` clients of ``--samples`` samples each), then
runs the command a user runs, ``flamingo-sim reproduce --data-root DIR``, with one seed and ``--rounds`` rounds per
task on ``--device``, and checks and reports:

- each data set was packed once (the two OpenImage tasks share one pack): the packs in ``OUT/packs`` and the lines
  that say so;
- the report says every task trained on real data;
- the study's own estimate from its first rounds, against the time the units really took;
- each unit's wall time (timed from the study's "started" / "done" lines), per round (each task's faster unit: the
  first unit of a task on a GPU also measures ``train_mode: auto``'s candidates), and from them the whole
  ``reproduce`` on this device (:data:`FULL`: 3 tasks x 2 policies x 3 seeds x 100 rounds, one unit after another,
  i.e. one GPU), as ``--json`` records it with the device, the command and the commit.

    PYTHONPATH=. python benchmarks/reproduce_real.py --smoke                       # CPU, seconds: the whole path
    PYTHONPATH=. python benchmarks/reproduce_real.py --device cuda --rounds 2 --image-size 224 --json r.json   # a GPU

``--smoke``: 12 clients of 8 samples, 32 px images, 3 rounds of 4 participants x 1 step of batch 4, ``--jobs 2``, on the CPU.
``--budget-s``: the study is stopped (SIGTERM: a clean stop) at that many seconds after the start and the figures
come from the units that finished (``complete: false`` in ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.layouts import write_openimage, write_speech  # noqa: E402 - the repository's own fixtures

SMOKE = {"device": "cpu", "clients": 12, "samples": 8, "image_size": 32, "rounds": 3, "participants": 4, "steps": 1, "jobs": 2, "batch_size": 4}
#: The whole evaluation the estimate is for: rounds per unit, seeds, policies (x the three tasks).
FULL = {"rounds": 100, "seeds": 3, "policies": 2}
TASKS = ("openimage_mobilenet", "openimage_shufflenet", "speech_resnet34")


def commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def write_data(root: Path, clients: int, samples: int) -> None:
    write_openimage(root / "open_images", {f"c{i:04d}": samples for i in range(clients)}, n_test=max(8, samples))
    write_speech(root / "google_speech", {f"s{i:04d}": samples for i in range(clients)}, n_test=max(6, samples))


def run_study(argv: list[str], budget_s: float | None = None) -> tuple[int, list[tuple[float, str]], bool]:
    """``flamingo-sim ARGV``; its exit code, each stderr line with the seconds since the start, and whether it was
    stopped (SIGTERM, a clean stop that keeps the finished units) after ``budget_s``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLAMINGO_SIM_QUIET": "1"}
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "flamingo_sim", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    stopped = threading.Event()

    def stop() -> None:
        if proc.poll() is None:
            stopped.set()
            proc.send_signal(signal.SIGTERM)

    timer = threading.Timer(budget_s, stop) if budget_s else None
    if timer is not None:
        timer.start()
    lines: list[tuple[float, str]] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append((time.monotonic() - t0, line.rstrip("\n")))
        print(f"  | {line.rstrip()}", flush=True)
    rc = proc.wait()
    if timer is not None:
        timer.cancel()
    return rc, lines, stopped.is_set()


def unit_walls(lines: list[tuple[float, str]]) -> dict[str, float]:
    """Each unit's wall seconds, from its "started" and "done" lines."""
    started: dict[str, float] = {}
    walls: dict[str, float] = {}
    for t, line in lines:
        m = re.match(r"\[\d+/\d+\] (.+): (started|resuming from round \d+)$", line)
        if m:
            started[m.group(1)] = t
        m = re.match(r"(.+): done \(units: ", line)
        if m and m.group(1) in started:
            walls[m.group(1)] = t - started[m.group(1)]
    return walls


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="fl.device of every task: auto, cpu, cuda")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--samples", type=int, default=16, help="samples (images, clips) per client")
    parser.add_argument("--image-size", type=int, help="data.image_size of the OpenImage tasks (default: the experiments')")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per unit measured")
    parser.add_argument("--participants", type=int, help="fl.participants_per_round (default: the experiments')")
    parser.add_argument("--steps", type=int, help="fl.local_steps (default: the experiments')")
    parser.add_argument("--jobs", type=int, default=1, help="--jobs of the study (1: one unit after another, as on one GPU)")
    parser.add_argument("--batch-size", type=int, help="fl.batch_size (default: the tasks' own, 16; at most --samples)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a further --set for the study (repeatable)")
    parser.add_argument("--work", help="keep the data and the study here (default: a temporary folder)")
    parser.add_argument("--json", help="write the results here (with the command, the commit and the device)")
    parser.add_argument("--budget-s", type=float, help="stop the study (SIGTERM) this many seconds after the start; report what finished")
    parser.add_argument("--smoke", action="store_true", help="tiny, on the CPU: see the module docstring")
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**SMOKE)
        args = parser.parse_args(argv)
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        data, out = work / "data", work / "study"
        t0 = time.perf_counter()
        write_data(data, args.clients, args.samples)
        written_s = time.perf_counter() - t0
        sets = [f"fl.rounds={args.rounds}", f"fl.eval_every={max(1, args.rounds)}", f"fl.device={args.device}", "data.filter_less=1", *args.set]
        sets += [f"fl.participants_per_round={args.participants}"] if args.participants else []
        sets += [f"fl.local_steps={args.steps}"] if args.steps else []
        sets += [f"fl.batch_size={args.batch_size}"] if args.batch_size else []
        if args.image_size:
            sets += [f"{t}:data.image_size={args.image_size}" for t in TASKS if t.startswith("openimage")]
        study = ["reproduce", "--data-root", str(data), "--out", str(out), "--seeds", "1", "--jobs", str(args.jobs),
                 *[a for s in sets for a in ("--set", s)]]
        print(f"data: {args.clients} clients x {args.samples} samples per data set, written in {written_s:.1f} s; "
              f"flamingo-sim {' '.join(study)}", flush=True)
        t0 = time.perf_counter()
        left = None if args.budget_s is None else max(1.0, args.budget_s - (time.monotonic() - began))
        rc, lines, stopped = run_study(study, left)
        wall = time.perf_counter() - t0
        if rc != 0 and not stopped:
            sys.exit(f"reproduce exited {rc}")
        if stopped:
            print(f"stopped after --budget-s {args.budget_s:g}: the figures below are from the units that finished")
        text = [line for _, line in lines]
        packs = sorted(p.name for p in (out / "packs").iterdir()) if (out / "packs").is_dir() else []
        packing = [line for line in text if line.startswith("data: packing ")]
        real = (out / "report.md").is_file() and "All tasks trained on real data" in (out / "report.md").read_text()
        estimates = [line for line in text if line.startswith("estimate from the first rounds (")]
        estimate = estimates[-1] if estimates else None  # the last: the most runs measured
        walls = unit_walls(lines)
    # each task's faster unit: the first unit of a task on a GPU also measures train_mode auto's candidates (then cached)
    per_task = {t: min(w for name, w in walls.items() if name.startswith(t + " ")) for t in TASKS
                if any(name.startswith(t + " ") for name in walls)}
    per_round = {t: w / args.rounds for t, w in per_task.items()}
    full_s = sum(per_round.values()) * FULL["rounds"] * FULL["seeds"] * FULL["policies"] if len(per_round) == len(TASKS) else None
    units_s = sum(walls.values()) / max(1, args.jobs)
    print(f"\npacks: {len(packs)} ({', '.join(packs)}); packing lines: {len(packing)}; each data set packed once: "
          f"{len(packs) == len(packing) == 2}; every task on real data: {real}")
    for t in per_task:
        print(f"{t:<22} {per_task[t]:8.2f} s a unit of {args.rounds} rounds = {per_round[t]:7.3f} s a round")
    if estimate:
        m = re.search(r"take about (\d+:\d\d(?::\d\d)?) in all", estimate)
        est_s = sum(int(x) * 60**i for i, x in enumerate(reversed(m.group(1).split(":")))) if m else None
        if est_s:
            print(f"the study's own estimate ({len(estimates)} said, the last): {est_s} s; it took {wall:.1f} s: estimate / actual "
                  f"{est_s / wall:.2f}x")
    else:
        print("the study's own estimate: none said (its units finished before their first rounds could be timed)")
    whole = f"about {full_s / 3600:.2f} h" if full_s is not None else f"not estimated: {len(TASKS) - len(per_round)} task(s) not measured"
    print(f"whole reproduce on {device_name(args.device)} ({len(TASKS)} tasks x {FULL['policies']} policies x {FULL['seeds']} seeds x "
          f"{FULL['rounds']} rounds, one unit at a time): {whole}; the measured study: {wall:.1f} s, of which "
          f"units {units_s:.1f} s ({units_s / wall:.2f}x; the rest: start, packing, report)")
    if args.json:
        doc = {"command": "benchmarks/reproduce_real.py " + " ".join(sys.argv[1:] if argv is None else argv), "commit": commit(),
               "device": args.device, "device_name": device_name(args.device), "machine": platform.node(), "study": study,
               "packs": packs, "packed_once": len(packs) == len(packing) == 2, "real_data": real, "study_estimate_lines": estimates,
               "study_wall_s": round(wall, 2), "unit_wall_s": {k: round(v, 3) for k, v in walls.items()},
               "s_per_round": {k: round(v, 4) for k, v in per_round.items()}, "full": FULL,
               "full_estimate_s": None if full_s is None else round(full_s, 1), "complete": not stopped and full_s is not None,
               "budget_s": args.budget_s}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"results: {args.json}")


if __name__ == "__main__":
    main()
