"""Benchmark: local training of one cohort, batched (vmap) against one client at a time.

The paper's round on the proxy task: ``--clients`` clients (default 100) of the synthetic
dataset, ``--steps`` local steps (20) of minibatch ``--batch-size`` (16), plain SGD at lr 0.05,
on the "mlp" proxy. Both modes train the same cohort from the same start in the same run;
their results are checked to agree. Prints wall seconds per cohort (median of ``--repeats``)
and the speed-up.

    PYTHONPATH=. python benchmarks/engine.py [--clients 100] [--threads 2] [--model mlp] [--device cpu]
    PYTHONPATH=. python benchmarks/engine.py --smoke     # seconds: 4 clients x 2 steps, one repeat
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from flamingo_sim.fl.data.proxy import SyntheticFederated
from flamingo_sim.fl.training.trainer import CohortResult, CohortTask, model_state, train_cohort
from flamingo_sim.models import build_model
from flamingo_sim.rng import rng

# --smoke: the same two modes on a tiny cohort; explicit options still win
SMOKE = {"clients": 4, "steps": 2, "repeats": 1, "population": 50, "threads": 1}


def _time(fn, repeats: int) -> tuple[float, CohortResult]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        if result.losses.is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--population", type=int, default=14_477)
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    parser.add_argument("--smoke", action="store_true", help=f"tiny sizes, seconds ({SMOKE})")
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**SMOKE)
        args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    ds = SyntheticFederated(args.population, seed=0)
    ids = rng(0, "benchmark-cohort").choice(ds.n_clients, args.clients, replace=False).tolist()
    datas = [ds.client_data(c) for c in ids]
    model = build_model(args.model, ds.input_shape, ds.n_classes, seed=0).to(args.device)
    state = model_state(model)

    def run(mode: str) -> CohortResult:
        return train_cohort(model, state, CohortTask(datas, ids, args.steps, args.batch_size, 0.05, seed=0, round_idx=0), mode=mode)

    run("batched")  # warm-up (vmap tracing, allocator)
    run("sequential")
    t_bat, bat = _time(lambda: run("batched"), args.repeats)
    t_seq, seq = _time(lambda: run("sequential"), args.repeats)
    max_diff = max(float((bat.params[k] - seq.params[k]).abs().max()) for k in state)
    samples = args.clients * args.steps * args.batch_size
    print(f"cohort: {args.clients} clients x {args.steps} steps x batch {args.batch_size}, model {args.model}, "
          f"device {args.device}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"sequential: {t_seq:.3f} s per cohort ({samples / t_seq:,.0f} samples/s)")
    print(f"batched:    {t_bat:.3f} s per cohort ({samples / t_bat:,.0f} samples/s)")
    print(f"speed-up:   {t_seq / t_bat:.1f}x   (max |batched - sequential| = {max_diff:.2e})")


if __name__ == "__main__":
    main()
