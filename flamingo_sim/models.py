"""Models by name: small proxies for synthetic data and the paper's torchvision networks.

The proxies ("logreg", "mlp") have no BatchNorm, dropout or buffers, so a whole cohort can be
trained at once with ``torch.func.vmap`` (see :mod:`flamingo_sim.fl.training.trainer`). The
torchvision models ("mobilenet_v2", "shufflenet_v2_x2_0", "resnet34") are built untrained
(``weights=None``) with ``num_classes`` outputs; they contain BatchNorm, whose running
statistics :mod:`flamingo_sim.fl.training.trainer` keeps per client whether it trains a cohort batched
or one client at a time. "resnet34_speech" is FedScale's ResNet-34 for Google Speech spectrograms: the same
residual stages, but a 3x3 stride-1 first convolution over ``C`` input channels (FedScale: one,
1 x 32 x 32) and no max-pool, so a 32 x 32 input reaches the last stage at 4 x 4.
Any other network comes from an import path ``package.module:Factory``, called as
``Factory(input_shape, n_classes)`` and returning an ``nn.Module`` that maps ``(n, *input_shape)``
float32 inputs to ``(n, n_classes)`` logits.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import nn

from flamingo_sim.errors import FlamingoError
from flamingo_sim.rng import derive_seed

__all__ = ["build_model", "check_forward", "MODEL_NAMES", "MLP_HIDDEN_UNITS"]

MLP_HIDDEN_UNITS = 128


def _flat_features(input_shape: tuple[int, ...]) -> int:
    return int(math.prod(input_shape))


def _logreg(input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(_flat_features(input_shape), n_classes))


def _mlp(input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(_flat_features(input_shape), MLP_HIDDEN_UNITS),
        nn.ReLU(),
        nn.Linear(MLP_HIDDEN_UNITS, n_classes),
    )


def _torchvision(arch: str) -> Callable[[tuple[int, ...], int], nn.Module]:
    def build(input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
        if len(input_shape) != 3 or input_shape[0] != 3:
            raise FlamingoError(f"model {arch!r} needs RGB images, input shape (3, H, W); got {tuple(input_shape)}")
        import torchvision.models as tvm

        return getattr(tvm, arch)(weights=None, num_classes=n_classes)

    return build


def _resnet34_speech(input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    if len(input_shape) != 3:
        raise FlamingoError(f"model 'resnet34_speech' needs spectrogram images, input shape (C, H, W); got {tuple(input_shape)}")
    import torchvision.models as tvm

    net = tvm.resnet34(weights=None, num_classes=n_classes)
    net.conv1 = nn.Conv2d(input_shape[0], 64, kernel_size=3, stride=1, padding=1, bias=False)
    nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out", nonlinearity="relu")  # as torchvision initialises conv1
    net.maxpool = nn.Identity()
    return net


_BUILDERS: dict[str, Callable[[tuple[int, ...], int], nn.Module]] = {
    "logreg": _logreg,
    "mlp": _mlp,
    "mobilenet_v2": _torchvision("mobilenet_v2"),
    "shufflenet_v2_x2_0": _torchvision("shufflenet_v2_x2_0"),
    "resnet34": _torchvision("resnet34"),
    "resnet34_speech": _resnet34_speech,
}

MODEL_NAMES: tuple[str, ...] = tuple(_BUILDERS)


def build_model(name: str, input_shape: tuple[int, ...], n_classes: int, seed: int | None = None, search: Sequence[Path] = ()) -> nn.Module:
    """A freshly initialised model ``name`` for inputs of ``input_shape`` and ``n_classes`` classes.

    With ``seed``, the initial weights depend only on ``(seed, "model-init", name)``; torch's
    global generator is left as it was. Without it, torch's global generator is used.
    ``search``: extra folders for an import path's module (the experiment's directory).
    """
    if ":" in name:
        from flamingo_sim.plugins import load_object

        builder = load_object(name, "data.model", kind="model", known=_BUILDERS, search=search)
    elif name in _BUILDERS:
        builder = _BUILDERS[name]
    else:
        raise FlamingoError(f"unknown model {name!r}; known models: {', '.join(MODEL_NAMES)}, or 'package.module:Factory'")
    if n_classes < 1:
        raise FlamingoError(f"model {name!r}: n_classes must be >= 1, got {n_classes}")
    shape = tuple(int(d) for d in input_shape)
    if seed is None:
        return _build(builder, shape, int(n_classes), name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "model-init", name))
        return _build(builder, shape, int(n_classes), name)


def _build(builder: Callable[..., object], shape: tuple[int, ...], n_classes: int, name: str) -> nn.Module:
    if name in _BUILDERS:
        return builder(shape, n_classes)  # type: ignore[return-value]
    try:
        model = builder(shape, n_classes)
    except Exception as exc:  # a user's factory: any failure is one line naming it
        raise FlamingoError(f"model {name!r}: calling it with (input_shape={shape}, n_classes={n_classes}) failed ({type(exc).__name__}: {exc})") from None
    if not isinstance(model, nn.Module):
        raise FlamingoError(f"model {name!r}: the factory returned {type(model).__name__}, not a torch.nn.Module")
    return model


def check_forward(model: nn.Module, name: str, x: torch.Tensor, n_classes: int) -> None:
    """One forward pass on ``x`` (a few samples), in eval mode without gradients (nothing in the model
    changes), so that a network that does not fit the data fails in one line before any run starts."""
    shape = tuple(int(d) for d in x.shape)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(x)
    except Exception as exc:  # a user's network: any failure is one line naming it and the shapes
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise FlamingoError(f"model {name!r} fails on a batch of shape {shape} (input_shape {shape[1:]}, {n_classes} classes): "
                            f"{type(exc).__name__}: {text}") from None
    finally:
        model.train(was_training)
    got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
    if got != (shape[0], n_classes):
        raise FlamingoError(f"model {name!r} maps a batch of shape {shape} to {got}; expected logits of shape {(shape[0], n_classes)}")
