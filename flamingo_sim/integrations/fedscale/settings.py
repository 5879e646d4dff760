"""FedScale's settings from an experiment config (:func:`fedscale_args`), and one per executor rank.

FedScale's loggers and model setup read the module-level ``fedscale.cloud.config_parser.args``,
so the settings are written there, not into a copy.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from flamingo_sim.integrations.fedscale.loader import load_fedscale


def fedscale_args(
    cfg: Any,
    *,
    log_dir: str | Path,
    ps_ip: str = "127.0.0.1",
    ps_port: int = 0,
    this_rank: int = 0,
    num_executors: int = 1,
    job_name: str = "flamingo",
) -> argparse.Namespace:
    """Set FedScale's module-level ``args`` from an experiment config and return them.

    FedScale's loggers and model setup read ``fedscale.cloud.config_parser.args`` directly, so
    the settings go there (not into a copy). Its own lr decay, momentum and weight decay are
    switched off: training is plain SGD at ``cfg.fl.lr`` as the experiment says.
    """
    fs = load_fedscale()
    a = fs.parser.args
    fl = cfg.fl
    settings = {
        "job_name": job_name,
        "log_path": str(log_dir),
        "time_stamp": "run",
        "wandb_token": "",
        "ps_ip": ps_ip,
        "ps_port": str(ps_port),
        "this_rank": int(this_rank),
        "num_executors": int(num_executors),
        "executor_configs": f"{ps_ip}:[{int(num_executors)}]",
        "experiment_mode": fs.commons.SIMULATION_MODE,
        "engine": fs.commons.PYTORCH,
        "use_cuda": False,  # set per executor rank by rank_args, from fl.device
        "cuda_device": None,
        "flamingo_device": fl.device,
        "task": "cv",
        "model_zoo": "torchcv",
        "model": cfg.model,  # a label only: the executors get our model, not one from FedScale's zoo
        "data_set": cfg.data.name,
        "data_map_file": None,
        "device_conf_file": str(Path(log_dir) / "no-device-conf"),  # our profiles price tasks
        "device_avail_file": None,  # our traces decide availability
        "sample_mode": "random",
        "filter_less": 0,
        "filter_more": 1e15,
        "num_participants": fl.participants_per_round,
        "overcommitment": fl.overcommit,
        "rounds": fl.rounds if fl.rounds is not None else 10**9,  # null: horizon_h ends the run (sim.is_done)
        "local_steps": fl.local_steps,
        "batch_size": fl.batch_size,
        "learning_rate": fl.lr,
        "min_learning_rate": fl.lr,
        "decay_factor": 1.0,
        "decay_round": 1e12,
        "gradient_policy": None,
        "eval_interval": 10**9,
        "num_loaders": 0,
        "save_checkpoint": False,
    }
    for key, value in settings.items():
        setattr(a, key, value)
    return a


def executor_device(spec: str, rank: int, n_gpus: int) -> str:
    """Where the executor of rank ``rank`` (1..N) trains, for ``fl.device`` = ``spec``.

    ``cpu`` (or ``auto`` with no GPU): the CPU. ``cuda:K``: every executor on GPU K.
    ``cuda`` or ``auto`` with GPUs: one GPU per executor, round-robin (rank 1 on cuda:0,
    rank 2 on cuda:1, ...), so a machine with several GPUs runs one executor per GPU.
    """
    text = str(spec).strip().lower()
    if text == "cpu" or (text == "auto" and n_gpus == 0):
        return "cpu"
    if text.startswith("cuda:"):
        return text
    if n_gpus == 0:
        from flamingo_sim.errors import ConfigError

        raise ConfigError(f"fl.device: {spec!r} asked for a CUDA GPU but torch sees none; use --device cpu")
    return f"cuda:{(max(int(rank), 1) - 1) % n_gpus}"


def rank_args(args: argparse.Namespace, rank: int) -> argparse.Namespace:
    """A copy of ``args`` for the executor of rank ``rank``, with its own ``cuda_device``."""
    import torch

    out = argparse.Namespace(**vars(args))
    out.this_rank = rank
    device = executor_device(getattr(args, "flamingo_device", "cpu"), rank, torch.cuda.device_count() if torch.cuda.is_available() else 0)
    out.use_cuda = device != "cpu"
    out.cuda_device = torch.device(device) if out.use_cuda else None
    return out
