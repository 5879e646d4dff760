"""One run over several processes (torch.distributed, started by torchrun): correctness, communication, speed.

    python benchmarks/distributed.py            # this machine's CPU (about 10 minutes on 2 cores)
    python benchmarks/distributed.py --smoke    # tiny sizes, same code path (a slow test runs it)
    python benchmarks/distributed.py --device cuda [--sections gpu]   # on a GPU machine

Sections (``--sections``, comma-separated):

- ``correctness``: ``metrics.parquet`` of 1 process (plain ``python -m flamingo_sim run``) and of
  2 and 3 processes (``torchrun --standalone --nproc-per-node N``) compared column by column, on
  the main job (``openimage_mobilenet``, the MLP proxy) shortened to 10 rounds and on MobileNetV2
  at 32 px on a tiny FedScale-layout dataset (5 rounds, ``fl.train_mode: threads``). One torch
  thread per process everywhere, so only the number of processes changes. Also gives, at 2
  processes, the time rank 0 spends in collectives per round and the bytes moved (payloads).
- ``speed``: 2 processes x 1 thread against the best single process on the same two cores (1
  thread, what the engine chooses for the proxy task, and 2 threads, what it chooses with real
  data: the faster of the two, as a user would run it), per round (the median of the rounds
  after the first) and per whole command, interleaved and repeated: the MLP proxy at 2,400
  clients a round, MobileNetV2 at 32 px with the threads strategy (``--cases`` adds the proxy
  at 10,000 clients). Ratio = (best single process) / (2 processes x 1 thread): >= 1 means the
  processes pay.
- ``reduction``: the two ways to reduce a round over 2 processes (gloo), timed alone: sending
  each rank's client states to rank 0 (what the engine does: the one-process sum, bit for bit)
  against an all-reduce of a float64 partial sum per rank (cheaper, but not the same sum).
- ``gpu`` (``--device cuda``): the single-process engine against 1 rank and 2 ranks (sharing the
  one GPU) on the same GPU: the MLP proxy at 2,400 clients a round and MobileNetV2 at 224 px.

Each process runs this file with ``--worker SPEC``: :func:`flamingo_sim.fl.runner.run.run_experiment`
with a callback that times every round on rank 0 (and reads its collective counters).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flamingo_sim.provenance import command_line, stamp  # each results file's commit, command and machine

ROOT = Path(__file__).resolve().parents[1]
EXP = str(ROOT / "experiments" / "openimage_mobilenet.yaml")


# -- in each process ---------------------------------------------------------------------------
def worker(spec: dict[str, Any]) -> None:
    sys.path.insert(0, str(ROOT))
    from flamingo_sim.fl.runner.callbacks import Callback
    from flamingo_sim.fl.runner.run import run_experiment

    rounds: list[dict[str, float]] = []

    class Timer(Callback):
        def on_round_begin(self, sim: Any) -> None:
            comm = getattr(sim.seam, "comm", None)
            self.began = (time.perf_counter(), comm.seconds if comm else 0.0, comm.bytes_moved if comm else 0, comm.wait_s if comm else 0.0)

        def on_round_end(self, sim: Any, record: Any) -> bool:
            comm = getattr(sim.seam, "comm", None)
            t, s, b, w = self.began
            rounds.append({"policy": sim.policy_name, "round": sim.round, "wall_s": time.perf_counter() - t,
                           "collective_s": (comm.seconds if comm else 0.0) - s, "bytes": (comm.bytes_moved if comm else 0) - b,
                           "wait_s": (comm.wait_s if comm else 0.0) - w})
            return False

    run_experiment(spec["experiment"], out_dir=spec["out"], overrides=spec["overrides"], threads=spec["threads"], callbacks=[Timer()],
                   log=lambda m: None)
    if os.environ.get("RANK", "0") == "0":
        Path(spec["out"], "rounds.json").write_text(json.dumps(rounds))


def reduce_worker() -> None:
    """Under torchrun with 2 processes: gather of k client states vs all-reduce of one float64 sum."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for name, k, p in (("MLP proxy, 50 clients a rank", 50, 9098), ("MobileNetV2 (3 classes), 3 clients a rank", 3, 2_227_715),
                       ("MobileNetV2 (1000 classes), 3 clients a rank", 3, 3_504_872)):
        rows, part = torch.randn(k, p), torch.randn(p, dtype=torch.float64)
        sent, reduced = [], []
        for _ in range(7):
            dist.barrier()
            t = time.perf_counter()
            if rank == 0:
                dist.recv(torch.empty(k, p), src=1)
            else:
                dist.send(rows, dst=0)
            dist.barrier()
            sent.append(time.perf_counter() - t)
            t = time.perf_counter()
            dist.all_reduce(part)
            dist.barrier()
            reduced.append(time.perf_counter() - t)
        if rank == 0:
            g, r = statistics.median(sent), statistics.median(reduced)
            print(f"{name}: gather {k * p * 4 / 1e6:.1f} MB {g * 1e3:.1f} ms, all-reduce {p * 8 / 1e6:.1f} MB {r * 1e3:.1f} ms: "
                  f"reducing first {g / r:.2f}x cheaper")
    dist.destroy_process_group()


def reduction() -> None:
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(Path(__file__).resolve()),
                           "--reduce-worker"], env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"reduction failed:\n{done.stderr[-3000:]}")
    print(done.stdout, end="")


# -- the orchestrator ----------------------------------------------------------------------------
def run(nproc: int, threads: int, overrides: list[str], out: Path, experiment: str = EXP) -> dict[str, Any]:
    """One run with ``nproc`` processes of ``threads`` torch threads; its metrics and per-round timings."""
    import pandas as pd

    spec = json.dumps({"experiment": experiment, "out": str(out), "overrides": overrides, "threads": threads})
    me = [str(Path(__file__).resolve()), "--worker", spec]
    cmd = [sys.executable, *me] if nproc == 1 else [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                                      f"--nproc-per-node={nproc}", *me]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLAMINGO_SIM_QUIET": "1", "OMP_NUM_THREADS": str(threads)}
    began = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{nproc} process(es) failed ({done.returncode}):\n{done.stderr[-3000:]}")
    rounds = json.loads((out / "rounds.json").read_text())
    later = [r for r in rounds if r["round"] > 1] or rounds  # the first round warms up (allocations, threads)
    return {"metrics": pd.read_parquet(out / "metrics.parquet"), "command_s": time.perf_counter() - began,
            "round_s": statistics.median(r["wall_s"] for r in later),
            "collective_s": statistics.median(r["collective_s"] for r in later), "wait_s": statistics.median(r["wait_s"] for r in later),
            "mb": statistics.median(r["bytes"] for r in later) / 1e6}


def write_fixture(root: Path, n_clients: int, n_samples: int, n_test: int = 64) -> Path:
    """A FedScale-layout image dataset (client_data_mapping/{train,test}.csv, train/, test/): noisy
    images whose mean colour is the label, so there is something to learn."""
    import numpy as np
    from PIL import Image

    if (root / "client_data_mapping" / "test.csv").is_file():
        return root
    gen = np.random.default_rng(0)
    (root / "client_data_mapping").mkdir(parents=True)
    colours = np.array([(200, 40, 40), (40, 200, 40), (40, 40, 200)])
    for split, rows in (("train", [(f"c{c}", i) for c in range(n_clients) for i in range(n_samples)]),
                        ("test", [("t", i) for i in range(n_test)])):
        (root / split).mkdir()
        lines = ["client_id,sample_path,label_name,label_id"]
        for client, i in rows:
            label = int(gen.integers(3))
            pixels = np.clip(colours[label] + gen.normal(0, 60, (12, 12, 3)), 0, 255).astype(np.uint8)
            name = f"{client}_{i}.png"
            Image.fromarray(pixels).save(root / split / name)
            lines.append(f"{client},{name},class{label},{label}")
        (root / "client_data_mapping" / f"{split}.csv").write_text("\n".join(lines) + "\n")
    return root


def _mobilenet(root: Path, px: int, k: int, rounds: int, steps: int, mode: str) -> list[str]:
    return [f"data.root={root}", f"data.image_size={px}", f"fl.rounds={rounds}", f"fl.participants_per_round={k}", f"fl.local_steps={steps}",
            "fl.batch_size=8", "fl.eval_every=1", "policies=[baseline]", f"fl.train_mode={mode}", "data.decode_workers=1"]


def _proxy(k: int, rounds: int, clients: int) -> list[str]:
    return [f"fl.rounds={rounds}", f"fl.participants_per_round={k}", "fl.eval_every=1000", f"data.proxy.n_clients={clients}",
            "policies=[baseline]"]


def correctness(work: Path, smoke: bool, sizes: list[int]) -> dict[str, Any]:
    import pandas as pd

    fixture = work / "fixture" if smoke else write_fixture(work / "fixture", n_clients=16, n_samples=16)
    tasks: dict[str, list[str]] = {
        "main job (MLP proxy)": (["fl.rounds=3", "fl.participants_per_round=8", "data.proxy.n_clients=200", "fl.local_steps=4"] if smoke
                                 else ["fl.rounds=10"]),
    }
    if not smoke:
        tasks["MobileNetV2 32 px"] = _mobilenet(fixture, 32, 6, 5, 2, "threads")
    out: dict[str, Any] = {}
    for task, overrides in tasks.items():
        runs = {n: run(n, 1, overrides, work / f"c-{task[:4]}-{n}") for n in sizes}
        ref = runs[1]["metrics"]
        same = {}
        for n in sizes[1:]:
            try:
                pd.testing.assert_frame_equal(runs[n]["metrics"], ref, check_exact=True)  # bit for bit, no tolerance
                same[n] = "identical"
            except AssertionError as exc:
                same[n] = f"DIFFERENT: {str(exc).splitlines()[0]}"
        out[task] = {"rows": len(ref), "columns": len(ref.columns), "same": same,
                     "collective_ms_at_2": runs[2]["collective_s"] * 1e3, "wait_ms_at_2": runs[2]["wait_s"] * 1e3, "mb_at_2": runs[2]["mb"],
                     "round_s": {n: runs[n]["round_s"] for n in sizes}}
        print(f"{task}: {len(ref)} rows x {len(ref.columns)} columns; " + ", ".join(f"{n} processes {s}" for n, s in same.items()))
        print(f"  at 2 processes, per round: {runs[2]['collective_s'] * 1e3:.1f} ms in collectives on rank 0 moving {runs[2]['mb']:.2f} MB "
              f"(+ {runs[2]['wait_s'] * 1e3:.1f} ms waiting for the slower share); "
              f"round {runs[1]['round_s'] * 1e3:.0f} ms (1 process) vs {runs[2]['round_s'] * 1e3:.0f} ms (2)")
    return out


def speed(work: Path, smoke: bool, repeats: int, big: bool = False) -> dict[str, Any]:
    fixture = work / "fixture-speed" if smoke else write_fixture(work / "fixture-speed", n_clients=24, n_samples=20)
    cases = {"proxy, 2,400 clients a round": _proxy(2400, 3, 14477)}
    if big:
        cases["proxy, 10,000 clients a round"] = _proxy(10000, 3, 40000)
    if smoke:  # the proxy at small sizes only: the same code path in seconds
        cases = {"proxy, 24 clients a round": _proxy(24, 2, 200)}
    else:
        cases["MobileNetV2 32 px, threads"] = _mobilenet(fixture, 32, 8, 3, 5, "threads")
    candidates = [("2x1", 2, 1), ("1x1", 1, 1), ("1x2", 1, 2)]
    out: dict[str, Any] = {}
    for case, overrides in cases.items():
        times: dict[str, list[float]] = {c[0]: [] for c in candidates}
        commands: dict[str, list[float]] = {c[0]: [] for c in candidates}
        for rep in range(repeats):  # interleaved: each repeat runs every candidate, the order rotated
            order = candidates[rep % 3:] + candidates[:rep % 3]
            for label, nproc, threads in order:
                r = run(nproc, threads, overrides, work / f"s-{case[:9]}-{label}-{rep}")
                times[label].append(r["round_s"])
                commands[label].append(r["command_s"])
        med = {k: statistics.median(v) for k, v in times.items()}
        best = min(("1x1", "1x2"), key=lambda k: med[k])
        ratio = [b / a for a, b in zip(times["2x1"], times[best])]
        cmd_ratio = statistics.median(commands[best]) / statistics.median(commands["2x1"])
        out[case] = {"round_s": times, "command_s": commands, "best_single": best, "ratio": ratio, "command_ratio": cmd_ratio,
                     "load": os.getloadavg()[0]}
        print(f"{case}: round {med['2x1']:.3f} s with 2 processes x 1 thread; one process {med['1x1']:.3f} s with 1 thread, "
              f"{med['1x2']:.3f} s with 2 (best: {best}); ratio best single / 2 processes {statistics.median(ratio):.2f}x "
              f"(per repeat {min(ratio):.2f}x-{max(ratio):.2f}x; >= 1: the processes pay); whole command "
              f"{statistics.median(commands['2x1']):.1f} s against {statistics.median(commands[best]):.1f} s: {cmd_ratio:.2f}x; "
              f"{repeats} interleaved repeat(s), load {os.getloadavg()[0]:.1f}")
    return out


def gpu(work: Path, smoke: bool, repeats: int) -> dict[str, Any]:
    fixture = write_fixture(work / "fixture-gpu", n_clients=8 if smoke else 64, n_samples=16 if smoke else 32)
    cases = {
        "proxy, 2,400 clients a round": _proxy(24 if smoke else 2400, 2 if smoke else 4, 200 if smoke else 14477) + ["fl.device=cuda"],
        "MobileNetV2 224 px, 32 clients a round": _mobilenet(fixture, 64 if smoke else 224, 2 if smoke else 32, 2 if smoke else 4,
                                                              1 if smoke else 5, "auto") + ["fl.device=cuda", "fl.batch_size=16"],
    }
    out: dict[str, Any] = {}
    for case, overrides in cases.items():
        times: dict[str, list[float]] = {"native": [], "1 rank": [], "2 ranks": []}
        comm: dict[str, float] = {}
        for rep in range(repeats):
            for label, nproc in (("native", 1), ("1 rank", -1), ("2 ranks", 2)):
                r = run_gpu(nproc, overrides, work / f"g-{case[:5]}-{label[0]}-{rep}")
                times[label].append(r["round_s"])
                if label == "2 ranks":
                    comm = {"collective_ms": r["collective_s"] * 1e3, "wait_ms": r["wait_s"] * 1e3, "mb": r["mb"]}
        out[case] = {"round_s": times, **comm}
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{case}: round {med['native']:.3f} s native, {med['1 rank']:.3f} s as 1 rank ({med['native'] / med['1 rank']:.2f}x), "
              f"{med['2 ranks']:.3f} s as 2 ranks on the one GPU; at 2 ranks {comm.get('collective_ms', 0):.1f} ms in collectives, "
              f"{comm.get('mb', 0):.1f} MB a round")
    return out


def run_gpu(nproc: int, overrides: list[str], out: Path) -> dict[str, Any]:
    """``nproc`` -1: one process under torchrun (a group of one); 1: the plain single-process engine."""
    if nproc != -1:
        return run(nproc, 4, overrides, out)
    spec = json.dumps({"experiment": EXP, "out": str(out), "overrides": overrides, "threads": 4})
    import pandas as pd

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1", str(Path(__file__).resolve()), "--worker", spec]
    done = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(ROOT), "FLAMINGO_SIM_QUIET": "1"}, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"1 rank failed:\n{done.stderr[-3000:]}")
    rounds = json.loads((out / "rounds.json").read_text())
    later = [r for r in rounds if r["round"] > 1] or rounds
    return {"metrics": pd.read_parquet(out / "metrics.parquet"), "round_s": statistics.median(r["wall_s"] for r in later),
            "collective_s": statistics.median(r["collective_s"] for r in later), "wait_s": statistics.median(r["wait_s"] for r in later),
            "mb": statistics.median(r["bytes"] for r in later) / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, same code path")
    parser.add_argument("--sections", help="comma-separated: correctness, reduction, speed, gpu (default: the first three; gpu with --device cuda)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--repeats", type=int, help="interleaved repeats of each speed comparison (default 3, smoke 1)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--cases", choices=("default", "all"), default="default", help="all: also the proxy at 10,000 clients a round")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--reduce-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))
    if args.reduce_worker:
        return reduce_worker()
    default = "gpu" if args.device == "cuda" else "correctness,speed" if args.smoke else "correctness,reduction,speed"
    sections = (args.sections or default).split(",")
    repeats = args.repeats or (1 if args.smoke else 3)
    print(f"benchmarks/distributed.py: {os.cpu_count()} CPU cores seen; on a shared machine interleaved runs are the only fair comparison")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="flamingo-dist-") as tmp:
        work = Path(tmp)
        if "correctness" in sections:
            results["correctness"] = correctness(work, args.smoke, [1, 2] if args.smoke else [1, 2, 3])
        if "reduction" in sections:
            reduction()
        if "speed" in sections:
            results["speed"] = speed(work, args.smoke, repeats, big=args.cases == "all")
        if "gpu" in sections:
            results["gpu"] = gpu(work, args.smoke, repeats)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
        stamp([Path(args.json)], command_line())  # timings: no sources (they date with the whole tree)
    bad = [t for t, r in results.get("correctness", {}).items() if any(v != "identical" for v in r["same"].values())]
    if bad:
        raise SystemExit(f"results differ across world sizes: {', '.join(bad)}")


if __name__ == "__main__":
    main()
