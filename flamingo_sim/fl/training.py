"""Local training of a cohort of clients, one at a time or all at once with ``torch.func.vmap``.

Each client starts from the same global model state, runs ``n_steps`` steps of plain SGD
(no momentum, no weight decay) on minibatches of ``batch_size`` samples of its own data, and
returns its new state. Minibatches cycle through the client's data in shuffled order: the
sample order is a concatenation of fresh permutations drawn from
``rng(seed, "local-shuffle", round_idx, client_id)``, cut into ``n_steps`` batches. A client
with fewer samples than ``batch_size`` therefore sees some samples twice in one batch (the
FedScale dataset reader drops such clients; the synthetic proxy keeps ``min_samples`` >= 16).

Two implementations give the same numbers (up to float rounding, about 1e-6):

- ``"batched"``: the cohort's parameters are stacked along a leading client dimension and one
  ``vmap(grad(loss))`` call computes every client's gradient per step. Only for models without
  buffers (no BatchNorm running statistics) and without dropout.
- ``"sequential"``: a copy of the model is trained client after client with ``torch.optim.SGD``.
  Works for every model; BatchNorm running statistics are returned with the parameters.

``"auto"`` picks batched when the model allows it; a ``"batched"`` request for a model that
does not allow it falls back to sequential (``CohortResult.mode`` says which ran).

FedProx (``prox_mu > 0``) adds ``prox_mu/2 ||w - w_global||^2`` over the trainable parameters
to every client's local loss: each step's gradient gains ``prox_mu * (w - w_global)``
(:func:`_add_proximal`); the reported training loss is the task loss alone.

A model *state* here is a ``dict[str, Tensor]`` of its parameters and buffers, as
:func:`model_state` returns it.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad_and_value, vmap

from flamingo_sim.rng import rng

__all__ = [
    "CohortResult",
    "train_cohort",
    "evaluate",
    "model_state",
    "minibatch_indices",
    "supports_batched",
]

Mode = Literal["auto", "batched", "sequential"]


@dataclass(frozen=True)
class CohortResult:
    """The outcome of local training for ``k`` clients.

    ``params``: each state entry stacked with a leading client dimension ``k`` (same order as
    the ``client_ids`` given). ``losses``: ``(k,)`` float32, each client's mean minibatch
    training loss over its local steps (loss before each step's update). ``mode``: the
    implementation that ran, ``"batched"`` or ``"sequential"``.
    """

    params: dict[str, Tensor]
    losses: Tensor
    mode: str

    @property
    def n_clients(self) -> int:
        return int(self.losses.shape[0])

    def client_params(self, i: int) -> dict[str, Tensor]:
        """The state of the ``i``-th client of the cohort (views, not copies)."""
        return {name: value[i] for name, value in self.params.items()}


def model_state(model: nn.Module) -> dict[str, Tensor]:
    """Detached copies of ``model``'s parameters and buffers, keyed like ``state_dict``."""
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def supports_batched(model: nn.Module) -> bool:
    """Whether ``model`` can be trained with vmap: no buffers and no active dropout."""
    if any(True for _ in model.buffers()):
        return False
    return not any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules())


def minibatch_indices(n_samples: int, n_steps: int, batch_size: int, seed: int, round_idx: int, client_id: int) -> Tensor:
    """``(n_steps, batch_size)`` int64 sample indices of one client's local steps this round."""
    if n_samples < 1:
        raise ValueError(f"client {client_id} has no samples")
    total = n_steps * batch_size
    gen = rng(seed, "local-shuffle", round_idx, client_id)
    n_perms = math.ceil(total / n_samples)
    order = np.concatenate([gen.permutation(n_samples) for _ in range(n_perms)])[:total]
    return torch.from_numpy(order.astype(np.int64)).view(n_steps, batch_size)


def _check_args(client_datas: Sequence[tuple[Tensor, Tensor]], client_ids: Sequence[int], n_steps: int, batch_size: int, lr: float) -> None:
    if len(client_datas) != len(client_ids):
        raise ValueError(f"{len(client_datas)} client datasets but {len(client_ids)} client ids")
    if len(client_ids) == 0:
        raise ValueError("empty cohort")
    if n_steps < 1 or batch_size < 1:
        raise ValueError(f"n_steps and batch_size must be >= 1, got {n_steps}, {batch_size}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    for cid, (x, y) in zip(client_ids, client_datas):
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"client {cid}: {x.shape[0]} inputs but {y.shape[0]} labels")


def _model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def train_cohort(
    model: nn.Module,
    global_params: dict[str, Tensor],
    client_datas: Sequence[tuple[Tensor, Tensor]],
    client_ids: Sequence[int],
    n_steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    round_idx: int,
    mode: Mode = "auto",
    max_batched_clients: int | None = None,
    prox_mu: float = 0.0,
) -> CohortResult:
    """Run local SGD for each client of a cohort, starting from ``global_params``.

    ``model`` supplies the architecture only; it is not modified. ``global_params`` is a model
    state (:func:`model_state`); entries it lacks are taken from ``model``. Training runs on
    ``model``'s device and the result lives there. ``max_batched_clients`` bounds how many
    clients one vmap call trains at once (memory); ``None`` means the whole cohort.
    """
    _check_args(client_datas, client_ids, n_steps, batch_size, lr)
    if mode not in ("auto", "batched", "sequential"):
        raise ValueError(f"mode must be 'auto', 'batched' or 'sequential', got {mode!r}")
    device = _model_device(model)
    state = model_state(model)
    for name, value in global_params.items():
        if name not in state:
            raise ValueError(f"global_params has {name!r}, which the model does not have (model keys: {', '.join(state)})")
        if value.shape != state[name].shape:
            raise ValueError(f"global_params[{name!r}] has shape {tuple(value.shape)}, the model expects {tuple(state[name].shape)}")
        state[name] = value.detach().to(device=device, dtype=state[name].dtype)
    indices = [
        minibatch_indices(int(x.shape[0]), n_steps, batch_size, seed, round_idx, int(cid))
        for cid, (x, _) in zip(client_ids, client_datas)
    ]
    batched = mode != "sequential" and supports_batched(model)
    anchor = _proximal_anchor(model, state, prox_mu)
    if not batched:
        return _train_sequential(model, state, client_datas, indices, lr, device, anchor)
    chunk = len(client_ids) if max_batched_clients is None else max(1, int(max_batched_clients))
    parts = [
        _train_batched(model, state, client_datas[i : i + chunk], indices[i : i + chunk], lr, device, anchor)
        for i in range(0, len(client_ids), chunk)
    ]
    if len(parts) == 1:
        return parts[0]
    return CohortResult(
        params={name: torch.cat([p.params[name] for p in parts]) for name in state},
        losses=torch.cat([p.losses for p in parts]),
        mode="batched",
    )


def _proximal_anchor(model: nn.Module, state: dict[str, Tensor], prox_mu: float) -> tuple[float, dict[str, Tensor]] | None:
    """``(mu, global parameters)`` for FedProx, or None without a proximal term."""
    if prox_mu < 0:
        raise ValueError(f"prox_mu must be >= 0, got {prox_mu}")
    if prox_mu == 0:
        return None
    return float(prox_mu), {name: state[name].clone() for name, _ in model.named_parameters()}


def _add_proximal(grads: Sequence[Tensor | None], params: Sequence[Tensor], names: Sequence[str], anchor: tuple[float, dict[str, Tensor]] | None) -> None:
    """FedProx: ``grad += mu * (w - w_global)`` in place, for the parameters in the anchor."""
    if anchor is None:
        return
    mu, ref = anchor
    for g, p, name in zip(grads, params, names):
        if g is not None and name in ref:
            g.add_(p - ref[name], alpha=mu)


def _train_batched(
    model: nn.Module,
    state: dict[str, Tensor],
    client_datas: Sequence[tuple[Tensor, Tensor]],
    indices: Sequence[Tensor],
    lr: float,
    device: torch.device,
    anchor: tuple[float, dict[str, Tensor]] | None = None,
) -> CohortResult:
    k = len(client_datas)
    n_steps = indices[0].shape[0]
    # All clients' samples in one tensor; per-step gather indices offset into it, built up front.
    x_all = torch.cat([x for x, _ in client_datas]).to(device)
    y_all = torch.cat([y for _, y in client_datas]).to(device)
    sizes = torch.tensor([int(x.shape[0]) for x, _ in client_datas])
    offsets = torch.cumsum(sizes, 0) - sizes
    gather = (torch.stack(list(indices), dim=1) + offsets.view(1, k, 1)).to(device)  # (n_steps, k, batch)

    names = list(state)
    params = [state[n].unsqueeze(0).repeat(k, *([1] * state[n].dim())) for n in names]

    def loss_fn(p: tuple[Tensor, ...], x: Tensor, y: Tensor) -> Tensor:
        out = functional_call(model, dict(zip(names, p)), (x,))
        return F.cross_entropy(out, y)

    step = vmap(grad_and_value(loss_fn))
    loss_sum = torch.zeros(k, dtype=torch.float32, device=device)
    was_training = model.training
    model.train()
    try:
        with torch.no_grad():  # grad_and_value ignores the outer no_grad; the updates don't track
            for s in range(n_steps):
                idx = gather[s]
                grads, losses = step(tuple(params), x_all[idx], y_all[idx])
                _add_proximal(grads, params, names, anchor)
                torch._foreach_add_(params, list(grads), alpha=-lr)
                loss_sum += losses.float()
    finally:
        model.train(was_training)
    return CohortResult(params=dict(zip(names, params)), losses=loss_sum / n_steps, mode="batched")


def _train_sequential(
    model: nn.Module,
    state: dict[str, Tensor],
    client_datas: Sequence[tuple[Tensor, Tensor]],
    indices: Sequence[Tensor],
    lr: float,
    device: torch.device,
    anchor: tuple[float, dict[str, Tensor]] | None = None,
) -> CohortResult:
    work = copy.deepcopy(model).to(device)
    named = list(work.named_parameters())
    work.train()
    optimizer = torch.optim.SGD(work.parameters(), lr=lr, momentum=0.0, weight_decay=0.0)
    results: list[dict[str, Tensor]] = []
    losses = torch.zeros(len(client_datas), dtype=torch.float32)
    for i, ((x, y), idx) in enumerate(zip(client_datas, indices)):
        work.load_state_dict(state)
        x, y = x.to(device), y.to(device)
        total = torch.zeros((), dtype=torch.float32, device=device)
        for s in range(idx.shape[0]):
            b = idx[s].to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(work(x[b]), y[b])
            loss.backward()
            _add_proximal([p.grad for _, p in named], [p.detach() for _, p in named], [n for n, _ in named], anchor)
            optimizer.step()
            total += loss.detach().float()
        losses[i] = (total / idx.shape[0]).cpu()
        results.append(model_state(work))
    params = {name: torch.stack([r[name] for r in results]) for name in state}
    return CohortResult(params=params, losses=losses.to(device), mode="sequential")


@torch.no_grad()
def evaluate(model: nn.Module, params: dict[str, Tensor] | None, x: Tensor, y: Tensor, batch_size: int = 1024) -> tuple[float, float]:
    """``(accuracy, mean cross-entropy loss)`` of ``model`` with state ``params`` on ``(x, y)``.

    Runs in eval mode (BatchNorm uses its running statistics) without modifying ``model``;
    ``params=None`` evaluates the model's own state. Accuracy is a fraction in [0, 1].
    """
    if x.shape[0] != y.shape[0] or x.shape[0] == 0:
        raise ValueError(f"need the same, non-zero number of inputs and labels, got {x.shape[0]} and {y.shape[0]}")
    device = _model_device(model)
    state = {} if params is None else {n: v.to(device) for n, v in params.items()}
    was_training = model.training
    model.eval()
    correct = 0
    loss_sum = 0.0
    try:
        for start in range(0, x.shape[0], batch_size):
            xb = x[start : start + batch_size].to(device)
            yb = y[start : start + batch_size].to(device)
            out = functional_call(model, state, (xb,)) if state else model(xb)
            loss_sum += float(F.cross_entropy(out, yb, reduction="sum"))
            correct += int((out.argmax(dim=1) == yb).sum())
    finally:
        model.train(was_training)
    n = int(x.shape[0])
    return correct / n, loss_sum / n
