"""The engine's reading of two device limits: heat (``devices.thermal``) and memory (``devices.memory``).

:func:`device_models` turns the experiment's ``devices`` section into the pricing stage's models
(:class:`~flamingo_sim.devices.pricing.HeatModel`, :class:`~flamingo_sim.devices.pricing.MemoryFit`);
:class:`~flamingo_sim.devices.pricing.DevicePricing` prices every task under them, in one pass with the
policy's choice and the radio, and books each phone's heat. What stays here is what needs the FL side:
the experiment's keys, and the training's memory from the network the run trains
(:func:`training_memory_bytes`).
"""

from __future__ import annotations

import numpy as np
import torch

from flamingo_sim.devices.memory import MEASURED_OVER_ESTIMATE
from flamingo_sim.devices.pricing import OUT_OF_MEMORY, HeatModel, MemoryFit
from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import DevicesConfig
from flamingo_sim.fl.training.memory import activation_bytes_per_sample

__all__ = ["device_models", "OUT_OF_MEMORY", "training_memory_bytes", "trained_input_size", "NETWORKS"]
#: Profile model name -> the network :func:`flamingo_sim.models.build_model` builds for it (others: the same name).
NETWORKS = {"shufflenet_v2_x2": "shufflenet_v2_x2_0"}


def trained_input_size(model: str) -> int:
    """The input side (px) ``model``'s shipped profiles were priced at (224, ResNet-34's speech spectrograms 32)."""
    from flamingo_sim.devices.calibrate import DNN_MODELS

    return int(DNN_MODELS[model].input_size[-1]) if model in DNN_MODELS else 224


def training_memory_bytes(model: str, input_size: int, n_classes: int, calibrated: bool = False) -> tuple[float, float]:
    """``(fixed, per_sample)`` bytes of one client's training of ``model`` on 3 x ``input_size``^2
    inputs: the state four times over, the activations twice per sample
    (:func:`flamingo_sim.fl.training.memory.per_client_bytes` = fixed + per_sample x batch);
    ``calibrated``: both times the measured peak over this estimate at the model's operating point
    (:data:`~flamingo_sim.devices.memory.MEASURED_OVER_ESTIMATE`; 1 for a model not measured)."""
    from flamingo_sim.errors import FlamingoError
    from flamingo_sim.models import build_model

    shape = (3, int(input_size), int(input_size))
    try:
        with torch.device("meta"):
            net = build_model(NETWORKS.get(model, model), shape, n_classes)
    except FlamingoError as exc:
        raise ConfigError(f"devices.memory: cannot estimate the training memory of model {model!r}: {exc}") from None
    state = sum(v.numel() * v.element_size() for v in net.state_dict().values())
    scale = MEASURED_OVER_ESTIMATE.get(model, 1.0) if calibrated else 1.0
    return float(4 * state) * scale, float(2 * activation_bytes_per_sample(net, shape)) * scale


def device_models(cfg: DevicesConfig, profiles: ProfileSet, batch_size: int, n_classes: int, source: str = "the phone catalogue",
                  app_state: str = "foreground_service") -> tuple[HeatModel | None, MemoryFit | None]:
    """The heat and memory models ``cfg`` turns on (None: off), for the phones of ``profiles``."""
    heat = memory = None
    if cfg.thermal != "none":
        heat = HeatModel.of(profiles, cfg.time_constant_factor, cfg.throttle_threshold_c, source)
    if cfg.memory != "none":
        phones = [prof.phone for prof in profiles.profiles]
        lacking = [p.name for p in phones if p.memory is None]
        if lacking:
            raise ConfigError(f"{source}: devices.memory: phone {lacking[0]!r} has no memory entry (ram_gb)")
        size = trained_input_size(profiles.model) if cfg.input_size is None else cfg.input_size
        fixed, per_sample = training_memory_bytes(profiles.model, size, n_classes, calibrated=True)
        limit = np.array([p.memory.limit_bytes(app_state) for p in phones if p.memory is not None]) * cfg.memory_limit_factor
        memory = MemoryFit(int(batch_size), limit, fixed, per_sample, drop=cfg.memory == "drop")
    return heat, memory
