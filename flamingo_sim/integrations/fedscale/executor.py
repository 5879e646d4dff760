"""FedScale's executor side, subclassed: :class:`FlamingoExecutor` and :class:`FlamingoTorchClient`.

FedScale's base classes exist only once FedScale is imported, so the subclasses are made by
:func:`build_executor_classes` from what :func:`~flamingo_sim.integrations.fedscale.loader.load_fedscale`
returns (:func:`~flamingo_sim.integrations.fedscale.classes.fedscale_classes` does it once).

- ``FlamingoTorchClient``: FedScale's TorchClient training with plain SGD at the experiment's
  learning rate, reporting the mean minibatch loss and its own wall time;
- ``FlamingoExecutor``: serves our federated dataset and model, trains each client on the
  native engine's minibatches, registers without FedScale's blind retries, and runs FedScale's
  event loop one step at a time (:meth:`poll_once`), so the in-process driver can pump it.
"""

from __future__ import annotations

import argparse
import copy
import logging
import sys
import time
from typing import Any

import numpy as np

from flamingo_sim.integrations.fedscale.loader import quiet_root_logging


def build_executor_classes(fs: Any) -> tuple[type, type]:  # Any: FedScale's classes have no type information
    """``(FlamingoTorchClient, FlamingoExecutor)`` on FedScale's loaded pieces ``fs``."""
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset

    from flamingo_sim.fl.training.trainer import minibatch_indices

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

        received_stop_request: bool  # set by FedScale's Executor (it has no type information)

        def __init__(self, args: argparse.Namespace, dataset: Any, model: torch.nn.Module, poll_s: float = 0.02) -> None:
            # FedScale builds the executor's model by name from its own zoo; hand it ours instead
            executor_module: Any = sys.modules[fs.Executor.__module__]
            own_init_model = executor_module.init_model
            executor_module.init_model = lambda: copy.deepcopy(model)
            try:
                with quiet_root_logging():
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

    return FlamingoTorchClient, FlamingoExecutor
