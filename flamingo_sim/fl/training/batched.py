"""The fast strategies of :mod:`flamingo_sim.fl.training.trainer`: a cohort trained as one batch.

- :func:`train_vmap`: every client's parameters AND buffers (BatchNorm running statistics,
  ``num_batches_tracked``) are stacked along a leading client dimension and one
  ``vmap(grad_and_value(loss))`` call, with ``randomness="different"`` (each client its own
  dropout mask), computes every client's gradient and updates every client's buffers per
  step. Each client's BatchNorm normalises with its own minibatch's statistics, exactly as
  in the per-client loop. On CUDA the step can be captured once as a CUDA graph
  (:class:`GraphedStep`) and replayed, which removes the per-kernel launch cost that
  dominates at batch 16.
- :func:`train_streams`: ``n`` copies of the model train clients round-robin, each copy on
  its own CUDA stream (on the CPU the copies run one after another: same numbers, no gain).
  Wins over vmap where vmap turns convolutions into slow grouped ones (depthwise networks at
  large images). ``channels_last``: the copies and their minibatches in NHWC memory order
  (cuDNN's faster convolution kernels on tensor cores; the same arithmetic up to float rounding).

Both return ``(stacked state, per-client mean loss)`` in the client order they were given.

FedProx (``prox_mu > 0``, every strategy and the CUDA graph alike): each step's gradient of a
parameter gains ``prox_mu * (w - w_global)`` (:func:`add_proximal`), ``w_global`` being the
state the cohort started from; the reported loss is the task loss alone.

Under bfloat16 autocast (``precision: bf16``) the vmapped step runs BatchNorm in float32
(:func:`norms_in_float32`): vmap's batch rule for BatchNorm refuses a bfloat16 input beside
float32 weights and running statistics, which the per-client loop accepts (and computes in
float32 inside the kernel); the upcast is exact, and the next layer casts back to bfloat16.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad_and_value, vmap

__all__ = ["train_vmap", "train_streams", "train_one_client", "model_copy", "GraphedStep", "make_vmap_step", "add_proximal", "norms_in_float32"]


def _input_to_float32(_module: nn.Module, args: tuple) -> tuple | None:
    x = args[0] if args else None
    if isinstance(x, Tensor) and x.dtype in (torch.bfloat16, torch.float16):
        return (x.float(), *args[1:])
    return None


@contextlib.contextmanager
def norms_in_float32(model: nn.Module, device_type: str):
    """While autocast is on for ``device_type``, feed ``model``'s BatchNorm layers float32 inputs
    (a forward pre-hook each, removed on exit); nothing changes when autocast is off."""
    if not torch.is_autocast_enabled(device_type):
        yield
        return
    handles = [m.register_forward_pre_hook(_input_to_float32) for m in model.modules() if isinstance(m, nn.modules.batchnorm._NormBase)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()

StepFn = Callable[[tuple[Tensor, ...], tuple[Tensor, ...], Tensor, Tensor], tuple[tuple[Tensor, ...], Tensor]]


def make_vmap_step(model: nn.Module, param_names: Sequence[str], buffer_names: Sequence[str]) -> StepFn:
    """``step(params, buffers, x, y) -> (grads, losses)`` over a leading client dimension.

    ``buffers`` are updated in place (BatchNorm's running statistics in train mode).
    """
    p_names, b_names = list(param_names), list(buffer_names)

    def loss_fn(p: tuple[Tensor, ...], b: tuple[Tensor, ...], x: Tensor, y: Tensor) -> Tensor:
        state = dict(zip(p_names, p))
        state.update(zip(b_names, b))
        return F.cross_entropy(functional_call(model, state, (x,)), y)

    return vmap(grad_and_value(loss_fn), randomness="different")


def add_proximal(grads: Sequence[Tensor], params: Sequence[Tensor], anchor: Sequence[Tensor], mu: float) -> None:
    """FedProx: ``grads[i] += mu * (params[i] - anchor[i])`` in place (``anchor`` broadcasts over clients)."""
    if mu:
        torch._foreach_add_(list(grads), torch._foreach_sub(list(params), list(anchor)), alpha=mu)


class GraphedStep:
    """One vmapped SGD step captured as a CUDA graph for fixed shapes, replayed per step.

    The graph reads the minibatch from static input tensors and updates static parameter and
    buffer tensors in place; :meth:`load` copies a chunk's starting state in, :meth:`run` copies
    a minibatch in and replays, and :attr:`params` / :attr:`buffers` hold the result. With
    ``prox_mu > 0`` the step adds FedProx's term towards a static copy of the starting
    parameters (:attr:`anchor`, loaded with them).
    """

    def __init__(
        self, step: StepFn, params: list[Tensor], buffers: list[Tensor], x: Tensor, y: Tensor, lr: float, prox_mu: float = 0.0
    ) -> None:
        self.params = [p.clone() for p in params]
        self.buffers = [b.clone() for b in buffers]
        self.anchor = [p.clone() for p in params] if prox_mu else []
        self.x, self.y = x.clone(), y.clone()
        start_p = [p.clone() for p in self.params]
        start_b = [b.clone() for b in self.buffers]

        def one_step() -> Tensor:
            grads, losses = step(tuple(self.params), tuple(self.buffers), self.x, self.y)
            add_proximal(grads, self.params, self.anchor, prox_mu)
            torch._foreach_add_(self.params, list(grads), alpha=-lr)
            return losses.float()

        side = torch.cuda.Stream(device=x.device)
        side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(side):
            for _ in range(2):  # warm-up outside capture (cuDNN/cuBLAS autotuning, allocator)
                one_step()
        torch.cuda.current_stream(x.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.losses = one_step()
        self.load(start_p, start_b)  # warm-up steps changed the state: put the start back

    def load(self, params: Sequence[Tensor], buffers: Sequence[Tensor]) -> None:
        torch._foreach_copy_(self.params, list(params))
        if self.anchor:
            torch._foreach_copy_(self.anchor, list(params))
        if self.buffers:
            torch._foreach_copy_(self.buffers, list(buffers))

    def run(self, x: Tensor, y: Tensor) -> Tensor:
        self.x.copy_(x)
        self.y.copy_(y)
        self.graph.replay()
        return self.losses


def train_vmap(
    model: nn.Module,
    state: dict[str, Tensor],
    x_all: Tensor,
    y_all: Tensor,
    gather: Tensor,
    lr: float,
    graphs: dict[tuple, GraphedStep] | None = None,
    prox_mu: float = 0.0,
) -> tuple[dict[str, Tensor], Tensor]:
    """Train ``k`` clients at once; ``gather`` is ``(n_steps, k, batch)`` indices into ``x_all``.

    With ``graphs`` (a cache dict, CUDA only), the step is captured once per shape and replayed.
    ``prox_mu``: FedProx's coefficient, towards ``state``'s parameters.
    """
    n_steps, k = int(gather.shape[0]), int(gather.shape[1])
    param_set = {name for name, _ in model.named_parameters()}
    p_names = [n for n in state if n in param_set]
    b_names = [n for n in state if n not in param_set]
    params = [state[n].unsqueeze(0).repeat(k, *([1] * state[n].dim())) for n in p_names]
    buffers = [state[n].unsqueeze(0).repeat(k, *([1] * state[n].dim())) for n in b_names]
    step = make_vmap_step(model, p_names, b_names)
    loss_sum = torch.zeros(k, dtype=torch.float32, device=x_all.device)
    was_training = model.training
    model.train()
    try:
        with torch.no_grad(), norms_in_float32(model, x_all.device.type):  # grad_and_value ignores the outer no_grad
            if graphs is not None:
                key = (k, tuple(p_names), tuple(gather.shape[2:]), tuple(x_all.shape[1:]), x_all.dtype, lr, prox_mu)
                graphed = graphs.get(key)
                if graphed is None:
                    idx = gather[0]
                    graphed = graphs[key] = GraphedStep(step, params, buffers, x_all[idx], y_all[idx], lr, prox_mu)
                graphed.load(params, buffers)
                for s in range(n_steps):
                    idx = gather[s]
                    loss_sum += graphed.run(x_all[idx], y_all[idx])
                params = [p.clone() for p in graphed.params]
                buffers = [b.clone() for b in graphed.buffers]
            else:
                anchor = [state[n] for n in p_names]
                for s in range(n_steps):
                    idx = gather[s]
                    grads, losses = step(tuple(params), tuple(buffers), x_all[idx], y_all[idx])
                    add_proximal(grads, params, anchor, prox_mu)
                    torch._foreach_add_(params, list(grads), alpha=-lr)
                    loss_sum += losses.float()
    finally:
        model.train(was_training)
    out = dict(zip(p_names, params))
    out.update(zip(b_names, buffers))
    return {n: out[n] for n in state}, loss_sum / n_steps


def _stream(device: torch.device) -> torch.cuda.Stream | None:
    return torch.cuda.Stream(device=device) if device.type == "cuda" else None


def train_streams(
    model: nn.Module,
    state: dict[str, Tensor],
    client_datas: Sequence[tuple[Tensor, Tensor]],
    indices: Sequence[Tensor],
    lr: float,
    device: torch.device,
    n_streams: int,
    prox_mu: float = 0.0,
    channels_last: bool = False,
) -> tuple[dict[str, Tensor], Tensor]:
    """Per-client SGD on ``n_streams`` model copies, client ``i`` on copy ``i % n_streams`` (``channels_last``: in NHWC order)."""
    n = max(1, min(int(n_streams), len(client_datas)))
    copies = [model_copy(model, device, channels_last) for _ in range(n)]
    streams = [_stream(device) for _ in range(n)]
    cuda_streams = [s for s in streams if s is not None]
    for s in cuda_streams:
        s.wait_stream(torch.cuda.current_stream(device))
    results: list[dict[str, Tensor] | None] = [None] * len(client_datas)
    losses: list[Tensor | None] = [None] * len(client_datas)
    for i, ((x, y), idx) in enumerate(zip(client_datas, indices)):
        j = i % n
        ctx = torch.cuda.stream(streams[j]) if streams[j] is not None else contextlib.nullcontext()
        with ctx:
            results[i], losses[i] = train_one_client(copies[j], state, x, y, idx, lr, device, prox_mu, channels_last)
    for s in cuda_streams:
        torch.cuda.current_stream(device).wait_stream(s)
    stacked = {name: torch.stack([r[name] for r in results]) for name in state}  # type: ignore[index]
    return stacked, torch.stack(losses)  # type: ignore[arg-type]


def model_copy(model: nn.Module, device: torch.device, channels_last: bool = False) -> nn.Module:
    """A training copy of ``model`` on ``device`` (``channels_last``: its 4-d weights in NHWC memory order)."""
    work = copy.deepcopy(model).to(device).train()
    return work.to(memory_format=torch.channels_last) if channels_last else work


def train_one_client(
    work: nn.Module, state: dict[str, Tensor], x: Tensor, y: Tensor, idx: Tensor, lr: float, device: torch.device, prox_mu: float = 0.0,
    channels_last: bool = False,
) -> tuple[dict[str, Tensor], Tensor]:
    """Plain SGD (no momentum, no weight decay) of one client on ``work``: the reference.

    ``prox_mu``: FedProx's coefficient, towards ``state``'s parameters; ``channels_last``: each
    4-d minibatch in NHWC memory order (``work`` made by :func:`model_copy` with it; loading the
    state keeps the weights' order). The state returned is in the usual (contiguous) order.
    """
    work.load_state_dict(state)
    x, y, idx = x.to(device, non_blocking=True), y.to(device, non_blocking=True), idx.to(device, non_blocking=True)
    named = list(work.named_parameters())
    params = [p for _, p in named]
    anchor = {name: state[name] for name, _ in named}
    total = torch.zeros((), dtype=torch.float32, device=device)
    for s in range(idx.shape[0]):
        b = idx[s]
        for p in params:
            p.grad = None
        xb = x[b]
        if channels_last and xb.dim() == 4:
            xb = xb.contiguous(memory_format=torch.channels_last)
        loss = F.cross_entropy(work(xb), y[b])
        loss.backward()
        with torch.no_grad():
            live: list[Tensor] = []
            grads: list[Tensor] = []
            ref: list[Tensor] = []
            for name, p in named:
                if p.grad is not None:
                    live.append(p)
                    grads.append(p.grad)
                    ref.append(anchor[name])
            add_proximal(grads, live, ref, prox_mu)
            torch._foreach_add_(live, grads, alpha=-lr)
        total += loss.detach().float()
    order = torch.contiguous_format if channels_last else torch.preserve_format
    return {name: value.detach().clone(memory_format=order) for name, value in work.state_dict().items()}, total / idx.shape[0]
