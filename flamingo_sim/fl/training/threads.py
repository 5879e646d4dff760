"""A cohort on the CPU's cores: model copies training clients on worker threads (``threads``).

Under ``torch.func.vmap`` a convolution with per-client weights becomes a grouped
convolution, which the CPU runs no faster than the per-client loop (see
:mod:`flamingo_sim.fl.training.trainer`). What the CPU does reward is running whole clients side by
side: ``n`` model copies, each on its own Python thread with one torch thread, train clients
``j, j + n, j + 2n, ...`` with the reference per-client step
(:func:`~flamingo_sim.fl.training.batched.train_one_client`). torch releases the GIL inside its
kernels, so the copies run in parallel; one torch thread per copy keeps every client's
arithmetic the same whatever ``n`` is. Measured on 2 cores (8 clients x 3 steps x batch 16,
32 px, ``benchmarks/gpu_round.py --device cpu``): 1.2-1.6x the per-client loop on two torch threads.

Randomness: each copy's ``nn.Dropout`` layers are replaced by :class:`ClientDropout`, which
draws from a generator seeded per client (``dropout_seeds``), so a client's masks do not
depend on which thread trained it or when: the result is the same for any number of workers,
run after run. (The per-client loop draws every client's masks from torch's generator, one
client after the other, so the two strategies draw different masks.) A model whose forward
draws random numbers any other way would make the result depend on thread timing:
:func:`threads_safe` tells the models this strategy accepts.
"""

from __future__ import annotations

import copy
import threading
from typing import Sequence

import torch
from torch import Tensor, nn

from flamingo_sim.fl.training.batched import train_one_client

__all__ = ["ClientDropout", "threads_safe", "draws_random", "train_threads"]

#: Module packages whose layers draw random numbers only through ``nn.Dropout`` (checked by type below).
_KNOWN_PACKAGES = ("torch.nn.", "torchvision.", "flamingo_sim.")
#: Layers that draw random numbers in training other than plain ``nn.Dropout``.
_RANDOM_LAYERS = (nn.modules.dropout._DropoutNd, nn.RReLU)


class ClientDropout(nn.Module):
    """``nn.Dropout(p)`` drawing its masks from :attr:`generator` (seeded per client)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = float(p)
        self.generator = torch.Generator()

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.p == 1.0:
            return torch.zeros_like(x)
        keep = torch.empty(x.shape, dtype=x.dtype).bernoulli_(1.0 - self.p, generator=self.generator).to(x.device)
        return x * keep / (1.0 - self.p)


def threads_safe(model: nn.Module) -> bool:
    """Whether :func:`train_threads` gives a result independent of thread timing for ``model``:
    every layer comes from torch, torchvision or this package, and the only random layers are
    plain ``nn.Dropout`` (replaced by :class:`ClientDropout`)."""
    for m in model.modules():
        if not type(m).__module__.startswith(_KNOWN_PACKAGES):
            return False
        if isinstance(m, _RANDOM_LAYERS) and type(m) is not nn.Dropout:
            return False
    return True


def draws_random(model: nn.Module) -> bool:
    """Whether ``model`` has layers that draw random numbers in training (dropout and the like)."""
    return any(isinstance(m, _RANDOM_LAYERS) for m in model.modules())


def _with_client_dropout(model: nn.Module) -> tuple[nn.Module, list[ClientDropout]]:
    """A training copy of ``model`` whose ``nn.Dropout`` layers are :class:`ClientDropout`."""
    work = copy.deepcopy(model).train()
    drops: list[ClientDropout] = []
    for parent in list(work.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Dropout:
                replacement = ClientDropout(child.p)
                setattr(parent, name, replacement)
                drops.append(replacement)
    return work, drops


def train_threads(
    model: nn.Module,
    state: dict[str, Tensor],
    client_datas: Sequence[tuple[Tensor, Tensor]],
    indices: Sequence[Tensor],
    lr: float,
    n_workers: int,
    dropout_seeds: Sequence[int],
    prox_mu: float = 0.0,
) -> tuple[dict[str, Tensor], Tensor]:
    """Per-client SGD of a cohort on ``n_workers`` CPU threads (client ``i`` on worker ``i % n``).

    Returns ``(stacked state, per-client mean loss)`` in the clients' order. torch's thread
    count is 1 inside the workers and restored afterwards. An exception in a worker is raised
    here (the first client's, in cohort order).
    """
    k = len(client_datas)
    if len(indices) != k or len(dropout_seeds) != k:
        raise ValueError(f"{k} clients but {len(indices)} index tensors and {len(dropout_seeds)} dropout seeds")
    n = max(1, min(int(n_workers), k))
    device = torch.device("cpu")
    copies = [_with_client_dropout(model) for _ in range(n)]
    results: list[dict[str, Tensor] | None] = [None] * k
    losses: list[Tensor | None] = [None] * k
    errors: dict[int, BaseException] = {}

    def work(j: int) -> None:
        torch.set_num_threads(1)
        copy_j, drops = copies[j]
        for i in range(j, k, n):
            try:
                for d in drops:
                    d.generator.manual_seed(int(dropout_seeds[i]))
                x, y = client_datas[i]
                results[i], losses[i] = train_one_client(copy_j, state, x, y, indices[i], lr, device, prox_mu)
            except BaseException as exc:  # noqa: BLE001 -- handed to the caller's thread
                errors[i] = exc
                return

    threads_before = torch.get_num_threads()
    workers = [threading.Thread(target=work, args=(j,), name=f"flamingo-cohort-{j}", daemon=True) for j in range(n)]
    try:
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    finally:
        torch.set_num_threads(threads_before)
    if errors:
        raise errors[min(errors)]
    stacked = {name: torch.stack([r[name] for r in results]) for name in state}  # type: ignore[index]
    return stacked, torch.stack(losses)  # type: ignore[arg-type]
