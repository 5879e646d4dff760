"""The whole round against the bare training it contains, and where the rest of the round goes (issue 52).

A round of ``flamingo-sim run`` is real training plus the device model (selection, pricing,
battery, the trace clock, metrics, checkpoints). This script measures, in one run, each shape's
whole round against a bare loop over the same data and the same cohorts:

- **the whole round**: ``flamingo-sim run`` in a subprocess (the command's own path,
  :func:`flamingo_sim.cli.main`), once for ``--rounds`` rounds and once for ``--short`` rounds;
  the per-round cost is the difference of the two runs' times over the difference of their rounds,
  so start-up and the first rounds cancel, and everything a round does is inside: per-round metrics
  writes, evaluation every ``fl.eval_every`` rounds, checkpoints every ``checkpoint_every``. A run's
  time is taken from its run loop's start to the command's return (the process's whole wall time,
  start-up included, is kept too: ``wall_ratio`` in the results file);
- **the bare loop**: the cohorts the long run trained in its last rounds (each with the minibatch
  the run gave it), their data gathered and their minibatch indices drawn beforehand, then per
  round only the SGD steps the trainer runs for the model on this CPU (``torch.func.vmap`` over the
  cohort for the MLP; one client after another for MobileNetV2, the trainer's choice for
  convolutions on a CPU with one thread) and the FedAvg the round runs (:func:`~flamingo_sim.fl.strategy.aggregate.fedavg`:
  weighted by samples, summed in float64); in a process of its own,
  with the run's CPU kernels (checked). **ratio** = whole / bare, the issue's figure;
- **paired**: the same bare loop timed right after each of the long run's last rounds, in the run's
  process, against that round's own time (its start to the next round's, callbacks included, the
  bare loop left out): both see the same load, so this ratio moves least on a shared machine;
  **cpu** is the same in CPU time; **best**: the fastest long run less the fastest short one over
  the fastest bare loop (load only ever adds time);
- **the stage table**: in the same runs, the Simulation's steps timed by wrapping its bound methods
  and its parts' (a callback installs the wrappers at the run's start; no library file changes):
  selection, pricing (policy, heat and memory, network transfers, settling), battery, clock,
  training (SGD steps, minibatch indices, data), aggregation, evaluation, metrics (the record, the
  per-round writes), checkpoint; per round as the same long-minus-short difference, wall and CPU. Since issue 52's
  seventh session a unit's saves are written behind the rounds, in a thread of their own: "writes" and "checkpoint" are
  what stays on the round's path (the rows and bytes made; waiting for a save still in flight), and the thread's time
  shows only where it slows the round (the CPU times count it: they are the process's).

Shapes (``--shapes``): ``mlp:K`` (the proxy task's MLP, ``--steps`` local steps) and ``mobilenet:K``
(MobileNetV2 on random 32 px images, ``--mobilenet-samples`` a client, written once as
``data.name: arrays``; ``--mobilenet-steps`` local steps and ``--mobilenet-rounds``/``--mobilenet-short``
rounds: a client's 20 steps take about 0.9 s on one core), K clients a round (over-commit 1.0, the
baseline policy, ``--clients`` clients); cohorts of 1,000 or more run ``--big-rounds``/``--big-short``.
Variants (``--variants``; ``--other-variants`` for every shape but the first): every device model on
(``devices.thermal: rc``, ``devices.memory: shrink_batch``, ``network.model: traces``), each of them
off in turn, and all off. One rotation measures every (shape, variant) once (the long run, the
short run and the bare loop, in an order that flips between rotations); ``--rotations`` rotations; medians and spreads are printed, and with ``--out``
written with the rows to a results file stamped with its provenance.

    PYTHONPATH=. python benchmarks/round_overhead.py                       # the issue's workload: MLP, 100 clients a round
    # the results file docs/benchmarks.md quotes:
    PYTHONPATH=. python benchmarks/round_overhead.py --shapes mlp:100,mlp:1000,mobilenet:100 --other-variants "all on,all off" --out FILE
    PYTHONPATH=. python benchmarks/round_overhead.py --profile prof.out    # cProfile of one long run (mlp:100, the first variant: all on)
    PYTHONPATH=. python benchmarks/round_overhead.py --smoke               # seconds: 200 clients, tiny rounds
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "openimage_mobilenet.yaml"
ALL_ON = {"devices.thermal": "rc", "devices.memory": "shrink_batch", "network.model": "traces"}
OFF = {"devices.thermal": "none", "devices.memory": "none", "network.model": "lognormal"}
#: variant -> what it changes from every model on
VARIANTS: dict[str, dict[str, str]] = {
    "all on": {},
    "thermal off": {"devices.thermal": "none"},
    "memory off": {"devices.memory": "none"},
    "network off": {"network.model": "lognormal"},
    "all off": dict(OFF),
}
#: the stage table's rows, in order (see :func:`stage_rows`)
STAGES = ("selection", "pricing", "  policy", "  limits (heat, memory)", "  network transfers", "  settling", "battery", "clock",
          "training", "  SGD steps", "  minibatch indices", "  data", "aggregation", "evaluation", "metrics", "  record", "  writes",
          "checkpoint", "unaccounted")
# --smoke: every step once, tiny; explicit options still win
SMOKE = {"clients": 200, "shapes": "mlp:10", "variants": "all on", "rounds": 20, "short": 4, "rotations": 1, "steps": 2, "mobilenet_steps": 1}


#: the suffix of a probe total's CPU time (the process's, all threads)
CPU = "@cpu"


# -- the worker side: one whole run, or one bare loop ---------------------------------------------------------------
class Bare:
    """The bare loop's round: the trainer's SGD steps on a cohort (vmapped for the MLP, the per-client loop where the trainer
    picks it: convolutions on a CPU with one thread), then the round's FedAvg (:func:`~flamingo_sim.fl.strategy.aggregate.fedavg`, weighted
    by samples, summed in float64; until issue 52's fifth session a float32 ``tensordot``, about 1 ms a round cheaper under the
    run's portable kernels); :meth:`ready` gathers a job's data and
    draws its minibatch indices beforehand, off the clock."""

    def __init__(self, model: Any, dataset: Any, fl: Any, seed: int) -> None:
        import torch

        from flamingo_sim.fl.training.batched import model_copy
        from flamingo_sim.fl.training.trainer import CohortTrainer, cohort_indices

        self.model, self.dataset, self.fl, self.seed = model, dataset, fl, seed
        self.indices: Callable[..., Any] = cohort_indices  # the probe puts back the function itself where it wrapped this one with its timer
        self.trainer = CohortTrainer(model, strategy=fl.train_mode)
        self.device = torch.device("cpu")
        self.work = model_copy(model, self.device, False)

    def ready(self, r: int, clients: list[int], batch: int | None) -> tuple[str, Any]:
        import torch

        b = self.fl.batch_size if batch is None else batch
        datas = [self.dataset.client_data(c) for c in clients]
        sizes = torch.tensor([len(y) for _, y in datas])
        idx = self.indices([len(y) for _, y in datas], clients, self.fl.local_steps, b, self.seed, r)
        strategy, _ = self.trainer.plan(tuple(datas[0][0].shape[1:]), b, len(clients))
        if strategy == "vmap":
            gather = idx.transpose(0, 1) + (torch.cumsum(sizes, 0) - sizes).view(1, -1, 1)
            return "vmap", (torch.cat([x for x, _ in datas]), torch.cat([y for _, y in datas]), gather, sizes)
        return "loop", (datas, idx, sizes)

    def round(self, prepared: list[tuple[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        import torch

        from flamingo_sim.fl.strategy.aggregate import fedavg
        from flamingo_sim.fl.training.batched import train_one_client, train_vmap

        stacked, sizes = [], []
        for kind, data in prepared:
            if kind == "vmap":
                x_all, y_all, gather, n = data
                stacked.append(train_vmap(self.model, params, x_all, y_all, gather, self.fl.lr)[0])
            else:
                datas, idx, n = data
                outs = [train_one_client(self.work, params, x, y, i, self.fl.lr, self.device) for (x, y), i in zip(datas, idx)]
                stacked.append({k: torch.stack([o[0][k] for o in outs]) for k in params})
            sizes.append(n)
        keys = [k for k in params if k in stacked[0]]  # what the jobs trained (the vmapped step may leave integer buffers out)
        joined = stacked[0] if len(stacked) == 1 else {k: torch.cat([s[k] for s in stacked]) for k in keys}
        mean = fedavg({k: joined[k] for k in keys}, torch.cat(sizes))  # the round's own FedAvg: float64 sums, weighted by samples
        return {k: mean.get(k, v) for k, v in params.items()}


class Probe:
    """A run-loop callback that wraps the simulation's steps with timers at the run's start (stage totals in seconds),
    records each round's training jobs (clients and minibatch) and, after each round past ``paired_from``, times the bare
    loop on that round's jobs in this process (paired: the same machine load as the round; the probe's own time is taken
    out of the run's)."""

    def __init__(self, paired_from: int | None = None) -> None:
        self.s: dict[str, float] = defaultdict(float)
        self.jobs: list[list[tuple[list[int], int | None]]] = []  # per round: its jobs (clients, batch size)
        self.last_end: tuple[float, float] | None = None  # when the last round ended, wall and CPU
        self.began: tuple[float, float] | None = None  # the run loop's start, wall and CPU (after imports, config, components, round 0)
        self.paired_from = paired_from
        self.bare: Bare | None = None
        self.bare_params: dict[str, Any] = {}
        self.window: tuple[int, float, float] | None = None  # the round running, and when it started (wall, CPU)
        self.window_probe = (0.0, 0.0)  # the paired loop's time within it
        self.unwrapped_indices: Callable[..., Any] | None = None

    def timed(self, owner: Any, name: str, key: str, before: Callable[..., None] | None = None) -> None:
        inner = getattr(owner, name)
        s = self.s

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if before is not None:
                before(*args, **kwargs)
            t, c = time.perf_counter(), time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                s[key] += time.perf_counter() - t
                s[key + CPU] += time.process_time() - c

        setattr(owner, name, wrapper)

    def modules(self) -> None:
        """Module-level functions (called through their modules' globals), wrapped before the run starts (the paired
        loop, :class:`Bare`, keeps the unwrapped ``cohort_indices``: its calls are not the run's)."""
        import flamingo_sim.fl.runner.units as units
        import flamingo_sim.fl.sim.simulation as simulation
        import flamingo_sim.fl.training.trainer as trainer

        self.timed(simulation, "select_online", "select")
        for name in ("train_vmap", "train_one_client", "train_threads", "train_streams"):
            self.timed(trainer, name, "sgd")
        self.unwrapped_indices = trainer.cohort_indices
        self.timed(trainer, "cohort_indices", "indices")
        self.timed(units, "checkpoint_bytes", "checkpoint")  # the checkpoint made on the round's path (written behind it)
        self.timed(units.UnitSaver, "write", "writes")

    def on_run_begin(self, sim: Any, records: Any) -> None:
        self.began = (time.perf_counter(), time.process_time())
        self.timed(sim, "plan_round", "plan_round")
        self.timed(sim, "train_round", "train_round", lambda plan: self.jobs.append([]))
        self.timed(sim, "finish_round", "finish_round")
        self.timed(sim, "_reachable_online", "reachable")
        self.timed(sim.policy, "run_tasks", "policy")
        self.timed(sim.network, "transfers", "network")
        pricing = getattr(sim, "pricing", None)  # the pricing stage (memory, policy, heat, radio), where the engine has one
        if pricing is not None:
            self.timed(pricing, "price", "price")
            self.timed(pricing, "settle", "price_settle")
        elif getattr(sim, "limits", None) is not None:  # before it: the heat and memory limits beside the policy
            for name in ("temperature_c", "batches", "apply", "settle"):
                self.timed(sim.limits, name, "limits")
        self.timed(sim.seam, "train", "train", lambda job: self.jobs[-1].append((list(job.clients), job.batch_size)))
        self.timed(sim.aggregator, "aggregate", "aggregate")
        self.timed(sim, "_advance_budgets", "advance_budgets")
        self.timed(sim, "_trace_levels", "trace_levels")
        for name in ("take_offline", "lost"):
            self.timed(sim.budget, name, "budget")
        self.timed(sim, "_foreground_s", "foreground")
        self.timed(sim, "_check_horizon", "horizon")
        self.timed(sim, "evaluate", "evaluate")
        inner = sim.step

        def step() -> Any:
            began = (time.perf_counter(), time.process_time())
            self._between(began)
            self._window(began, sim.round + 1)
            try:
                return inner()
            finally:
                self.last_end = (time.perf_counter(), time.process_time())
                self.s["steps"] += self.last_end[0] - began[0]

        sim.step = step

    def on_round_begin(self, sim: Any) -> None:
        return None

    def on_round_end(self, sim: Any, record: Any) -> bool:
        if self.paired_from is None or sim.round <= self.paired_from or not self.jobs or not self.jobs[-1]:
            return False
        import torch

        wall, cpu = time.perf_counter(), time.process_time()
        if self.bare is None:
            self.bare = Bare(sim.parts.model, sim.dataset, sim.rules.fl, sim.seed)
            if self.unwrapped_indices is not None:
                self.bare.indices = self.unwrapped_indices
            self.bare_params = {k: v.detach().clone() for k, v in sim.params.items()}
        prepared = [self.bare.ready(sim.round, clients, batch) for clients, batch in self.jobs[-1]]
        with torch.random.fork_rng(devices=[]):  # the run's own random state stays as it was
            t, c = time.perf_counter(), time.process_time()
            self.bare_params = self.bare.round(prepared, self.bare_params)
            self.s["paired_bare"] += time.perf_counter() - t
            self.s["paired_bare" + CPU] += time.process_time() - c
        self.s["paired_rounds"] += 1
        spent = (time.perf_counter() - wall, time.process_time() - cpu)
        self.s["probe"] += spent[0]
        self.s["probe" + CPU] += spent[1]
        self.window_probe = (self.window_probe[0] + spent[0], self.window_probe[1] + spent[1])
        return False

    def on_run_end(self, sim: Any, records: Any) -> None:
        now = (time.perf_counter(), time.process_time())
        self._between(now)
        self._window(now, None)

    def _window(self, now: tuple[float, float], next_round: int | None) -> None:
        """Close the last round's window (from its start to the next round's, its callbacks included, the paired loop left
        out) if it is one the paired loop followed, and open the next one."""
        if self.window is not None and self.paired_from is not None and self.window[0] > self.paired_from:
            self.s["paired_whole"] += now[0] - self.window[1] - self.window_probe[0]
            self.s["paired_whole" + CPU] += now[1] - self.window[2] - self.window_probe[1]
        self.window = None if next_round is None else (next_round, *now)
        self.window_probe = (0.0, 0.0)

    def _between(self, now: tuple[float, float]) -> None:
        """The time since the last round ended: the callbacks (metrics writes, checkpoints, the progress, this probe)."""
        if self.last_end is not None:
            self.s["between"] += now[0] - self.last_end[0]
            self.s["between" + CPU] += now[1] - self.last_end[1]


def kernels() -> str:
    """The CPU kernels this process ran (ATen's capability, MKL's code branch) and its torch threads: the two sides must agree."""
    import torch

    from flamingo_sim.fl.training.device import mkl_branch

    return f"ATen {torch.backends.cpu.get_cpu_capability()}, MKL branch {mkl_branch()}, {torch.get_num_threads()} thread(s)"


def whole_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """``flamingo-sim run`` in this process, with a :class:`Probe` among its callbacks (``spec["profile"]``: under cProfile)."""
    import flamingo_sim.fl.runner.run as run_module
    from flamingo_sim.cli import main as cli_main

    probe = Probe(spec.get("paired_from"))
    probe.modules()
    original = run_module.run_experiment

    def with_probe(experiment: Any, options: Any = None, *, callbacks: Any = (), log: Any = None, **changes: Any) -> Any:
        return original(experiment, options, callbacks=[*callbacks, probe], log=log, **changes)

    run_module.run_experiment = with_probe
    argv = ["run", str(spec["experiment"]), "--out", spec["out"], "--threads", "1", *[a for s in spec["sets"] for a in ("--set", s)]]
    if spec.get("profile"):
        import cProfile

        profiler = cProfile.Profile()
        code = profiler.runcall(cli_main, argv)
        profiler.dump_stats(spec["profile"])
    else:
        code = cli_main(argv)
    if code != 0:
        raise SystemExit(f"flamingo-sim run exited {code}")
    assert probe.began is not None
    # from the run loop's start to the command's return: every round with its callbacks, then the run's end (summary, metrics),
    # less the paired bare loops the probe ran in between
    loop_s = time.perf_counter() - probe.began[0] - probe.s["probe"]
    loop_cpu_s = time.process_time() - probe.began[1] - probe.s["probe" + CPU]
    return {"stages_s": dict(probe.s), "jobs": probe.jobs, "loop_s": loop_s, "loop_cpu_s": loop_cpu_s, "kernels": kernels()}


def bare_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """The bare loop in a process of its own: ``spec["jobs"]`` (rounds of (clients, batch size)) from the run's model and
    data (:class:`Bare`), nothing else; its first ``spec["warmup"]`` rounds once untimed."""
    from flamingo_sim.fl.compose import build_components, resolve_config
    from flamingo_sim.fl.runner.kernels import pin_run_kernels
    from flamingo_sim.fl.training.device import set_threads
    from flamingo_sim.fl.training.trainer import model_state

    cfg = resolve_config(Path(spec["experiment"]), spec["sets"], None)
    _, unpinned = pin_run_kernels(cfg)  # the run's CPU kernels (portable for the proxy task), before torch's first kernel
    if unpinned:
        raise SystemExit(unpinned)
    set_threads(1, small_model=True)
    parts = build_components(cfg, Path(spec["experiment"]), 0, log=lambda _m: None)
    bare = Bare(parts.model, parts.dataset, cfg.fl, cfg.seeds[0])
    params = model_state(parts.model)
    first = spec["first_round"]
    rounds = [[bare.ready(first + i, clients, batch) for clients, batch in jobs] for i, jobs in enumerate(spec["jobs"]) if jobs]
    for prepared in rounds[: spec["warmup"]]:  # untimed: the first call's set-up
        params = bare.round(prepared, params)
    began, cpu = time.perf_counter(), time.process_time()
    for prepared in rounds:
        params = bare.round(prepared, params)
    return {"bare_s": time.perf_counter() - began, "bare_cpu_s": time.process_time() - cpu, "rounds": len(rounds), "kernels": kernels()}


# -- the parent side ----------------------------------------------------------------------------------------------------
def subprocess_json(mode: str, spec: dict[str, Any], tmp: Path) -> tuple[dict[str, Any], float]:
    """Run a worker in a fresh interpreter; (its result, its wall seconds from start to exit)."""
    spec_file, out_file = tmp / "spec.json", tmp / "result.json"
    spec_file.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    began = time.perf_counter()
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", mode, str(spec_file), str(out_file)], env=env,
                          capture_output=True, text=True, cwd=tmp)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{mode} worker failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(out_file.read_text()), wall


def write_arrays(root: Path, n_clients: int, n_samples: int, n_test: int, side: int = 32, n_classes: int = 10) -> Path:
    """Random images in the ``arrays`` layout (``train/<client>.npz``, ``test.npz``): what MobileNetV2 trains on here."""
    import numpy as np

    if (root / "test.npz").exists():
        return root
    gen = np.random.default_rng(0)
    (root / "train").mkdir(parents=True, exist_ok=True)
    for c in range(n_clients):
        np.savez(root / "train" / f"c{c:06d}.npz", x=gen.integers(0, 256, (n_samples, 3, side, side), dtype=np.uint8),
                 y=gen.integers(0, n_classes, n_samples))
    np.savez(root / "test.npz", x=gen.integers(0, 256, (n_test, 3, side, side), dtype=np.uint8), y=np.arange(n_test) % n_classes)
    return root


def shape_sets(shape: str, args: argparse.Namespace, tmp: Path) -> list[str]:
    """The ``--set`` overrides of a shape (``mlp:K`` or ``mobilenet:K``), the rounds left out."""
    model, _, k = shape.partition(":")
    common = [f"fl.participants_per_round={int(k)}", "fl.overcommit=1.0", "fl.batch_size=16", "policies=[baseline]", "seeds=[0]"]
    if model == "mlp":
        return [*common, f"data.proxy.n_clients={args.clients}", f"fl.local_steps={args.steps}"]
    if model == "mobilenet":
        arrays = write_arrays(tmp / "arrays", args.clients, args.mobilenet_samples, args.mobilenet_test)
        return [*common, "data.name=arrays", f"data.root={arrays}", "data.fallback=error", "data.model=mobilenet_v2",
                f"fl.local_steps={args.mobilenet_steps}"]
    raise SystemExit(f"unknown shape {shape!r}: mlp:K or mobilenet:K")


def rounds_of(shape: str, args: argparse.Namespace) -> tuple[int, int]:
    if shape.startswith("mobilenet"):
        return args.mobilenet_rounds, args.mobilenet_short
    k = int(shape.partition(":")[2])
    if k >= 1000 and not args.smoke:
        return args.big_rounds, args.big_short
    return args.rounds, args.short


def stage_rows(totals: dict[str, float], whole_s: float, clock: str = "") -> dict[str, float]:
    """The stage table's rows (seconds) from a run's (or a difference of runs') probe totals; ``whole_s``: the loop's time;
    ``clock``: "" for the wall times, :data:`CPU` for the CPU times."""
    s = {k[: len(k) - len(clock)] if clock else k: v for k, v in totals.items() if k.endswith(clock) and (clock or not k.endswith(CPU))}
    g = defaultdict(float, s)
    selection = g["reachable"] + g["select"]
    pricing = g["plan_round"] - selection
    # heat and memory (and the radio's energy): the pricing stage less the policy and the transfers it calls, or the limits' calls
    limits = g["limits"] if "limits" in s else g["price"] + g["price_settle"] - g["policy"] - g["network"]
    record = g["finish_round"] - g["advance_budgets"] - g["budget"] - g["foreground"] - g["horizon"] - g["evaluate"]
    writes = g["between"] - g["probe"] - g["checkpoint"]  # the callbacks between two rounds, the probe's paired loop left out
    rows = {
        "selection": selection, "pricing": pricing, "  policy": g["policy"], "  limits (heat, memory)": limits,
        "  network transfers": g["network"], "  settling": pricing - g["policy"] - limits - g["network"],
        "battery": g["advance_budgets"] - g["trace_levels"] + g["budget"], "clock": g["trace_levels"] + g["foreground"] + g["horizon"],
        "training": g["train"], "  SGD steps": g["sgd"], "  minibatch indices": g["indices"], "  data": g["train"] - g["sgd"] - g["indices"],
        "aggregation": g["train_round"] - g["train"], "evaluation": g["evaluate"], "metrics": record + writes, "  record": record,
        "  writes": writes, "checkpoint": g["checkpoint"],
    }
    rows["unaccounted"] = whole_s - sum(v for k, v in rows.items() if not k.startswith(" "))
    return rows


def measure_once(shape: str, variant: str, args: argparse.Namespace, tmp: Path, flip: bool, jobs_cache: dict) -> dict[str, Any]:
    """One rotation's long run (with the paired bare loop after each of its last rounds), short run and bare loop (its own
    process) of (shape, variant)."""
    sets = [*shape_sets(shape, args, tmp), *[f"{k}={v}" for k, v in {**ALL_ON, **VARIANTS[variant]}.items()]]
    long_r, short_r = rounds_of(shape, args)
    load = os.getloadavg()[0]
    out: dict[Any, Any] = {}  # rounds -> that run's result, "bare" -> the bare loop's

    def whole(n: int) -> None:
        run_dir = tmp / f"run{n}"
        spec = {"experiment": str(EXPERIMENT), "out": str(run_dir), "sets": [*sets, f"fl.rounds={n}"],
                "paired_from": short_r if n == long_r else None}
        result, wall = subprocess_json("whole", spec, tmp)
        shutil.rmtree(run_dir)
        out[n] = {**result, "wall_s": wall}
        if n == long_r:
            jobs_cache.setdefault((shape, variant), result["jobs"][short_r:])

    def bare() -> None:
        jobs = jobs_cache[(shape, variant)]
        spec = {"experiment": str(EXPERIMENT), "sets": [*sets, f"fl.rounds={long_r}"], "jobs": jobs, "first_round": short_r + 1,
                "warmup": 1}
        out["bare"], _ = subprocess_json("bare", spec, tmp)

    steps = [lambda: whole(long_r), lambda: whole(short_r), bare]
    if flip and (shape, variant) in jobs_cache:
        steps.reverse()
    for step in steps:
        step()
    long, short, alone = out[long_r], out[short_r], out["bare"]
    if alone["kernels"] != long["kernels"]:
        raise SystemExit(f"{shape} {variant}: the run trained with {long['kernels']}, the bare loop with {alone['kernels']}")
    n = long_r - short_r
    whole_s = (long["loop_s"] - short["loop_s"]) / n
    stages = long["stages_s"]
    diff = {k: stages.get(k, 0.0) - short["stages_s"].get(k, 0.0) for k in stages}
    row = {"shape": shape, "variant": variant, "rounds": [long_r, short_r], "load_1min": load, "kernels": alone["kernels"],
           "whole_ms": 1000 * whole_s, "whole_cpu_ms": 1000 * (long["loop_cpu_s"] - short["loop_cpu_s"]) / n,
           "wall_ms": 1000 * (long["wall_s"] - short["wall_s"]) / n,
           "bare_ms": 1000 * alone["bare_s"] / alone["rounds"], "bare_cpu_ms": 1000 * alone["bare_cpu_s"] / alone["rounds"],
           "paired_ms": 1000 * stages["paired_bare"] / stages["paired_rounds"],
           "paired_cpu_ms": 1000 * stages["paired_bare" + CPU] / stages["paired_rounds"],
           "paired_whole_ms": 1000 * stages["paired_whole"] / stages["paired_rounds"],
           "paired_whole_cpu_ms": 1000 * stages["paired_whole" + CPU] / stages["paired_rounds"],
           "stages_ms": {k: 1000 * v / n for k, v in stage_rows(diff, whole_s * n).items()},
           "stages_cpu_ms": {k: 1000 * v / n for k, v in stage_rows(diff, long["loop_cpu_s"] - short["loop_cpu_s"], CPU).items()},
           "loop_s": [long["loop_s"], short["loop_s"]], "process_wall_s": [long["wall_s"], short["wall_s"]]}
    row["ratio"] = row["whole_ms"] / row["bare_ms"]  # the issue's: the whole round / the bare loop in its own process
    # the long run's last rounds, each from its start to the next one's (its callbacks included), over the bare loop timed right
    # after it in the same process: both see the same load
    row["paired_ratio"] = row["paired_whole_ms"] / row["paired_ms"]
    row["cpu_ratio"] = row["paired_whole_cpu_ms"] / row["paired_cpu_ms"]  # the same in CPU time
    row["wall_ratio"] = row["wall_ms"] / row["bare_ms"]  # T = the run process's wall time, start-up included
    return row


#: the ratios printed with their medians and spreads, in order
RATIOS = ("ratio", "paired_ratio", "cpu_ratio")


def best_ratio(mine: list[dict[str, Any]]) -> float:
    """The fastest long run less the fastest short run, per round, over the fastest bare loop: each side's least disturbed
    measurement (on a shared machine, load only ever adds time)."""
    n = mine[0]["rounds"][0] - mine[0]["rounds"][1]
    whole = (min(r["loop_s"][0] for r in mine) - min(r["loop_s"][1] for r in mine)) / n
    return 1000 * whole / min(r["bare_ms"] for r in mine)


def report(rows: list[dict[str, Any]], shapes: list[str], variants_of: dict[str, list[str]]) -> dict[str, Any]:
    """Print the ratio table and the stage tables; the summary that goes into the results file."""
    summary: dict[str, Any] = {}
    print(f"{'shape':<14} {'variant':<12} {'whole ms':>9} {'bare ms':>8} {'ratio':>7} {'spread':>12}  {'paired':>7} {'spread':>12}  "
          f"{'cpu':>7} {'spread':>12}  {'best':>6}")
    for shape in shapes:
        for variant in variants_of[shape]:
            mine = [r for r in rows if r["shape"] == shape and r["variant"] == variant]
            keys = ("whole_ms", "whole_cpu_ms", "wall_ms", "bare_ms", "bare_cpu_ms", "paired_ms", "paired_cpu_ms", "paired_whole_ms",
                    "paired_whole_cpu_ms", *RATIOS, "wall_ratio")
            med = {k: statistics.median(r[k] for r in mine) for k in keys}
            spread = {k: [min(r[k] for r in mine), max(r[k] for r in mine)] for k in (*RATIOS, "wall_ratio")}
            stages = {k: statistics.median(r["stages_ms"][k] for r in mine) for k in STAGES}
            stages_cpu = {k: statistics.median(r["stages_cpu_ms"][k] for r in mine) for k in STAGES}
            best = best_ratio(mine)
            summary[f"{shape} {variant}"] = {**med, "best_ratio": best, "spread": spread, "rotations": len(mine),
                                            "loads_1min": [r["load_1min"] for r in mine], "stages_ms": stages, "stages_cpu_ms": stages_cpu}
            cells = [f"{med[k]:6.2f}x {spread[k][0]:5.2f}-{spread[k][1]:5.2f}x" for k in RATIOS]
            print(f"{shape:<14} {variant:<12} {med['whole_ms']:9.1f} {med['bare_ms']:8.1f} " + "  ".join(cells) + f"  {best:5.2f}x")
    for shape in shapes:
        variants = variants_of[shape]
        print(f"\nstages, ms per round (median over rotations), {shape}: wall / CPU")
        print(f"{'stage':<26}" + "".join(f"{v:>17}" for v in variants))
        for stage in STAGES:
            cells = [f"{summary[f'{shape} {v}']['stages_ms'][stage]:.2f} / {summary[f'{shape} {v}']['stages_cpu_ms'][stage]:.2f}" for v in variants]
            print(f"{stage:<26}" + "".join(f"{c:>17}" for c in cells))
    return summary


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        mode, spec_file, out_file = argv[1:4]
        spec = json.loads(Path(spec_file).read_text())
        result = whole_worker(spec) if mode == "whole" else bare_worker(spec)
        Path(out_file).write_text(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="mlp:100", help="comma-separated mlp:K / mobilenet:K (default: the issue's workload)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of: {', '.join(VARIANTS)}")
    parser.add_argument("--other-variants", help="the variants of every shape but the first (default: --variants), e.g. 'all on,all off'")
    parser.add_argument("--clients", type=int, default=2400)
    parser.add_argument("--rounds", type=int, default=90, help="the long run's rounds (MLP, cohorts under 1,000)")
    parser.add_argument("--short", type=int, default=60, help="the short run's rounds")
    parser.add_argument("--big-rounds", type=int, default=30, help="the long run's rounds at cohorts of 1,000 or more (MLP)")
    parser.add_argument("--big-short", type=int, default=20)
    parser.add_argument("--steps", type=int, default=20, help="local steps (MLP)")
    parser.add_argument("--mobilenet-steps", type=int, default=1, help="local steps (MobileNetV2: 0.9 s a client at 20 steps on one core)")
    parser.add_argument("--mobilenet-rounds", type=int, default=8)
    parser.add_argument("--mobilenet-short", type=int, default=3)
    parser.add_argument("--mobilenet-samples", type=int, default=20, help="random 32 px images per client")
    parser.add_argument("--mobilenet-test", type=int, default=200, help="test images")
    parser.add_argument("--rotations", type=int, default=4)
    parser.add_argument("--out", help="write the rows and the summary to this JSON file (stamped with its provenance)")
    parser.add_argument("--profile", help="instead: one long run (the first shape, its first variant) under cProfile, its stats to this file")
    parser.add_argument("--smoke", action="store_true", help=f"tiny, seconds ({SMOKE})")
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**SMOKE)
        args = parser.parse_args(argv)
    shapes = args.shapes.split(",")
    variants_of = {s: (args.variants if i == 0 or args.other_variants is None else args.other_variants).split(",") for i, s in enumerate(shapes)}
    unknown = [v for vs in variants_of.values() for v in vs if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant {unknown[0]!r}; known: {', '.join(VARIANTS)}")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if args.profile:
            first = variants_of[shapes[0]][0]
            sets = [*shape_sets(shapes[0], args, tmp), *[f"{k}={v}" for k, v in {**ALL_ON, **VARIANTS[first]}.items()],
                    f"fl.rounds={rounds_of(shapes[0], args)[0]}"]
            spec = {"experiment": str(EXPERIMENT), "out": str(tmp / "run"), "sets": sets, "profile": str(Path(args.profile).resolve())}
            subprocess_json("whole", spec, tmp)
            import pstats

            pstats.Stats(str(Path(args.profile).resolve())).sort_stats("tottime").print_stats(40)
            return
        rows: list[dict[str, Any]] = []
        jobs_cache: dict[tuple[str, str], Any] = {}  # (shape, variant) -> the long run's last rounds' jobs
        loads = [os.getloadavg()]
        for rotation in range(args.rotations):
            for shape in shapes:
                for variant in variants_of[shape]:
                    row = measure_once(shape, variant, args, tmp, flip=rotation % 2 == 1, jobs_cache=jobs_cache)
                    rows.append({**row, "rotation": rotation})
                    print(f"rotation {rotation + 1}: {shape} {variant}: whole {row['whole_ms']:.1f} ms, bare {row['bare_ms']:.1f} ms "
                          f"({row['ratio']:.2f}x); paired {row['paired_whole_ms']:.1f} / {row['paired_ms']:.1f} ms "
                          f"({row['paired_ratio']:.2f}x, CPU {row['cpu_ratio']:.2f}x); load {row['load_1min']:.2f}", flush=True)
            loads.append(os.getloadavg())
    print(f"\nwhole round: flamingo-sim run, per round = (T(long) - T(short)) / the rounds between, T from the run loop's start to the "
          "command's return; bare: SGD steps + FedAvg on the same cohorts in a process of its own; ratio: whole / bare (median over "
          "rotations, spread); paired: the long run's last rounds, each from its start to the next one's, over the bare loop timed "
          "right after it in the run's process; cpu: the same in CPU time; best: the fastest long run less the fastest short one "
          f"over the fastest bare; {args.clients:,} clients, baseline policy, overcommit 1.0, 1 torch thread; load average "
          f"{min(x[0] for x in loads):.2f}-{max(x[0] for x in loads):.2f}")
    summary = report(rows, shapes, variants_of)
    if args.out:
        from flamingo_sim.provenance import command_line, stamp

        doc = {"smoke": bool(args.smoke), "cores": os.cpu_count(), "clients": args.clients, "shapes": shapes, "variants": variants_of,
               "rotations": args.rotations, "rounds": {s: rounds_of(s, args) for s in shapes}, "mlp_steps": args.steps,
               "mobilenet_steps": args.mobilenet_steps, "mobilenet_samples": args.mobilenet_samples, "load_average": loads,
               "summary": summary, "rows": rows}
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
        stamp([args.out], command_line())  # timings: no sources (they date with the whole tree)


if __name__ == "__main__":
    main()
