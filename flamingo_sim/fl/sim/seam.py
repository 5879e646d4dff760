"""The training seam: who trains a round's cohort (its kept clients) and evaluates the model, the round loop's step 5.

:class:`~flamingo_sim.fl.sim.simulation.Simulation` (and FedBuff's
:class:`~flamingo_sim.fl.sim.fedbuff.AsyncSimulation`) hand a :class:`TrainJob` (a start model,
the clients, the keys their randomness derives from) to their :attr:`seam` and get every
client's trained state back, in the job's client order; they ask it for the test accuracy the
same way. :class:`LocalSeam` does both in this process with a
:class:`~flamingo_sim.fl.training.trainer.CohortTrainer`; the torch.distributed run
(:mod:`flamingo_sim.fl.distributed`) puts a :class:`~flamingo_sim.fl.distributed.seam.DistributedSeam` in its place that splits the same job over
processes. Everything else about a round (who is online, selection, pricing, settlement,
aggregation) stays with the simulation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import torch
from torch import Tensor

from flamingo_sim.fl.training.device import precision_context
from flamingo_sim.fl.training.trainer import CohortTask, CohortTrainer, evaluate_batches

__all__ = ["TrainJob", "ClientUpdates", "TrainingSeam", "LocalSeam", "EVAL_BATCH", "combine_evaluation"]

#: Test samples per evaluation batch; a split evaluation splits whole batches (the same sums).
EVAL_BATCH = 1024


@dataclass(frozen=True)
class TrainJob:
    """Local training of ``clients`` (dataset indices), each from ``start``.

    ``keys``: what each client's minibatch order and dropout masks derive from, with
    ``round_idx`` (the client id in synchronous rounds, the dispatch number in FedBuff).
    ``augment_round``: the round handed to the dataset's ``train_augment``, with each client's key
    (None: none applied). ``batch_size``: the minibatch of every client of the job (None: the
    cohort's; ``devices.memory: shrink_batch`` sets it).
    """

    start: dict[str, Tensor]
    clients: tuple[int, ...]
    keys: tuple[int, ...]
    round_idx: int
    prox_mu: float = 0.0
    augment_round: int | None = None
    batch_size: int | None = None

    def share(self, lo: int, hi: int) -> "TrainJob":
        """The same job for clients ``lo:hi`` only."""
        return TrainJob(self.start, self.clients[lo:hi], self.keys[lo:hi], self.round_idx, self.prox_mu, self.augment_round, self.batch_size)


@dataclass(frozen=True)
class ClientUpdates:
    """The trained clients of a job, in its order: ``params`` stacked along a leading client
    dimension, ``losses`` ``(k,)`` float32 (mean local training loss), ``n_samples`` ``(k,)``
    float64 (each client's sample count), ``train_s`` wall seconds in local SGD (decoding excluded)."""

    params: dict[str, Tensor]
    losses: Tensor
    n_samples: Tensor
    train_s: float = 0.0


class TrainingSeam(Protocol):
    """Trains jobs and evaluates models for a simulation."""

    def train(self, job: TrainJob) -> ClientUpdates: ...

    def evaluate(self, params: dict[str, Tensor]) -> tuple[float, float]:
        """``(accuracy, mean loss)`` of ``params`` on the test set."""
        ...


class LocalSeam:
    """Everything in this process: the dataset's clients through one :class:`CohortTrainer`."""

    def __init__(self, dataset: Any, trainer: CohortTrainer, test_data: Sequence[Tensor], *, local_steps: int, batch_size: int, lr: float,
                 seed: int, precision: str, device: torch.device) -> None:
        self.dataset, self.trainer = dataset, trainer
        self.test_x, self.test_y = test_data
        self.local_steps, self.batch_size, self.lr, self.seed = local_steps, batch_size, lr, seed
        self.precision, self.device = precision, device

    def train(self, job: TrainJob) -> ClientUpdates:
        ids = list(job.clients)
        self.dataset.prefetch(ids)  # real data: decode the cohort in parallel (the contract's default: nothing)
        datas = [self.dataset.client_data(c) for c in ids]
        if job.augment_round is not None:  # keyed like the minibatches: the client id, or FedBuff's dispatch number
            datas = [(self.dataset.train_augment(x, k, job.augment_round, self.seed), y) for k, (x, y) in zip(job.keys, datas)]
        began = time.perf_counter()
        batch_size = self.batch_size if job.batch_size is None else job.batch_size
        task = CohortTask(datas, list(job.keys), n_steps=self.local_steps, batch_size=batch_size, lr=self.lr, seed=self.seed,
                          round_idx=job.round_idx, prox_mu=job.prox_mu)
        result = self.trainer.train(job.start, task)
        n_samples = torch.tensor([len(d[1]) for d in datas], dtype=torch.float64)
        return ClientUpdates(result.params, result.losses, n_samples, time.perf_counter() - began)

    @property
    def n_eval_batches(self) -> int:
        return -(-int(self.test_x.shape[0]) // EVAL_BATCH)

    def evaluate_share(self, params: dict[str, Tensor], first: int, stop: int) -> tuple[list[int], list[float]]:
        """Correct predictions and summed loss of each test batch ``first:stop`` (see :meth:`evaluate`)."""
        lo, hi = first * EVAL_BATCH, min(stop * EVAL_BATCH, int(self.test_x.shape[0]))
        with precision_context(self.precision, self.device):
            return evaluate_batches(self.trainer.model, params, self.test_x[lo:hi], self.test_y[lo:hi], EVAL_BATCH)

    def evaluate(self, params: dict[str, Tensor]) -> tuple[float, float]:
        if self.test_x.shape[0] != self.test_y.shape[0] or self.test_x.shape[0] == 0:
            raise ValueError(f"need the same, non-zero number of inputs and labels, got {self.test_x.shape[0]} and {self.test_y.shape[0]}")
        correct, losses = self.evaluate_share(params, 0, self.n_eval_batches)
        return combine_evaluation(correct, losses, int(self.test_x.shape[0]))


def combine_evaluation(correct: Sequence[int], losses: Sequence[float], n: int) -> tuple[float, float]:
    """``(accuracy, mean loss)`` from per-batch counts and loss sums, added in batch order (so a
    split evaluation gives the same float as one pass)."""
    total_correct, loss_sum = 0, 0.0
    for c, s in zip(correct, losses):
        total_correct += int(c)
        loss_sum += float(s)
    return total_correct / n, loss_sum / n
