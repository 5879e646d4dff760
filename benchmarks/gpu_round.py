"""One FL round of the paper's networks on one device: the per-client loop against the engine.

A round is ``--clients`` clients (100) x ``--steps`` local steps (20) x minibatch
``--batch-size`` (16), plain SGD, random data (``--samples`` per client, 64). For each row of
issue 15's table it times, in one process and on the device given:

- ``loop``: the per-client loop on that device (FedScale's way: one model, client after client);
- ``engine``: what ``fl.train_mode: auto`` picks for (model, image size, device): on CUDA the tuner
  (:mod:`flamingo_sim.fl.training.autotune`) measures its candidates in the warm-up round and the timed
  rounds run its choice (``--json`` records the choice, why, the bound and every candidate's trial);
- on CUDA also every candidate of the tuner (vmap, vmap + CUDA graph, a CUDA graph per client, model
  copies on 4 streams, the same in channels_last, vmap + graph in bf16; ``--bf16`` adds 4 streams in
  bf16), each timed on the whole round, so the automatic choice can be checked against them;
  ``--tuner-only`` times only the loop and the engine and reports each other candidate as the tuner
  measured it (seconds per client on its first cohort, times the clients).

``--budget-s`` bounds the whole benchmark: a row or candidate that would start after it is reported as
skipped, and ``--json`` is rewritten after every row (``complete`` says whether every row ran), so a
run cut short still leaves what it measured.

Each timing is the median of ``--repeats`` rounds after one warm-up round (CUDA graph capture,
cuDNN autotuning and vmap tracing happen there), the candidates interleaved round by round so
that all of them see the same machine load; the spread is printed beside it. On a CPU the
candidates are the loop, ``vmap`` and ``threads`` (model copies on worker threads). It prints s/round, samples/s and the ratio to
the loop, and the largest parameter difference between the engine's result and the loop's
(float32 rounding only; BatchNorm networks at batch 16 amplify it over the steps).

    PYTHONPATH=. python benchmarks/gpu_round.py --device cuda              # the table, on a GPU
    PYTHONPATH=. python benchmarks/gpu_round.py --device cpu --small       # every row, tiny, on a CPU
    PYTHONPATH=. python benchmarks/gpu_round.py --smoke                    # two rows, seconds, on the CPU
    PYTHONPATH=. python benchmarks/gpu_round.py --device cuda --paper --bf16 --loop-clients 10 --json r.json  # the paper's networks
    PYTHONPATH=. python benchmarks/gpu_round.py --device cpu --clients 8 --steps 3 --image-divisor 4 --rows 2,3,4 --repeats 5

``--smoke`` runs rows 2 and 6 on the CPU in seconds (2 clients x 1 step x batch 4, 32 px images,
MLP row 8 clients, one timed round): the same code, so a change that breaks it fails CI.
``--small`` shrinks the round (4 clients x 2 steps x batch 8, images 1/4 the side but at least
32 px, MLP rows 100 and 1,000 clients) so that every row runs on a laptop CPU in about a minute.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from flamingo_sim.fl.training.autotune import REFERENCE, gpu_candidates, make_tuner
from flamingo_sim.fl.training.device import resolve_device, set_threads
from flamingo_sim.fl.training.trainer import CohortResult, CohortTask, CohortTrainer, model_state
from flamingo_sim.models import build_model
from flamingo_sim.provenance import command_line, stamp  # each results file's commit, command and machine

# --smoke: two rows on the CPU in seconds; explicit options still win
SMOKE = {"device": "cpu", "threads": 1, "clients": 2, "steps": 1, "batch_size": 4, "samples": 8, "image_divisor": 8,
         "mlp_clients": [4, 8], "repeats": 1, "rows": "2,6"}


@dataclass(frozen=True)
class Row:
    label: str
    model: str
    input_shape: tuple[int, ...]
    clients: int | None = None  # None: --clients


def rows(args: argparse.Namespace) -> list[Row]:
    def img(side: int) -> tuple[int, int, int]:
        s = max(args.min_side, side // args.image_divisor)
        return (3, s, s)

    if args.paper:  # the paper's three networks at the sizes they train at (issue 31)
        return [
            Row(f"MobileNetV2, {img(224)[1]} px", "mobilenet_v2", img(224)),
            Row(f"ShuffleNetV2 x2, {img(224)[1]} px", "shufflenet_v2_x2_0", img(224)),
            Row(f"ResNet-34, 3x{img(32)[1]}x{img(32)[1]} (speech)", "resnet34", img(32)),
        ]
    return [
        Row(f"MobileNetV2, {img(224)[1]} px", "mobilenet_v2", img(224)),
        Row(f"MobileNetV2, {img(64)[1]} px", "mobilenet_v2", img(64)),
        Row(f"ShuffleNetV2 x2, {img(64)[1]} px", "shufflenet_v2_x2_0", img(64)),
        Row(f"ResNet-34, 3x{img(32)[1]}x{img(32)[1]}", "resnet34", img(32)),
        Row(f"proxy MLP, {args.mlp_clients[0]:,} clients", "mlp", (60,), args.mlp_clients[0]),
        Row(f"proxy MLP, {args.mlp_clients[1]:,} clients", "mlp", (60,), args.mlp_clients[1]),
    ]


def _time_once(fn: Callable[[], CohortResult], device: torch.device) -> tuple[float, CohortResult]:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    result = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, result


def _max_param_diff(model: torch.nn.Module, a: CohortResult, b: CohortResult) -> float:
    """Largest absolute difference over the parameters (not the running statistics)."""
    return max(float((a.params[n].float() - b.params[n].float()).abs().max()) for n, _ in model.named_parameters())


def candidates(device: torch.device, bf16: bool, model: torch.nn.Module | None = None, tuner_only: bool = False) -> dict[str, dict]:
    """Trainer settings to time; ``engine`` is the automatic choice (on CUDA: the tuner's, measured on the model)."""
    out: dict[str, dict] = {"loop": {"strategy": "sequential"}, "engine": {"strategy": "auto"}}
    if device.type == "cpu":
        out.update({"vmap": {"strategy": "vmap"}, "threads": {"strategy": "threads"}})
    if device.type == "cuda" and not tuner_only:
        for cand in gpu_candidates(model if model is not None else torch.nn.Conv2d(3, 3, 3)):
            if cand.name != REFERENCE:
                out[cand.name] = {"strategy": cand.strategy, "cuda_graphs": cand.cuda_graphs, "channels_last": cand.channels_last,
                                  "precision": cand.precision, "max_batched_clients": cand.max_clients, "n_streams": cand.n_streams}
        if bf16:
            out["4 streams bf16"] = {"strategy": "streams", "n_streams": 4, "precision": "bf16"}
    return out


def _trainer(name: str, settings: dict, model: torch.nn.Module, device: torch.device, tune: bool = False) -> CohortTrainer:
    if name == "engine" and (device.type == "cuda" or tune):  # auto on a GPU: the tuner, measured afresh (no cache)
        tuner = make_tuner(device, model, "fp32", lambda line: print(f"  {line}", flush=True))
        tuner.cache = None
        return CohortTrainer(model, tuner=tuner, **settings)
    return CohortTrainer(model, **settings)


def bench_row(row: Row, args: argparse.Namespace, device: torch.device, deadline: float = float("inf")) -> dict:
    """Time one row; returns its results (seconds per round of every candidate, medians and spreads); a candidate
    not started before ``deadline`` (``time.monotonic()``) is skipped and said to be."""
    n_clients = row.clients or args.clients
    n_classes = 10 if row.model == "mlp" else 600
    gen = torch.Generator().manual_seed(0)
    datas = [(torch.randn(args.samples, *row.input_shape, generator=gen), torch.randint(0, n_classes, (args.samples,), generator=gen))
             for _ in range(n_clients)]
    ids = list(range(n_clients))
    model = build_model(row.model, row.input_shape, n_classes, seed=0).to(device)
    state = model_state(model)
    samples = n_clients * args.steps * args.batch_size
    print(f"\n{row.label}: {n_clients} clients x {args.steps} steps x batch {args.batch_size}")
    wanted = candidates(device, args.bf16, model, args.tuner_only)
    trainers = {name: _trainer(name, settings, model, device, args.tune) for name, settings in wanted.items()
                if not (name == "loop" and n_clients > args.max_loop_clients)}
    skipped: list[str] = []
    if len(trainers) < len(wanted):
        print(f"  {'loop':<16} skipped (more than --max-loop-clients {args.max_loop_clients})")
    # The loop's cost is linear in the clients (one client after another): --loop-clients times it on
    # fewer and scales up, so that the baseline is measured in the same run at a fraction of its cost.
    loop_n = min(args.loop_clients or n_clients, n_clients)
    loop_scale = n_clients / loop_n
    times: dict[str, list[float]] = {name: [] for name in trainers}
    results: dict[str, CohortResult] = {}
    for r in range(args.repeats + 1):  # interleaved, so every candidate sees the same load; round 0 warms up
        for name, trainer in list(trainers.items()):
            if time.monotonic() > deadline:
                print(f"  {name:<16} skipped (over --budget-s)", flush=True)
                skipped.append(name)
                del trainers[name]
                continue
            try:
                n = loop_n if name == "loop" else n_clients
                secs, results[name] = _time_once(
                    lambda t=trainer, n=n: t.train(state, CohortTask(datas[:n], ids[:n], args.steps, args.batch_size, 0.01, 0, 1)), device)
                secs *= loop_scale if name == "loop" else 1.0
            except torch.OutOfMemoryError:
                print(f"  {name:<16} out of memory")
                del trainers[name]
                continue
            except RuntimeError as exc:  # a candidate this torch cannot run (e.g. bf16 under vmap + graph) is reported, not fatal
                print(f"  {name:<16} failed: {str(exc).splitlines()[0][:160]}")
                del trainers[name]
                continue
            if r:
                times[name].append(secs)
            # each timing as it comes, so that a run stopped by a time limit still reports what it measured
            print(f"    round {r}{' (warm-up)' if not r else ''} {name}: {secs:.3f} s", flush=True)
    loop_s = statistics.median(times["loop"]) if times.get("loop") else None
    if loop_s and loop_n < n_clients:
        print(f"  (loop timed on {loop_n} clients and scaled x{loop_scale:g}: one client after another, its cost is linear in the clients)")
    out: dict = {"row": row.label, "model": row.model, "input_shape": list(row.input_shape), "clients": n_clients,
                 "steps": args.steps, "batch_size": args.batch_size, "loop_clients_timed": loop_n, "candidates": {}, "skipped": skipped}
    engine = trainers.get("engine")
    if engine is not None and engine.choice is not None:
        out["auto"] = engine.choice.record()
        for trial in engine.choice.trials:  # each candidate as the tuner measured it, scaled to the round's clients
            if trial.s_per_client is not None:
                secs = trial.s_per_client * n_clients
                ratio = f"{loop_s / secs:6.2f}x" if loop_s else "     -"
                print(f"  tuner: {trial.candidate:<24} {secs:9.4f} s/round {samples / secs:12,.0f} samples/s  vs loop {ratio}  "
                      f"deviation {trial.deviation:.1e} (bound {engine.choice.bound:.1e})")
            else:
                print(f"  tuner: {trial.candidate:<24} failed: {trial.error}")
    for name in trainers:
        if not times[name]:
            continue
        secs, res = statistics.median(times[name]), results[name]
        ratio = f"{loop_s / secs:6.2f}x" if loop_s else "     -"
        spread = f"  spread {min(times[name]):.3f}-{max(times[name]):.3f} s"
        diff = ""
        if "loop" in results and name != "loop" and loop_n == n_clients:
            diff = f"  max|d| {_max_param_diff(model, res, results['loop']):.1e}"
        label = f"{name} ({res.mode})" if name == "engine" else name
        print(f"  {label:<22} {secs:9.4f} s/round {samples / secs:12,.0f} samples/s  vs loop {ratio}{spread}{diff}")
        out["candidates"][label] = {"s_per_round": secs, "min_s": min(times[name]), "max_s": max(times[name]),
                                    "samples_per_s": samples / secs, "vs_loop": (loop_s / secs) if loop_s else None}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--threads", type=int, help="CPU threads (default: OMP_NUM_THREADS or the usable cores)")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--samples", type=int, default=64, help="samples per client")
    parser.add_argument("--image-divisor", type=int, default=1, help="divide every image side by this")
    parser.add_argument("--min-side", type=int, default=32, help="...but keep at least this many pixels")
    parser.add_argument("--mlp-clients", type=int, nargs=2, default=[100, 10_000])
    parser.add_argument("--max-loop-clients", type=int, default=1000, help="skip the loop above this many clients")
    parser.add_argument("--loop-clients", type=int, help="time the loop on this many clients and scale to the round (default: all)")
    parser.add_argument("--paper", action="store_true", help="rows: the paper's three networks at their sizes (MobileNetV2 and "
                        "ShuffleNetV2 x2 at 224 px, ResNet-34 on 32x32 spectrograms)")
    parser.add_argument("--json", help="also write the results (device, torch, every row) to this JSON file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", help="comma-separated row numbers (1-6) to run, default all")
    parser.add_argument("--bf16", action="store_true", help="also time bf16 autocast candidates (CUDA)")
    parser.add_argument("--small", action="store_true", help="tiny round for a CPU: see the module docstring")
    parser.add_argument("--smoke", action="store_true", help="two rows on the CPU in seconds: see the module docstring")
    parser.add_argument("--tuner-only", action="store_true", help="time only the loop and the engine; each other candidate as the "
                        "tuner measured it on its first cohort (CUDA)")
    parser.add_argument("--budget-s", type=float, help="stop starting rows and candidates after this many seconds")
    parser.add_argument("--tune", action="store_true", help="the engine measures the tuner's candidates on any device (on a GPU it "
                        "always does; on a CPU, CUDA graphs are off: a dry run of the GPU path)")
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**SMOKE)
        args = parser.parse_args(argv)
    if args.small:
        args.clients, args.steps, args.batch_size, args.samples, args.image_divisor = 4, 2, 8, 16, 4
        args.mlp_clients, args.repeats = [100, 1000], 1
    device = resolve_device(args.device, key="--device")
    threads = set_threads(args.threads)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {threads} threads"
    print(f"device {device} ({where}), torch {torch.__version__}, fp32 unless a row says bf16")
    chosen = rows(args)
    keep = [int(r) for r in args.rows.split(",")] if args.rows else range(1, len(chosen) + 1)
    deadline = time.monotonic() + (args.budget_s if args.budget_s else float("inf"))
    done: list[dict] = []
    doc = {"command": "benchmarks/gpu_round.py " + " ".join(sys.argv[1:] if argv is None else argv), "device": where,
           "torch": torch.__version__, "commit": _commit(), "machine": platform.node(), "complete": False, "rows": done}
    for i in keep:
        if time.monotonic() > deadline:
            print(f"\n{chosen[i - 1].label}: skipped (over --budget-s)")
            done.append({"row": chosen[i - 1].label, "skipped": "over --budget-s"})
        else:
            done.append(bench_row(chosen[i - 1], args, device, deadline))
        if args.json:  # after every row: a run cut short keeps what it measured
            Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    doc["complete"] = all(not r.get("skipped") for r in done)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        stamp([Path(args.json)], command_line())  # timings: no sources (they date with the whole tree)
        print(f"results: {args.json}")


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[1]), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    main()
