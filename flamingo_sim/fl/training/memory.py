"""How many clients fit in one vmap chunk: a per-client memory estimate and a default budget.

The estimate for one client training on minibatches of ``batch_size``:

- its state four times over (parameters, gradients, the update's temporaries, buffers);
- its activations twice over (kept for the backward pass, and their gradients): the output
  sizes of every leaf module for one sample, measured by a forward pass on torch's ``meta``
  device (no memory, no arithmetic), times ``batch_size``.

It is an estimate (allocator slack and convolution workspaces come on top), which is why the
default budget keeps a margin: 80 % of the GPU's free memory, half of the available RAM.
"""

from __future__ import annotations

import copy
import os

import torch
from torch import nn

__all__ = ["per_client_bytes", "activation_bytes_per_sample", "default_budget_bytes", "total_memory_bytes"]


def activation_bytes_per_sample(model: nn.Module, input_shape: tuple[int, ...]) -> int:
    """Bytes of all leaf-module outputs for one sample of ``input_shape`` (in the model's dtype)."""
    shape = tuple(int(d) for d in input_shape)
    key = (type(model).__name__, _dtype(model), tuple((n, tuple(v.shape)) for n, v in model.state_dict().items()), shape)
    if key not in _CACHE:
        _CACHE[key] = _measure(model, shape)
    return _CACHE[key]


def _measure(model: nn.Module, input_shape: tuple[int, ...]) -> int:
    try:
        dtype = _dtype(model)
        meta = copy.deepcopy(model).to("meta")
        meta.train()
        sizes: list[int] = []
        hooks = [m.register_forward_hook(lambda _m, _i, out: sizes.append(_numel(out))) for m in meta.modules() if not list(m.children())]
        with torch.no_grad():
            meta(torch.empty((1, *input_shape), device="meta", dtype=dtype))
        for h in hooks:
            h.remove()
        return dtype.itemsize * sum(sizes)
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        return 4 * 64 * int(torch.Size(input_shape).numel())  # a model meta can't run: a coarse guess


_CACHE: dict[tuple, int] = {}  # (architecture, input shape) -> bytes


def _dtype(model: nn.Module) -> torch.dtype:
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)


def _numel(out: object) -> int:
    if isinstance(out, torch.Tensor):
        return int(out.numel())
    if isinstance(out, (tuple, list)):
        return sum(_numel(o) for o in out)
    return 0


def per_client_bytes(model: nn.Module, input_shape: tuple[int, ...], batch_size: int) -> int:
    """Estimated bytes one client needs inside a vmap chunk (see the module docstring)."""
    state = sum(v.numel() * v.element_size() for v in model.state_dict().values())
    return int(4 * state + 2 * batch_size * activation_bytes_per_sample(model, input_shape))


def total_memory_bytes(device: torch.device) -> int | None:
    """All the memory of ``device``: a CUDA GPU's, or the machine's RAM for the CPU; None where it cannot be read."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[1])
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def default_budget_bytes(device: torch.device) -> int:
    """80 % of the free memory of a CUDA ``device``; half the available RAM for the CPU."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(0.8 * free)
    try:
        return int(0.5 * os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 4 << 30
