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
        "use_cuda": False,
        "cuda_device": None,
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


def rank_args(args: argparse.Namespace, rank: int) -> argparse.Namespace:
    """A copy of ``args`` for the executor of rank ``rank``."""
    out = argparse.Namespace(**vars(args))
    out.this_rank = rank
    return out
