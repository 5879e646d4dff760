"""Run a flamingo-sim experiment on FedScale itself: its aggregator, executors and TorchClient.

This package is the only code that imports FedScale, and it does so lazily (:func:`load_fedscale`),
guarding FedScale 1.0's traps on the way:

- ``fedscale.cloud.config_parser`` parses ``sys.argv`` when first imported: the host
  program's arguments are hidden from it, and every setting is then written onto its
  module-level ``args`` (:func:`fedscale_args`), which its loggers and model setup read;
- torchvision is imported before FedScale (with real TensorFlow, the other order can segfault);
- TensorFlow and wandb are imported by FedScale at module level but not needed by its PyTorch
  path (wandb only with a token, which we never set): when either is not installed, a
  placeholder module stands in for it, whose every use raises an error naming the package;
- a round in which nobody may train would leave FedScale's aggregator waiting forever for
  uploads: such rounds are settled without the executors (:class:`FlamingoAggregator`);
- Oort selection (which needs ``numpy<2``) is not offered: selection is flamingo-sim's.

How the engines share the round rules: the aggregator subclass owns a native
:class:`~flamingo_sim.fl.sim.simulation.Simulation` and calls its :meth:`plan_round` from FedScale's
``select_participants`` / ``tictak_client_tasks`` hooks (who is online by our traces and energy
budget, the policy's execution choices, durations, energy, who is dropped, the K fastest), so
the virtual clock, the online set and the energy drawn equal the native engine's by
construction. FedScale's executors then really train the kept clients with a
:class:`TorchClient` subclass (plain SGD at the experiment's learning rate, on the same
minibatches the native engine draws), FedScale aggregates (FedAvg weighted by samples, like the
native engine; ``weighted=False`` gives FedScale's unweighted mean), and
:meth:`~flamingo_sim.fl.sim.simulation.Simulation.finish_round` advances batteries and writes the same
metrics row as the native engine.

Two ways to run (:func:`run_fedscale`):

- in-process (``executors=0``): FedScale's aggregator and one executor in this process, the
  executor's gRPC stub replaced by direct calls; no ports, deterministic;
- distributed (``executors=N``): the aggregator serves gRPC on 127.0.0.1 on a free port and N
  executor processes (``python -m flamingo_sim.integrations.fedscale executor ...``) connect
  to it; every process is ended on exit, error or Ctrl-C.

On several hosts: call :func:`run_distributed` with ``spawn=False`` and ``ps_ip`` set to an
address the other hosts reach (and a fixed ``ps_port``), then start on each host, from a
checkout holding the same experiment, traces and profiles, the command
:func:`executor_command` gives (``--ps-ip``/``--ps-port`` of the aggregator, ``--rank`` 1..N).
FedScale's gRPC is unauthenticated and carries pickles: use it on a trusted network only.

Layout (every name below is importable from this package, as before the split):

- :mod:`.loader`: the import guard (``load_fedscale``, ``fedscale_available``,
  ``FedScaleUnavailable``, ``INSTALL_HINT``, the placeholders);
- :mod:`.settings`: ``fedscale_args``, FedScale's settings from an experiment config;
- :mod:`.executor`, :mod:`.aggregator`: the FedScale subclasses, built on first use by
  :mod:`.classes` (``FlamingoTorchClient``, ``FlamingoExecutor``, ``FlamingoAggregator``,
  reached here through the module ``__getattr__`` so that importing this package never
  imports FedScale);
- :mod:`.in_process`, :mod:`.distributed`: the drivers (``run_in_process``;
  ``run_distributed``, ``executor_command``, and the executor process ``main``, which
  ``python -m flamingo_sim.integrations.fedscale`` runs); :func:`run_fedscale` picks one;
- :mod:`.engine`: ``FedScaleEngine``, the ``fedscale`` engine of ``flamingo-sim run``.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any, Sequence

from flamingo_sim.errors import FlamingoError
from flamingo_sim.fl.runner.callbacks import CallbackList
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.integrations.fedscale.classes import CLASS_NAMES
from flamingo_sim.integrations.fedscale.classes import fedscale_classes as _classes  # noqa: F401  the old private name
from flamingo_sim.integrations.fedscale.distributed import executor_command, main, run_distributed
from flamingo_sim.integrations.fedscale.in_process import run_in_process
from flamingo_sim.integrations.fedscale.loader import (  # noqa: F401  REQUIRED etc.: importable here as before
    INSTALL_HINT,
    PLACEHOLDERS,
    REQUIRED,
    FedScaleUnavailable,
    _placeholder_module,
    fedscale_available,
    load_fedscale,
)
from flamingo_sim.integrations.fedscale.settings import fedscale_args

__all__ = [
    "INSTALL_HINT",
    "FedScaleUnavailable",
    "fedscale_available",
    "load_fedscale",
    "fedscale_args",
    "run_fedscale",
    "run_in_process",
    "run_distributed",
    "executor_command",
    "main",
]


def run_fedscale(
    sim: Any,
    *,
    experiment: str | Path | None = None,
    work_dir: str | Path | None = None,
    executors: int = 0,
    overrides: Sequence[str] = (),
    weighted: bool = True,
    callbacks: CallbackList | None = None,
) -> list[RoundRecord]:
    """Run one (policy, seed) on FedScale: in-process if ``executors`` is 0, else distributed.

    ``callbacks`` get ``on_round_begin``/``on_round_end`` around every round (one that returns
    True ends the run after that round); returns the rounds' records.
    """
    with contextlib.ExitStack() as stack:
        if work_dir is None:
            work_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="flamingo-fedscale-"))
        if executors == 0:
            return run_in_process(sim, work_dir=work_dir, weighted=weighted, callbacks=callbacks)
        if experiment is None:
            raise FlamingoError("the distributed FedScale engine needs the experiment file (its executors load it)")
        return run_distributed(
            sim, experiment=experiment, work_dir=work_dir, n_executors=executors, overrides=overrides, weighted=weighted, callbacks=callbacks
        )


def __getattr__(name: str) -> Any:  # FlamingoAggregator etc. on first use, importing FedScale then
    if name in CLASS_NAMES:
        return getattr(_classes(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
