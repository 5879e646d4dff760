"""Run a flamingo-sim experiment on FedScale itself: its aggregator, executors and TorchClient.

This is the only module that imports FedScale, and it does so lazily (:func:`load_fedscale`),
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
:class:`~flamingo_sim.fl.engine.Simulation` and calls its :meth:`plan_round` from FedScale's
``select_participants`` / ``tictak_client_tasks`` hooks (who is online by our traces and energy
budget, the policy's execution choices, durations, energy, who is dropped, the K fastest), so
the virtual clock, the online set and the energy drawn equal the native engine's by
construction. FedScale's executors then really train the kept clients with a
:class:`TorchClient` subclass (plain SGD at the experiment's learning rate, on the same
minibatches the native engine draws), FedScale aggregates (FedAvg weighted by samples, like the
native engine; ``weighted=False`` gives FedScale's unweighted mean), and
:meth:`~flamingo_sim.fl.engine.Simulation.finish_round` advances batteries and writes the same
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
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import importlib.util
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from flamingo_sim.errors import FlamingoError

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

INSTALL_HINT = "pip install 'flamingo-sim[fedscale]'"
#: Modules FedScale's PyTorch path really needs (import name -> pip package).
REQUIRED = {"grpc": "grpcio", "google.protobuf": "protobuf", "overrides": "overrides", "tensorboard": "tensorboard"}
#: Modules FedScale imports at module level but whose use we never reach: placeholders if absent.
PLACEHOLDERS = {"tensorflow": "tensorflow-cpu", "wandb": "wandb"}


class FedScaleUnavailable(FlamingoError):
    """FedScale or one of its runtime dependencies is not installed."""


def _missing_modules() -> list[str]:
    missing = []
    if importlib.util.find_spec("fedscale") is None:
        missing.append("fedscale")
    for mod, pkg in REQUIRED.items():
        try:
            found = importlib.util.find_spec(mod) is not None
        except ModuleNotFoundError:  # a parent package is absent
            found = False
        if not found:
            missing.append(pkg)
    return missing


def fedscale_available() -> bool:
    """Whether :func:`load_fedscale` can succeed (FedScale and its runtime dependencies present)."""
    return not _missing_modules()


# -- placeholders for modules FedScale imports but its PyTorch path never uses --------------------
class _Absent(type):
    """A stand-in class: any attribute is another stand-in (so it can be subclassed or named in
    annotations at import time); calling one raises an error naming the missing package."""

    _package = "?"

    def __getattr__(cls, attr: str) -> "_Absent":
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent(f"{cls.__name__}.{attr}", (), {"_package": cls._package})

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise ModuleNotFoundError(
            f"{cls.__name__} needs the package {cls._package!r}, which is not installed; "
            f"flamingo-sim's FedScale path does not use it (pip install {cls._package} to use it anyway)"
        )


def _placeholder_module(name: str, package: str) -> types.ModuleType:
    mod = types.ModuleType(name, f"flamingo-sim placeholder: {package} is not installed")
    mod.__dict__["__flamingo_placeholder__"] = True

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent(f"{name}.{attr}", (), {"_package": package})

    mod.__dict__["__getattr__"] = __getattr__
    return mod


def _install_placeholders() -> list[str]:
    installed = []
    for name, package in PLACEHOLDERS.items():
        if name in sys.modules:
            continue
        if importlib.util.find_spec(name) is None:
            if name == "tensorflow":
                # TensorBoard uses real TensorFlow when `import tensorflow` works, else its own
                # stub: make it settle on the stub before the placeholder exists.
                from tensorboard.compat import tf as tensorboard_tf

                getattr(tensorboard_tf, "io")
            sys.modules[name] = _placeholder_module(name, package)
            installed.append(name)
    return installed


_FS: types.SimpleNamespace | None = None
_LOCK = threading.Lock()


def load_fedscale() -> types.SimpleNamespace:
    """Import FedScale's runtime once, with every trap guarded; returns its pieces by name.

    Raises :class:`FedScaleUnavailable` (with the install command) when something is missing.
    """
    global _FS
    with _LOCK:
        if _FS is not None:
            return _FS
        missing = _missing_modules()
        if missing:
            raise FedScaleUnavailable(
                f"the FedScale engine needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                f"not installed: {INSTALL_HINT}"
            )
        import torchvision  # noqa: F401  before FedScale: with real TensorFlow the other order can segfault

        placeholders = _install_placeholders()
        saved_argv = sys.argv
        sys.argv = sys.argv[:1]  # config_parser parses sys.argv at import
        try:
            with _quiet_root_logging():
                parser = importlib.import_module("fedscale.cloud.config_parser")
                commons = importlib.import_module("fedscale.cloud.commons")
                agg_mod = importlib.import_module("fedscale.cloud.aggregation.aggregator")
                exe_mod = importlib.import_module("fedscale.cloud.execution.executor")
                torch_client = importlib.import_module("fedscale.cloud.execution.torch_client")
                adapter = importlib.import_module("fedscale.cloud.internal.torch_model_adapter")
                pb2 = importlib.import_module("fedscale.cloud.channels.job_api_pb2")
                agg_logger = importlib.import_module("fedscale.cloud.logger.aggregator_logging")
        except ImportError as exc:
            raise FedScaleUnavailable(f"FedScale could not be imported ({exc}): {INSTALL_HINT}") from exc
        finally:
            sys.argv = saved_argv
        _FS = types.SimpleNamespace(
            parser=parser,
            commons=commons,
            Aggregator=agg_mod.Aggregator,
            Executor=exe_mod.Executor,
            TorchClient=torch_client.TorchClient,
            TorchModelAdapter=adapter.TorchModelAdapter,
            pb2=pb2,
            agg_logger=agg_logger,
            placeholders=tuple(placeholders),
        )
        return _FS


@contextlib.contextmanager
def _quiet_root_logging() -> Iterator[None]:
    """Keep FedScale's ``logging.basicConfig`` from taking over the host's root logger.

    FedScale configures the root logger (a log file and stderr at INFO) when its aggregator or
    executor is built. With a handler already present ``basicConfig`` does nothing; ours is
    removed afterwards, so FedScale's INFO chatter falls below the root's default level.
    """
    root = logging.getLogger()
    handler = logging.NullHandler()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


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
        "rounds": fl.rounds,
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


def _rank_args(args: argparse.Namespace, rank: int) -> argparse.Namespace:
    out = argparse.Namespace(**vars(args))
    out.this_rank = rank
    return out


# -- FedScale subclasses (built once FedScale is importable) ---------------------------------------
_CLASSES: types.SimpleNamespace | None = None


def _classes() -> types.SimpleNamespace:
    global _CLASSES
    if _CLASSES is not None:
        return _CLASSES
    fs = load_fedscale()
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset

    from flamingo_sim.fl.training import minibatch_indices

    commons = fs.commons

    class _RecordingLoss(torch.nn.Module):
        """Cross-entropy per sample (what TorchClient expects) that records each step's mean."""

        def __init__(self) -> None:
            super().__init__()
            self.step_losses: list[float] = []

        def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            loss = F.cross_entropy(output, target, reduction="none")
            self.step_losses.append(float(loss.detach().mean()))
            return loss

    class FlamingoTorchClient(fs.TorchClient):
        """FedScale's TorchClient with the experiment's optimizer: plain SGD at ``conf.learning_rate``.

        Adds to FedScale's result ``flamingo_train_loss`` (mean minibatch loss over the local
        steps, as the native engine reports it) and ``flamingo_wall_s`` (TorchClient reports 0).
        """

        def get_optimizer(self, model: torch.nn.Module, conf: Any) -> torch.optim.Optimizer:
            return torch.optim.SGD(model.parameters(), lr=conf.learning_rate, momentum=0.0, weight_decay=0.0)

        def get_criterion(self, conf: Any) -> torch.nn.Module:
            self._recording = _RecordingLoss()
            return self._recording

        def train(self, client_data: Any, model: Any, conf: Any) -> dict[str, Any]:
            start = time.perf_counter()
            result = super().train(client_data, model, conf)
            losses = getattr(self, "_recording", None)
            result["flamingo_train_loss"] = float(np.mean(losses.step_losses)) if losses and losses.step_losses else float("nan")
            result["flamingo_wall_s"] = time.perf_counter() - start
            return result

    class FlamingoExecutor(fs.Executor):
        """A FedScale executor serving our federated dataset and training with FlamingoTorchClient.

        Each client's minibatches are the native engine's: ``minibatch_indices(seed, round,
        client)``, passed to TorchClient as a DataLoader over the client's own tensors.
        """

        def __init__(self, args: argparse.Namespace, dataset: Any, model: torch.nn.Module, poll_s: float = 0.02) -> None:
            # FedScale builds the executor's model by name from its own zoo; hand it ours instead
            executor_module = sys.modules[fs.Executor.__module__]
            own_init_model = executor_module.init_model
            executor_module.init_model = lambda: copy.deepcopy(model)
            try:
                with _quiet_root_logging():
                    super().__init__(args)
            finally:
                executor_module.init_model = own_init_model
            self.dataset = dataset
            self.poll_s = poll_s
            self.trained: list[int] = []  # FedScale client ids, in the order trained

        def setup_env(self) -> None:  # FedScale seeds the global RNGs here; ours are derived
            pass

        def init_data(self) -> tuple[Any, Any]:
            return None, None

        def report_executor_info_handler(self) -> dict[str, list[int]]:
            return {"size": [int(s) for s in self.dataset.samples_per_client]}

        def get_client_trainer(self, conf: Any) -> Any:
            return FlamingoTorchClient(conf)

        def training_handler(self, client_id: int, conf: Any, model: Any) -> dict[str, Any]:
            self.model_adapter.set_weights(model, is_aggregator=False)
            cid = int(client_id) - 1  # FedScale numbers clients from 1
            x, y = self.dataset.client_data(cid)
            idx = minibatch_indices(int(x.shape[0]), conf.local_steps, conf.batch_size, conf.flamingo_seed, conf.flamingo_round, cid)
            loader = DataLoader(TensorDataset(x, y), batch_sampler=idx.tolist())
            conf.client_id = client_id
            conf.tokenizer = None
            result = self.get_client_trainer(conf).train(client_data=loader, model=self.model_adapter.get_model(), conf=conf)
            result["flamingo_samples"] = int(x.shape[0])
            self.trained.append(int(client_id))
            return result

        def client_register(self, timeout_s: float = 60.0) -> None:
            """Register with the aggregator, retrying only while it is not reachable yet.

            FedScale retries any failure every 5 s for 3 minutes, which hides errors and, when
            the aggregator did receive the first attempt, registers the clients twice.
            """
            import grpc

            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    response = self.aggregator_communicator.stub.CLIENT_REGISTER(
                        fs.pb2.RegisterRequest(
                            client_id=self.executor_id,
                            executor_id=self.executor_id,
                            executor_info=self.serialize_response(self.report_executor_info_handler()),
                        )
                    )
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
                    continue
                self.dispatch_worker_events(response)
                return

        # FedScale's event loop, one step at a time (sleeps 1 s between pings; ours poll_s)
        def poll_once(self) -> bool:
            """Handle one queued event, or ping the aggregator; True if an event was handled."""
            if self.received_stop_request:
                return False
            if not self.event_queue:
                self.client_ping()
                if not self.event_queue:
                    return False
            request = self.event_queue.popleft()
            event = request.event
            if event == commons.CLIENT_TRAIN:
                config = self.deserialize_response(request.meta)
                config["model"] = self.deserialize_response(request.data)
                config["client_id"] = int(config["client_id"])
                client_id, result = self.Train(config)
                response = self.aggregator_communicator.stub.CLIENT_EXECUTE_COMPLETION(
                    fs.pb2.CompleteRequest(
                        client_id=str(client_id),
                        executor_id=self.executor_id,
                        event=commons.UPLOAD_MODEL,
                        status=True,
                        msg=None,
                        meta_result=None,
                        data_result=self.serialize_response(result),
                    )
                )
                self.dispatch_worker_events(response)
            elif event == commons.UPDATE_MODEL:
                self.UpdateModel(self.deserialize_response(request.data))
            elif event == commons.SHUT_DOWN:
                self.Stop()
            elif event == commons.MODEL_TEST:  # never sent: the aggregator evaluates
                raise RuntimeError("FlamingoExecutor: unexpected MODEL_TEST event")
            return event != commons.DUMMY_EVENT

        def event_monitor(self) -> None:
            self.client_register()
            while not self.received_stop_request:
                try:
                    busy = self.poll_once()
                except Exception as exc:  # the aggregator went away: stop, as FedScale does
                    if self.received_stop_request:
                        break
                    logging.info(f"executor {self.this_rank}: aggregator unreachable ({exc}); stopping")
                    self.received_stop_request = True
                    break
                if not busy:
                    time.sleep(self.poll_s)

    class FlamingoAggregator(fs.Aggregator):
        """FedScale's aggregator with flamingo-sim deciding each round (see the module docstring).

        ``rows`` collects one native-format metrics row per finished round.
        """

        def __init__(self, args: argparse.Namespace, sim: Any, *, n_executors: int = 1, weighted: bool = True, poll_s: float = 0.01) -> None:
            with _quiet_root_logging():
                super().__init__(args)
            self.sim = sim
            self.weighted = weighted
            self.poll_s = poll_s
            self.executors = list(range(n_executors))
            self.client_profiles: dict[int, Any] = {}
            self.rows: list[dict[str, Any]] = []
            self.plan: Any = None
            self._next_plan: Any = None
            self.train_losses: list[float] = []
            self.finished = threading.Event()
            self.round_lock = threading.RLock()
            self.bound_port: int | None = None
            self.error: BaseException | None = None
            self.round_end_wall_s: list[float] = []  # perf_counter() as each round finished
            self.init_model()

        def setup_env(self) -> None:  # FedScale seeds the global RNGs here; ours are derived
            pass

        def init_model(self) -> None:
            model = copy.deepcopy(self.sim.parts.model)
            model.load_state_dict(self.sim.params)
            self.model_wrapper = fs.TorchModelAdapter(model)
            self.model_weights = self.model_wrapper.get_weights()
            self.model_update_size = float(self.sim.cfg.network.model_size_mb) * 8.0 * 1000.0  # kbit

        def init_control_communication(self) -> None:
            """Serve gRPC on ``ps_ip`` only (FedScale binds every interface), on a free port if 0."""
            if self.grpc_server is not None:
                return
            import grpc
            from concurrent import futures

            import fedscale.cloud.channels.job_api_pb2_grpc as job_api_pb2_grpc

            size = 1 << 30
            self.grpc_server = grpc.server(
                futures.ThreadPoolExecutor(max_workers=8),
                options=[("grpc.max_send_message_length", size), ("grpc.max_receive_message_length", size)],
            )
            job_api_pb2_grpc.add_JobServiceServicer_to_server(self, self.grpc_server)
            self.bound_port = self.grpc_server.add_insecure_port(f"{self.args.ps_ip}:{int(self.args.ps_port)}")
            if not self.bound_port:
                raise FlamingoError(f"FedScale aggregator: cannot listen on {self.args.ps_ip}:{self.args.ps_port}")
            self.grpc_server.start()

        def executor_info_handler(self, executorId: str, info: dict[str, Any]) -> None:
            # runs on a gRPC thread in the distributed mode: keep the error for event_monitor
            try:
                super().executor_info_handler(executorId, info)
            except BaseException as exc:
                self.error = exc
                raise

        def get_client_conf(self, client_id: int) -> dict[str, Any]:
            """Per-client settings sent with each task: the lr, and what picks the minibatches."""
            return {"learning_rate": self.sim.cfg.fl.lr, "flamingo_seed": self.sim.seed, "flamingo_round": self.sim.round}

        # -- the round, decided by flamingo-sim ----------------------------------------------------
        def select_participants(self, select_num_participants: int, overcommitment: float = 1.3) -> list[int]:
            """Plan the next round natively (steps 1-4); the selected clients, as FedScale ids."""
            self._next_plan = self.sim.plan_round()
            return sorted(int(c) + 1 for c in self._next_plan.chosen)

        def tictak_client_tasks(self, sampled_clients: list[int], num_clients_to_collect: int) -> tuple:
            """Who runs (the kept clients, fastest first), the stragglers, each client's virtual
            time, and the round's duration: from our settlement, not FedScale's traces."""
            plan = self._next_plan
            compute_s = plan.duration_s - plan.comm_s
            clock = {
                int(c) + 1: {"computation": float(compute_s[j]), "communication": float(plan.comm_s[j])}
                for j, c in enumerate(plan.chosen)
            }
            to_run = [int(c) + 1 for c in plan.kept]
            stragglers = sorted(set(int(c) + 1 for c in plan.chosen) - set(to_run))
            durations = sorted(float(plan.duration_s[j]) for j in plan.settled.kept)
            return to_run, stragglers, clock, float(plan.settled.duration_s), durations

        def update_weight_aggregation(self, results: dict[str, Any]) -> None:
            """FedAvg: FedScale's unweighted mean, or (default) weighted by the clients' samples."""
            if not self.weighted:
                return super().update_weight_aggregation(results)
            update = results["update_weight"]
            update = list(update.values()) if isinstance(update, dict) else list(update)
            w = float(results["flamingo_samples"])
            if self._is_first_result_in_round():
                self._weight_sum = 0.0
                self.model_weights = [np.asarray(u, dtype=np.float64) * w for u in update]
            else:
                self.model_weights = [m + np.asarray(u, dtype=np.float64) * w for m, u in zip(self.model_weights, update)]
            self._weight_sum += w
            if self._is_last_result_in_round():
                self.model_weights = [m / self._weight_sum for m in self.model_weights]
                self.model_wrapper.set_weights(copy.deepcopy(self.model_weights), client_training_results=self.client_training_results)

        def client_completion_handler(self, results: dict[str, Any]) -> None:
            self.train_losses.append(float(results.get("flamingo_train_loss", results["moving_loss"])))
            super().client_completion_handler(results)

        def round_completion_handler(self) -> None:
            """Finish the round just trained (if any), then start the next one that has work.

            Rounds in which nobody may train are finished here at once (FedScale would wait
            forever for their uploads); after the last round the executors are shut down.
            """
            with self.round_lock:
                if self.plan is not None:
                    self._finish(self.plan, float(np.mean(self.train_losses)) if self.train_losses else float("nan"))
                    self.plan = None
                while not self.sim.is_done():
                    sampled = self.select_participants(self.args.num_participants, self.args.overcommitment)
                    to_run, stragglers, clock, duration_s, durations = self.tictak_client_tasks(sampled, self.args.num_participants)
                    if to_run:
                        self._start(self._next_plan, sampled, to_run, stragglers, clock, duration_s, durations)
                        return
                    self._finish(self._next_plan, float("nan"))  # empty round: nothing to train
                self.broadcast_aggregator_events(commons.SHUT_DOWN)

        def _start(self, plan: Any, sampled: list[int], to_run: list[int], stragglers: list[int], clock: dict, duration_s: float, durations: list[float]) -> None:
            self.plan = plan
            self.round = plan.round
            self.global_virtual_clock = plan.t0_s
            self.sampled_participants = sampled
            self.resource_manager.register_tasks(to_run)
            self.tasks_round = len(to_run)
            self.sampled_executors = list(self.individual_client_events.keys())
            self.round_stragglers = stragglers
            self.virtual_client_clock = clock
            self.flatten_client_duration = np.array(durations)
            self.round_duration = duration_s
            self.model_in_update = 0
            self.test_result_accumulator = []
            self.stats_util_accumulator = []
            self.client_training_results = []
            self.loss_accumulator = []
            self.train_losses = []
            self.broadcast_aggregator_events(commons.UPDATE_MODEL)
            self.broadcast_aggregator_events(commons.START_ROUND)

        def _finish(self, plan: Any, train_loss: float) -> None:
            if len(plan.kept):
                state = self.model_wrapper.get_model().state_dict()
                self.sim.params = {k: v.detach().clone() for k, v in state.items()}
            self.rows.append(self.sim.finish_round(plan, train_loss))
            self.round_end_wall_s.append(time.perf_counter())
            self.global_virtual_clock = self.sim.clock_s

        # -- FedScale's event loop, one step at a time -------------------------------------------------
        def poll_once(self) -> bool:
            """Handle one broadcast or one queued upload; True if there was one."""
            if self.broadcast_events_queue:
                event = self.broadcast_events_queue.popleft()
                if event == commons.UPDATE_MODEL:
                    self.dispatch_client_events(event)
                elif event == commons.START_ROUND:
                    self.dispatch_client_events(commons.CLIENT_TRAIN)
                elif event == commons.SHUT_DOWN:  # to every executor, even if no round ever ran
                    self.dispatch_client_events(commons.SHUT_DOWN, list(self.individual_client_events))
                    self.finished.set()
                return True
            if self.server_events_queue:
                _executor, event, _meta, data = self.server_events_queue.popleft()
                if event == commons.UPLOAD_MODEL:
                    self.client_completion_handler(self.deserialize_response(data))
                    if len(self.stats_util_accumulator) == self.tasks_round:
                        self.round_completion_handler()
                else:
                    raise RuntimeError(f"FlamingoAggregator: unexpected event {event!r}")
                return True
            return False

        def shutdown_delivered(self) -> bool:
            return self.finished.is_set() and all(not q for q in self.individual_client_events.values())

        def event_monitor(self, watch: Callable[[], None] | None = None, linger_s: float = 10.0) -> None:
            """Run until the last round is done and every executor got its shutdown (or ``linger_s``
            passed after it); ``watch`` is called on every idle tick (it may raise)."""
            done_at = None
            while True:
                if self.error is not None:
                    raise self.error
                if not self.poll_once():
                    if self.finished.is_set():
                        done_at = done_at or time.monotonic()
                        if self.shutdown_delivered() or time.monotonic() - done_at > linger_s:
                            return
                    if watch is not None:
                        watch()
                    time.sleep(self.poll_s)

        def stop(self) -> None:
            if self.grpc_server is not None:
                self.grpc_server.stop(grace=1.0).wait(5.0)
                self.grpc_server = None

    _CLASSES = types.SimpleNamespace(
        FlamingoTorchClient=FlamingoTorchClient,
        FlamingoExecutor=FlamingoExecutor,
        FlamingoAggregator=FlamingoAggregator,
    )
    return _CLASSES


def __getattr__(name: str) -> Any:  # FlamingoAggregator etc. on first use, importing FedScale then
    if name in ("FlamingoTorchClient", "FlamingoExecutor", "FlamingoAggregator"):
        return getattr(_classes(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- in-process: the executor's gRPC stub replaced by direct calls --------------------------------
class _DirectCall:
    def __init__(self, fn: Callable[[Any, Any], Any]) -> None:
        self._fn = fn

    def __call__(self, request: Any) -> Any:
        return self._fn(request, None)

    def future(self, request: Any) -> Any:
        response = self._fn(request, None)
        return types.SimpleNamespace(result=lambda: response, add_done_callback=lambda cb: cb(types.SimpleNamespace(result=lambda: response)))


class _DirectStub:
    """What ``JobServiceStub`` offers, calling the aggregator's servicer methods directly."""

    def __init__(self, aggregator: Any) -> None:
        self.CLIENT_REGISTER = _DirectCall(aggregator.CLIENT_REGISTER)
        self.CLIENT_PING = _DirectCall(aggregator.CLIENT_PING)
        self.CLIENT_EXECUTE_COMPLETION = _DirectCall(aggregator.CLIENT_EXECUTE_COMPLETION)


class _NoChannel:
    def close(self) -> None:
        pass


def run_in_process(
    sim: Any, *, work_dir: str | Path, n_executors: int = 1, weighted: bool = True, stats: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Run ``sim`` (a fresh or resumed :class:`~flamingo_sim.fl.engine.Simulation`) to its end on
    FedScale's aggregator and ``n_executors`` executors in this process; returns the metrics rows.

    Deterministic: the executors are pumped in turn, no threads, no sockets. ``stats``, if
    given, receives ``start_wall_s`` and ``round_end_wall_s`` (``time.perf_counter()`` values).
    """
    start = time.perf_counter()
    cls = _classes()
    args = fedscale_args(sim.cfg, log_dir=work_dir, num_executors=n_executors)
    aggregator = cls.FlamingoAggregator(args, sim, n_executors=n_executors, weighted=weighted)
    executors = []
    for rank in range(1, n_executors + 1):
        exe = cls.FlamingoExecutor(_rank_args(args, rank), sim.parts.dataset, sim.parts.model)
        exe.aggregator_communicator.stub = _DirectStub(aggregator)
        exe.aggregator_communicator.channel = _NoChannel()
        executors.append(exe)
    for exe in executors:
        exe.client_register()
    idle = 0
    while not all(e.received_stop_request for e in executors):
        busy = aggregator.poll_once()
        for exe in executors:
            busy = exe.poll_once() or busy
        idle = 0 if busy else idle + 1
        if idle > 3:  # everything is synchronous here: a pass without progress is a stall
            raise RuntimeError(f"FedScale in-process run stalled in round {sim.round}")
    aggregator.stop()
    if aggregator.log_writer is not None:
        aggregator.log_writer.close()
    if stats is not None:
        stats.update(start_wall_s=start, round_end_wall_s=list(aggregator.round_end_wall_s))
    return aggregator.rows


# -- distributed: real gRPC on loopback, N executor processes -------------------------------------
def executor_command(
    experiment: str | Path,
    *,
    seed: int,
    ps_ip: str,
    ps_port: int,
    rank: int,
    num_executors: int,
    log_dir: str | Path,
    overrides: Sequence[str] = (),
) -> list[str]:
    """The command line of one executor process (also what to run on another host)."""
    cmd = [
        sys.executable, "-m", "flamingo_sim.integrations.fedscale", "executor", str(experiment),
        "--seed", str(seed), "--ps-ip", ps_ip, "--ps-port", str(ps_port),
        "--rank", str(rank), "--num-executors", str(num_executors), "--log-dir", str(log_dir),
    ]
    for item in overrides:
        cmd += ["--set", item]
    return cmd


def _terminate(procs: list[subprocess.Popen], timeout_s: float = 10.0) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def run_distributed(
    sim: Any,
    *,
    experiment: str | Path,
    work_dir: str | Path,
    n_executors: int,
    overrides: Sequence[str] = (),
    weighted: bool = True,
    ps_ip: str = "127.0.0.1",
    ps_port: int = 0,
    spawn: bool = True,
    timeout_s: float | None = None,
    on_start: Callable[[int, list[subprocess.Popen]], None] | None = None,
    stats: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Run ``sim`` with FedScale's aggregator here, serving gRPC on ``ps_ip:ps_port`` (0: a free
    port), and ``n_executors`` executor processes; returns the metrics rows.

    With ``spawn`` the executors are started here (loopback) and always ended before return;
    without it, they are expected to connect from elsewhere (see :func:`executor_command`).
    ``on_start(port, processes)`` is called once they are started (tests use it); ``stats`` as
    in :func:`run_in_process`.
    """
    start = time.perf_counter()
    if n_executors < 1:
        raise FlamingoError(f"--executors: need at least 1 executor, got {n_executors}")
    cls = _classes()
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    args = fedscale_args(sim.cfg, log_dir=work, ps_ip=ps_ip, ps_port=ps_port, num_executors=n_executors)
    aggregator = cls.FlamingoAggregator(args, sim, n_executors=n_executors, weighted=weighted)
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []
    try:
        aggregator.init_control_communication()
        port = int(aggregator.bound_port)
        if spawn:
            env = dict(os.environ)
            root = str(Path(__file__).resolve().parents[2])
            env["PYTHONPATH"] = os.pathsep.join([root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
            # the executors share this machine's cores: one share each, not all of them each
            env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // n_executors)))
            for rank in range(1, n_executors + 1):
                log = work / f"executor-{rank}.log"
                logs.append(log)
                cmd = executor_command(
                    experiment, seed=sim.seed, ps_ip=ps_ip, ps_port=port, rank=rank,
                    num_executors=n_executors, log_dir=work, overrides=overrides,
                )
                with open(log, "wb") as fh:
                    procs.append(subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True))
        if on_start is not None:
            on_start(port, procs)
        started = time.monotonic()

        def watch() -> None:
            for rank, p in enumerate(procs, 1):
                code = p.poll()
                if code is not None and not aggregator.finished.is_set():
                    raise FlamingoError(f"FedScale executor {rank} exited with code {code} before the run ended:\n{_tail(logs[rank - 1])}")
            if timeout_s is not None and time.monotonic() - started > timeout_s:
                raise FlamingoError(f"FedScale run did not finish within {timeout_s:g} s")

        aggregator.event_monitor(watch=watch)
        for p in procs:  # the executors stop on their shutdown event; give them a moment
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
    finally:
        aggregator.stop()
        _terminate(procs)
        if aggregator.log_writer is not None:
            aggregator.log_writer.close()
    if stats is not None:
        stats.update(start_wall_s=start, round_end_wall_s=list(aggregator.round_end_wall_s))
    return aggregator.rows


def run_fedscale(
    sim: Any,
    *,
    experiment: str | Path | None = None,
    work_dir: str | Path | None = None,
    executors: int = 0,
    overrides: Sequence[str] = (),
    weighted: bool = True,
) -> list[dict[str, Any]]:
    """Run one (policy, seed) on FedScale: in-process if ``executors`` is 0, else distributed."""
    with contextlib.ExitStack() as stack:
        if work_dir is None:
            work_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="flamingo-fedscale-"))
        if executors == 0:
            return run_in_process(sim, work_dir=work_dir, weighted=weighted)
        if experiment is None:
            raise FlamingoError("the distributed FedScale engine needs the experiment file (its executors load it)")
        return run_distributed(sim, experiment=experiment, work_dir=work_dir, n_executors=executors, overrides=overrides, weighted=weighted)


# -- the executor process ---------------------------------------------------------------------
def _executor_main(ns: argparse.Namespace) -> int:
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.fl.setup import build_components

    cfg = load_experiment(ns.experiment, ns.overrides)
    parts = build_components(cfg, ns.experiment, ns.seed, log=lambda _m: None)
    cls = _classes()
    args = fedscale_args(
        cfg, log_dir=ns.log_dir,
        ps_ip=ns.ps_ip, ps_port=ns.ps_port, this_rank=ns.rank, num_executors=ns.num_executors,
    )
    executor = cls.FlamingoExecutor(args, parts.dataset, parts.model)
    executor.setup_communication()
    executor.event_monitor()
    print(f"executor {ns.rank}: trained {len(executor.trained)} client tasks; stopped", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flamingo_sim.integrations.fedscale executor EXPERIMENT --ps-ip H --ps-port P ...``"""
    parser = argparse.ArgumentParser(prog="python -m flamingo_sim.integrations.fedscale")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("executor", help="one FedScale executor process of a flamingo-sim run")
    p.add_argument("experiment")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--ps-ip", default="127.0.0.1")
    p.add_argument("--ps-port", type=int, required=True)
    p.add_argument("--rank", type=int, required=True, help="1..N, unique per executor")
    p.add_argument("--num-executors", type=int, required=True)
    p.add_argument("--log-dir", default=tempfile.gettempdir())
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ns = parser.parse_args(argv)
    try:
        return _executor_main(ns)
    except FlamingoError as exc:
        print(f"flamingo-sim fedscale executor: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
