"""FedScale's aggregator, subclassed so that flamingo-sim decides each round: :class:`FlamingoAggregator`.

It owns a native :class:`~flamingo_sim.fl.sim.simulation.Simulation` and calls its :meth:`plan_round`
from FedScale's ``select_participants`` / ``tictak_client_tasks`` hooks (who is online by our
traces and energy budget, the policy's execution choices, durations, energy, who is dropped, the
K fastest), so the virtual clock, the online set and the energy drawn equal the native engine's
by construction. FedScale's executors train the kept clients; the aggregator averages their
updates with the native engine's :func:`~flamingo_sim.fl.strategy.aggregate.fedavg` (weighted by samples;
``weighted=False`` gives FedScale's unweighted mean), and :meth:`~flamingo_sim.fl.sim.simulation.Simulation.finish_round` advances batteries
and writes the native metrics row. A round in which nobody may train is settled here at once
(FedScale would wait forever for its uploads).

FedScale's base class exists only once FedScale is imported, so the subclass is made by
:func:`build_aggregator_class` (:func:`~flamingo_sim.integrations.fedscale.classes.fedscale_classes`
does it once). Its gRPC server listens on ``ps_ip`` only, and its event loop runs one step at
a time (:meth:`poll_once`) so the in-process driver can pump it.
"""

from __future__ import annotations

import argparse
import copy
import threading
import time
from typing import Any, Callable

import numpy as np
import torch

from flamingo_sim.errors import FlamingoError
from flamingo_sim.fl.runner.callbacks import CallbackList
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.fl.strategy.aggregate import fedavg
from flamingo_sim.integrations.fedscale.loader import quiet_root_logging


def build_aggregator_class(fs: Any) -> type:
    """``FlamingoAggregator`` on FedScale's loaded pieces ``fs`` (:func:`.loader.load_fedscale`;
    ``Any``: FedScale has no type information, so its classes are unchecked bases)."""
    commons = fs.commons

    class FlamingoAggregator(fs.Aggregator):
        """FedScale's aggregator with flamingo-sim deciding each round (see the module docstring).

        ``records`` collects each finished round's :class:`~flamingo_sim.fl.sim.records.RoundRecord`;
        ``callbacks`` are called around every round, and one asking to stop ends the run.
        """

        # set by FedScale's Aggregator (declared here: FedScale has no type information)
        grpc_server: Any
        test_result_accumulator: list[Any]
        stats_util_accumulator: list[Any]
        client_training_results: list[Any]
        loss_accumulator: list[Any]

        def __init__(
            self,
            args: argparse.Namespace,
            sim: Any,
            *,
            n_executors: int = 1,
            weighted: bool = True,
            poll_s: float = 0.01,
            callbacks: CallbackList | None = None,
        ) -> None:
            with quiet_root_logging():
                super().__init__(args)
            self.sim = sim
            self.weighted = weighted
            self.poll_s = poll_s
            self.executors = list(range(n_executors))
            self.client_profiles: dict[int, Any] = {}
            self.records: list[RoundRecord] = []
            self.callbacks = callbacks or CallbackList()
            self.stop_requested = False  # a callback asked to end the run after the last round
            self.plan: Any = None
            self._next_plan: Any = None
            self.train_losses: list[float] = []
            self.finished = threading.Event()
            self.round_lock = threading.RLock()
            self.bound_port: int | None = None
            self.error: BaseException | None = None
            self._updates: list[list[torch.Tensor]] = []  # this round's updates so far, one per client
            self._update_weights: list[float] = []
            self.round_end_wall_s: list[float] = []  # perf_counter() as each round finished
            self.init_model()

        def setup_env(self) -> None:  # FedScale seeds the global RNGs here; ours are derived
            pass

        def init_model(self) -> None:
            model = copy.deepcopy(self.sim.parts.model)
            model.load_state_dict(self.sim.params)
            self.model_wrapper = fs.TorchModelAdapter(model)
            self.model_weights = self.model_wrapper.get_weights()
            self.model_update_size = self.sim.model_size_mb * 8.0 * 1000.0  # kbit

        def init_control_communication(self) -> None:
            """Serve gRPC on ``ps_ip`` only (FedScale binds every interface), on a free port if 0."""
            if self.grpc_server is not None:
                return
            from concurrent import futures

            import fedscale.cloud.channels.job_api_pb2_grpc as job_api_pb2_grpc
            import grpc

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
            return {"learning_rate": self.sim.rules.fl.lr, "flamingo_seed": self.sim.seed, "flamingo_round": self.sim.round}

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
            """Collect the round's updates; on the last one, FedAvg them with
            :func:`flamingo_sim.fl.strategy.aggregate.fedavg` (weighted by the clients' samples, or
            equal weights, FedScale's plain mean, with ``weighted=False``)."""
            update = results["update_weight"]
            update = list(update.values()) if isinstance(update, dict) else list(update)
            if self._is_first_result_in_round():
                self._updates, self._update_weights = [], []
            self._updates.append([torch.as_tensor(np.asarray(u)) for u in update])
            self._update_weights.append(float(results["flamingo_samples"]) if self.weighted else 1.0)
            if self._is_last_result_in_round():
                names = list(self.model_wrapper.get_model().state_dict())
                stacked = {name: torch.stack([u[i] for u in self._updates]) for i, name in enumerate(names)}
                averaged = fedavg(stacked, self._update_weights)
                self._updates, self._update_weights = [], []
                self.model_weights = [averaged[name].numpy() for name in names]
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
                while not self.sim.is_done() and not self.stop_requested:
                    self.callbacks.on_round_begin(self.sim)
                    sampled = self.select_participants(self.args.num_participants, self.args.overcommitment)
                    to_run, stragglers, clock, duration_s, durations = self.tictak_client_tasks(sampled, self.args.num_participants)
                    if to_run:
                        self._start(self._next_plan, sampled, to_run, stragglers, clock, duration_s, durations)
                        return
                    self._finish(self._next_plan, float("nan"))  # empty round: nothing to train
                self.broadcast_aggregator_events(commons.SHUT_DOWN)

        def _start(self, plan: Any, sampled: list[int], to_run: list[int], stragglers: list[int], clock: dict,
                   duration_s: float, durations: list[float]) -> None:
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
                self.sim.set_global_params(self.model_wrapper.get_model().state_dict())
            self.records.append(self.sim.finish_round(plan, train_loss))
            if self.callbacks.on_round_end(self.sim, self.records[-1]):
                self.stop_requested = True
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

    return FlamingoAggregator
