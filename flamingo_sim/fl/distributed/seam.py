"""A round's local training and evaluation split over the ranks of a process group.

Rank 0 runs the whole coordinator (:class:`~flamingo_sim.fl.sim.simulation.Simulation`: who is
online, selection, policies, pricing, settlement, clock, energy, aggregation, checkpoints) and
hands each job to :class:`DistributedSeam`; the other ranks run :func:`serve`, which does
only what a job asks. A job crosses as tensors broadcast from rank 0: an int64 header, the
clients and their randomness keys, the start model (one flat buffer per dtype). Each rank takes
a contiguous share of the clients (:func:`split_by_cost`), trains it with the
:class:`~flamingo_sim.fl.training.trainer.CohortTrainer` on its own device, and rank 0 gathers
every client's trained state back in client order and aggregates as one process would.

Why the result does not depend on the number of ranks (bit for bit on the CPU):

- a client's local training depends only on the start model, its data and its keys
  (minibatches from ``(seed, round, client)``; dropout masks per client under the ``threads``
  strategy; per-client arithmetic that does not depend on who else is in a vmap batch, checked
  by the tests), not on which rank or batch it trained in. Models with dropout under a strategy
  that draws every client's masks from one generator (``sequential``, ``vmap``, ``streams``)
  would break this: on the CPU ``auto`` then trains with ``threads`` (per-client masks, one
  torch thread per client: the per-client loop's arithmetic) and the others are refused; on
  GPUs, where numbers match a one-process run only up to float rounding anyway, it is said once.
- the reduction is the one-process reduction: rank 0 gathers the per-client states and runs
  the aggregator on them in client order. Reducing first (each rank a float64 partial sum, then
  an all-reduce) moves ``P`` values per rank instead of ``k x P``; timed alone (gloo, 2
  processes, ``benchmarks/distributed.py --sections reduction``) the two are about even at a few
  clients a rank (all-reduce 0.8 ms against gather 1.0-2.2 ms for 50 MLP-proxy clients, 27 ms
  against 37-52 ms for 3 MobileNetV2 clients) and the gather grows with ``k``. But a sum split by
  rank is not the one-process sum bit for bit, and only the gather serves every aggregator
  (FedAvg, FedProx, FedAdam, FedYogi, a plug-in) and FedBuff unchanged.
- why the coordinator lives on rank 0 alone, rather than computed identically everywhere: its
  state (every client's battery budget) is large, and its float arithmetic (numpy's
  CPU-dispatched kernels) may differ between hosts; ranks that disagreed on a round's
  clients would deadlock. The other ranks only need the job, which is small.

Evaluation is split the same way, by whole test batches, and the per-batch sums are added on
rank 0 in batch order (:func:`~flamingo_sim.fl.sim.seam.combine_evaluation`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import Tensor

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.distributed.world import Comm
from flamingo_sim.fl.sim.seam import ClientUpdates, LocalSeam, TrainJob, combine_evaluation
from flamingo_sim.fl.training.threads import draws_random, threads_safe
from flamingo_sim.fl.training.trainer import choose_strategy

__all__ = ["DistributedSeam", "Layout", "serve", "split_by_cost", "prepare_trainer", "split_over", "work_per_client"]

TRAIN, EVAL, STOP = 1, 2, 3
_HEADER = 6  # kind, round_idx, augment_round (-1: none), n clients, prox_mu (float64 bits), model as last sent (1) or below (0)
_LOSS, _SAMPLES = "\0loss", "\0n_samples"


def split_by_cost(costs: np.ndarray | list[float], parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``(lo, hi)`` ranges over ``costs`` whose sums are as equal as whole
    items allow (each cut at the prefix sum nearest ``total x r / parts``)."""
    c = np.asarray(costs, dtype=np.float64)
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    if (c < 0).any():
        raise ValueError("costs must be >= 0")
    cum = np.concatenate([[0.0], np.cumsum(c)])
    cuts = [0]
    for r in range(1, parts):
        target = cum[-1] * r / parts
        i = int(np.searchsorted(cum, target))
        if i > 0 and (i >= len(cum) or target - cum[i - 1] <= cum[i] - target):
            i -= 1
        cuts.append(min(max(i, cuts[-1]), len(c)))
    cuts.append(len(c))
    return [(cuts[r], cuts[r + 1]) for r in range(parts)]


class Layout:
    """How a state (name -> tensor) flattens into one row per dtype, and back; rows of many
    clients stack into a ``(k, row)`` matrix (a client's entries side by side)."""

    def __init__(self, template: dict[str, Tensor]) -> None:
        self.groups: dict[torch.dtype, list[tuple[str, tuple[int, ...]]]] = {}
        for name, value in template.items():
            self.groups.setdefault(value.dtype, []).append((name, tuple(value.shape)))
        self.widths = {dt: sum(int(np.prod(shape)) for _, shape in entries) for dt, entries in self.groups.items()}

    def pack(self, stacked: dict[str, Tensor], k: int, device: torch.device, rows: int | None = None) -> dict[torch.dtype, Tensor]:
        """``(rows, width)`` per dtype (``rows`` >= ``k``, default ``k``; rows past ``k`` are left
        unset) from entries with a leading client dimension ``k``: one copy of each entry."""
        out = {dt: torch.empty(k if rows is None else rows, w, dtype=dt, device=device) for dt, w in self.widths.items()}
        for dt, entries in self.groups.items():
            at = 0
            for name, shape in entries:
                n = int(np.prod(shape))
                out[dt][:k, at : at + n] = stacked[name].reshape(k, n)
                at += n
        return out

    def unpack(self, rows: dict[torch.dtype, Tensor]) -> dict[str, Tensor]:
        """Views into ``rows``, one per entry (``(k, *shape)``)."""
        out: dict[str, Tensor] = {}
        for dt, entries in self.groups.items():
            at = 0
            for name, shape in entries:
                n = int(np.prod(shape))
                out[name] = rows[dt][:, at : at + n].unflatten(1, shape) if shape else rows[dt][:, at]
                at += n
        return out

    def empty(self, k: int, device: torch.device) -> dict[torch.dtype, Tensor]:
        return {dt: torch.zeros(k, w, dtype=dt, device=device) for dt, w in self.widths.items()}


def prepare_trainer(local: LocalSeam, world_size: int, log: Callable[[str], None]) -> None:
    """Make ``local``'s strategy give each client the same result whichever rank trains it (see
    the module docstring): ``auto`` -> ``threads`` for a CPU model with dropout, the other
    shared-generator strategies refused on the CPU, said once on a GPU."""
    trainer = local.trainer
    if world_size < 2 or not draws_random(trainer.model):
        return
    strategy = trainer.strategy
    if strategy == "auto":
        strategy = choose_strategy(trainer.model, tuple(local.test_x.shape[1:]), trainer.device, 2, cpu_threads=1)
    if strategy == "threads":
        trainer.strategy = "threads"
        return
    if trainer.device.type == "cpu":
        if trainer.strategy == "auto" and threads_safe(trainer.model):
            trainer.strategy = "threads"
            return
        raise ConfigError(f"fl.train_mode: {trainer.strategy!r} draws every client's dropout masks from one generator per round, so over "
                          f"{world_size} processes a client's masks would depend on its rank; use fl.train_mode: threads (masks per client)")
    log(f"note: fl.train_mode {strategy!r} on {trainer.device} draws dropout masks per rank: the run matches a one-process run "
        "up to its dropout masks (and, on GPUs, float rounding)")


class _Job:
    """The tensors a job crosses as, and how each side reads them.

    The model crosses once per change: a job whose model is bit for bit the one the last job
    carried (a round's training starts from the model its previous round evaluated) says so in
    its header, and every rank reuses the flat buffers it kept.
    """

    def __init__(self, comm: Comm, layout: Layout) -> None:
        self.comm, self.layout = comm, layout
        self.last: dict[torch.dtype, Tensor] | None = None  # the model rows last sent (rank 0) or received

    def send(self, kind: int, job: TrainJob | None = None, params: dict[str, Tensor] | None = None) -> None:
        header = torch.zeros(_HEADER, dtype=torch.int64, device=self.comm.device)
        header[0] = kind
        self.comm.train_jobs += kind == TRAIN
        self.comm.eval_jobs += kind == EVAL
        if job is not None:
            header[1] = job.round_idx
            header[2] = -1 if job.augment_round is None else job.augment_round
            header[3] = len(job.clients)
            header[4] = torch.tensor([job.prox_mu], dtype=torch.float64).view(torch.int64)[0]
        state = job.start if job is not None else params
        rows = None if state is None else self.layout.pack({k: v.unsqueeze(0) for k, v in state.items()}, 1, self.comm.device)
        same = rows is not None and self.last is not None and all(_same_bits(rows[dt], self.last[dt]) for dt in rows)
        header[5] = int(same)
        self.comm.broadcast(header, "job header")
        if job is not None and job.clients:
            ids = torch.tensor(list(job.clients) + list(job.keys), dtype=torch.int64, device=self.comm.device)
            self.comm.broadcast(ids, "job clients")
        if rows is not None and not same:
            for dt, row in rows.items():
                self.comm.broadcast(row, f"model broadcast ({dt})")
            self.last = rows

    def receive(self) -> tuple[int, TrainJob | None, dict[str, Tensor] | None]:
        header = self.comm.broadcast(torch.zeros(_HEADER, dtype=torch.int64, device=self.comm.device), "job header").cpu()
        kind = int(header[0])
        if kind == STOP:
            return kind, None, None
        n = int(header[3])
        clients: tuple[int, ...] = ()
        keys: tuple[int, ...] = ()
        if n:
            ids = self.comm.broadcast(torch.zeros(2 * n, dtype=torch.int64, device=self.comm.device), "job clients").cpu().tolist()
            clients, keys = tuple(ids[:n]), tuple(ids[n:])
        if int(header[5]) and self.last is not None:
            rows = self.last
        else:
            rows = self.layout.empty(1, self.comm.device)
            for dt, row in rows.items():
                self.comm.broadcast(row, f"model broadcast ({dt})")
            self.last = rows
        state = {k: v[0].clone() for k, v in self.layout.unpack(rows).items()}
        if kind == EVAL:
            return kind, None, state
        mu = float(header[4:5].view(torch.float64)[0])
        augment = None if int(header[2]) < 0 else int(header[2])
        return kind, TrainJob(state, clients, keys, int(header[1]), mu, augment), None


def _same_bits(a: Tensor, b: Tensor) -> bool:
    """Whether two flat buffers hold the same bits (not merely equal values: -0.0 and 0.0, NaNs)."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def _train_share(local: LocalSeam, comm: Comm, layout: Layout, job: TrainJob, work: float) -> ClientUpdates | None:
    """This rank's share of ``job``, trained and gathered on rank 0 (the whole job's updates there, None elsewhere).

    Each other rank packs its share into one buffer per dtype and sends it; rank 0 keeps its
    own share as trained and concatenates every entry in rank (= client) order: one copy each.
    """
    k, world = len(job.clients), comm.world
    shares = split_by_cost(np.full(k, work), world.size)
    lo, hi = shares[world.rank]
    mine = local.train(job.share(lo, hi)) if hi > lo else None
    comm.wait("barrier after training")
    if not world.is_main:
        if mine is not None:
            packed = layout.pack({**mine.params, _LOSS: mine.losses, _SAMPLES: mine.n_samples}, hi - lo, comm.device)
            comm.send(list(packed.values()), "sending trained clients")
        return None
    received = comm.receive({r: [(b - a, layout.widths[dt], dt) for dt in layout.widths] for r, (a, b) in enumerate(shares) if r and b > a},
                            "receiving trained clients")
    parts = [] if mine is None else [{**mine.params, _LOSS: mine.losses, _SAMPLES: mine.n_samples}]
    parts += [layout.unpack(dict(zip(layout.widths, received[r]))) for r in sorted(received)]
    state = {name: torch.cat([p[name].to(local.device) for p in parts]) if len(parts) > 1 else parts[0][name] for name in parts[0]}
    losses, n_samples = state.pop(_LOSS), state.pop(_SAMPLES)
    return ClientUpdates(state, losses, n_samples.cpu(), mine.train_s if mine is not None else 0.0)


def _evaluate_share(local: LocalSeam, comm: Comm, params: dict[str, Tensor]) -> tuple[float, float] | None:
    shares = split_by_cost(np.ones(local.n_eval_batches), comm.world.size)
    lo, hi = shares[comm.world.rank]
    widest = max(b - a for a, b in shares)
    correct = torch.zeros(widest, dtype=torch.int64, device=comm.device)
    losses = torch.zeros(widest, dtype=torch.float64, device=comm.device)
    if hi > lo:
        c, s = local.evaluate_share(params, lo, hi)
        correct[: hi - lo] = torch.tensor(c, dtype=torch.int64)
        losses[: hi - lo] = torch.tensor(s, dtype=torch.float64)
    comm.wait("barrier after evaluation")
    all_correct = comm.gather(correct, "gather of evaluation")
    all_losses = comm.gather(losses, "gather of evaluation")
    if all_correct is None or all_losses is None:
        return None
    c_all = [int(v) for r, (a, b) in enumerate(shares) for v in all_correct[r][: b - a].tolist()]
    s_all = [float(v) for r, (a, b) in enumerate(shares) for v in all_losses[r][: b - a].tolist()]
    return combine_evaluation(c_all, s_all, int(local.test_x.shape[0]))


def _layout(local: LocalSeam) -> Layout:
    template = {k: v for k, v in local.trainer.model.state_dict().items()}
    template[_LOSS] = torch.zeros((), dtype=torch.float32)
    template[_SAMPLES] = torch.zeros((), dtype=torch.float64)
    return Layout(template)


def _model_layout(local: LocalSeam) -> Layout:
    return Layout(dict(local.trainer.model.state_dict()))


class DistributedSeam:
    """Rank 0's training seam: each job broadcast, trained in shares by every rank, gathered in order.

    ``work_per_client``: the cost each client's training adds to its rank's share (every client
    runs ``local_steps`` steps of ``batch_size`` samples, so it is the same for all of them and the
    split is by count; the split itself takes any costs, :func:`split_by_cost`).
    """

    def __init__(self, local: LocalSeam, comm: Comm, work_per_client: float) -> None:
        self.local, self.comm, self.work = local, comm, float(work_per_client)
        self.layout = _layout(local)
        self.jobs = _Job(comm, _model_layout(local))
        self.rounds = 0

    def train(self, job: TrainJob) -> ClientUpdates:
        if self.comm.world.size == 1:  # a group of one: nothing to split or move
            return self.local.train(job)
        self.jobs.send(TRAIN, job)
        self.rounds += 1
        out = _train_share(self.local, self.comm, self.layout, job, self.work)
        assert out is not None  # rank 0
        return out

    def evaluate(self, params: dict[str, Tensor]) -> tuple[float, float]:
        if self.comm.world.size == 1:
            return self.local.evaluate(params)
        self.jobs.send(EVAL, params=params)
        out = _evaluate_share(self.local, self.comm, params)
        assert out is not None
        return out

    def close(self) -> None:
        """Tell the other ranks this simulation is over (they return from :func:`serve`)."""
        if self.comm.world.size > 1:
            self.jobs.send(STOP)


def serve(local: LocalSeam, comm: Comm, work_per_client: float) -> int:
    """A rank other than 0: do rank 0's jobs until it says stop; returns the jobs done."""
    layout, jobs, done = _layout(local), _Job(comm, _model_layout(local)), 0
    while True:
        kind, job, params = jobs.receive()
        if kind == STOP:
            return done
        if kind == TRAIN and job is not None:
            _train_share(local, comm, layout, job, float(work_per_client))
        elif kind == EVAL and params is not None:
            _evaluate_share(local, comm, params)
        else:
            raise ValueError(f"rank {comm.world.rank}: unknown job kind {kind} from rank 0")
        done += 1


def work_per_client(fl: Any) -> float:
    """What one client's local training costs (``fl``: the experiment's ``fl`` section): ``local_steps`` x ``batch_size`` samples."""
    return float(fl.local_steps * fl.batch_size)


def split_over(sim: Any, comm: Comm, say: Callable[[str], None]) -> None:
    """Rank 0: ``sim``'s step 5 split over the group (its seam replaced by a :class:`DistributedSeam`)."""
    local = sim.seam
    assert isinstance(local, LocalSeam)
    prepare_trainer(local, comm.world.size, say)
    comm.context = f"{sim.policy_name} seed {sim.seed}"
    sim.seam = DistributedSeam(local, comm, work_per_client(sim.rules.fl))
