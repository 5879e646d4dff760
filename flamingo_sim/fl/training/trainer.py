"""Local training of a cohort of clients: one contract, several strategies.

What a round asks of its cohort is one :class:`CohortTask` (the clients' data and ids, steps,
batch size, learning rate, seed, round, FedProx's ``prox_mu``), which
:meth:`CohortTrainer.train` and :func:`train_cohort` run from a global model state.

Each client starts from the same global model state, runs ``n_steps`` steps of plain SGD
(no momentum, no weight decay) on minibatches of ``batch_size`` samples of its own data, and
returns its new state: parameters AND buffers (BatchNorm running statistics). Minibatches
cycle through the client's data in shuffled order: the sample order is a concatenation of
fresh permutations drawn from ``rng(seed, "local-shuffle", round_idx, client_id)``, cut into
``n_steps`` batches. A client with fewer samples than ``batch_size`` therefore sees some
samples twice in one batch (the FedScale dataset reader drops such clients; the synthetic
proxy keeps ``min_samples`` >= 16). Dropout masks come from torch's generator seeded with
``(seed, "dropout", round_idx)`` for the round, so a run is repeatable on the CPU.

Strategies (``CohortResult.mode`` says which ran; all give the same numbers up to float
rounding, the per-client loop being the reference):

- ``"sequential"``: one model copy trains client after client (FedScale's way).
- ``"vmap"`` (``"batched"`` is the same): the cohort trains as one batch with
  ``torch.func.vmap`` over stacked per-client parameters and buffers
  (:func:`flamingo_sim.fl.training.batched.train_vmap`), in chunks that fit the memory budget;
  optionally each step is a replayed CUDA graph (``cuda_graphs``).
- ``"streams"``: ``n_streams`` model copies on concurrent CUDA streams
  (:func:`flamingo_sim.fl.training.batched.train_streams`).
- ``"threads"``: model copies training clients side by side on the CPU's cores, one worker
  thread per torch thread (:func:`flamingo_sim.fl.training.threads.train_threads`); each client draws
  its dropout masks from its own generator, ``(seed, "dropout", round_idx, client_id)``.
- ``"auto"``: on the CPU, :func:`choose_strategy` for (model, image size, device): vmap, except
  ``threads`` for convolutional networks on the CPU (vmap turns their convolutions into
  grouped ones, which oneDNN runs no faster than the loop: measured 0.5-1.0x on 2 cores,
  where threads measured 1.2-1.6x), the per-client loop there with one torch thread; threads
  (else the loop) when the model does not vmap or only one client fits in memory. On a GPU
  with a tuner (:mod:`flamingo_sim.fl.training.autotune`, what a run gives its trainer there),
  the candidates are measured on the first round's cohort and the fastest that keeps to the
  stated bound trains (:attr:`CohortTrainer.choice` says which and why); without one, the
  rule: streams for networks with grouped (depthwise) convolutions on images of 128 px or
  more, streams when the model does not vmap, else vmap.

BatchNorm running statistics are aggregated like every other state entry: FedAvg's
sample-weighted mean of the clients' running means and variances, ``num_batches_tracked``
rounded (:func:`flamingo_sim.fl.strategy.aggregate.fedavg`), as FedScale averages the whole
``state_dict``.

FedProx (``prox_mu > 0``) adds ``prox_mu/2 ||w - w_global||^2`` over the trainable parameters
to every client's local loss, in every strategy: each step's gradient gains
``prox_mu * (w - w_global)`` (:func:`flamingo_sim.fl.training.batched.add_proximal`); the reported
training loss is the task loss alone.

A model *state* here is a ``dict[str, Tensor]`` of its parameters and buffers, as
:func:`model_state` returns it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from flamingo_sim.fl.training.batched import GraphedStep, model_copy, train_one_client, train_streams, train_vmap
from flamingo_sim.fl.training.device import precision_context
from flamingo_sim.fl.training.memory import default_budget_bytes, per_client_bytes
from flamingo_sim.fl.training.threads import threads_safe, train_threads
from flamingo_sim.rng import derive_seed, rngs

__all__ = [
    "CohortTask",
    "CohortResult",
    "CohortTrainer",
    "train_cohort",
    "evaluate",
    "evaluate_batches",
    "model_state",
    "minibatch_indices",
    "cohort_indices",
    "supports_batched",
    "choose_strategy",
]

Mode = Literal["auto", "batched", "vmap", "streams", "threads", "sequential"]
MODES = ("auto", "batched", "vmap", "streams", "threads", "sequential")
#: Image side (px) from which depthwise networks train faster on model copies than under vmap (CUDA).
STREAMS_MIN_IMAGE_PX = 128


@dataclass(frozen=True)
class CohortResult:
    """The outcome of local training for ``k`` clients.

    ``params``: each state entry stacked with a leading client dimension ``k`` (same order as
    the ``client_ids`` given). ``losses``: ``(k,)`` float32, each client's mean minibatch
    training loss over its local steps (loss before each step's update). ``mode``: the
    strategy that ran, ``"vmap"``, ``"streams"`` or ``"sequential"``.
    """

    params: dict[str, Tensor]
    losses: Tensor
    mode: str

    @property
    def n_clients(self) -> int:
        return int(self.losses.shape[0])

    def client_params(self, i: int) -> dict[str, Tensor]:
        """The state of the ``i``-th client of the cohort (views, not copies)."""
        return {name: value[i] for name, value in self.params.items()}


def model_state(model: nn.Module) -> dict[str, Tensor]:
    """Detached copies of ``model``'s parameters and buffers, keyed like ``state_dict``."""
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def supports_batched(model: nn.Module) -> bool:
    """Whether ``model`` can train under vmap: everything but recurrent layers (no batching rule)."""
    return not any(isinstance(m, nn.RNNBase) for m in model.modules())


def _has_grouped_conv(model: nn.Module) -> bool:
    return any(isinstance(m, nn.Conv2d) and m.groups > 1 for m in model.modules())


def _has_conv(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())


def choose_strategy(model: nn.Module, input_shape: Sequence[int], device: torch.device, clients_per_chunk: int, cpu_threads: int | None = None) -> str:
    """The fastest strategy measured for (model, input size, device); see the module docstring.

    ``cpu_threads``: torch's CPU threads (default: ``torch.get_num_threads()``), the workers
    the ``threads`` strategy would get.
    """
    if device.type != "cuda" and (not supports_batched(model) or clients_per_chunk < 2 or _has_conv(model)):
        # vmap turns convolutions into grouped ones, no faster on the CPU: whole clients side by side
        threads = torch.get_num_threads() if cpu_threads is None else int(cpu_threads)
        return "threads" if threads >= 2 and threads_safe(model) else "sequential"
    if not supports_batched(model) or clients_per_chunk < 2:
        return "streams"
    if device.type == "cuda" and _has_grouped_conv(model) and len(input_shape) == 3 and min(input_shape[1:]) >= STREAMS_MIN_IMAGE_PX:
        return "streams"
    return "vmap"


def minibatch_indices(n_samples: int, n_steps: int, batch_size: int, seed: int, round_idx: int, client_id: int) -> Tensor:
    """``(n_steps, batch_size)`` int64 sample indices of one client's local steps this round."""
    return cohort_indices([n_samples], [client_id], n_steps, batch_size, seed, round_idx)[0]


def cohort_indices(n_samples: Sequence[int], client_ids: Sequence[int], n_steps: int, batch_size: int, seed: int, round_idx: int) -> Tensor:
    """``(k, n_steps, batch_size)`` int64: :func:`minibatch_indices` of each of ``k`` clients, written into one array
    (a cohort's worth at once: one tensor instead of one per client; the same numbers)."""
    total = n_steps * batch_size
    out = np.empty((len(client_ids), total), dtype=np.int64)
    for n, cid in zip(n_samples, client_ids):
        if n < 1:
            raise ValueError(f"client {cid} has no samples")
    gens = rngs(seed, "local-shuffle", round_idx, last=[int(c) for c in client_ids])  # the cohort's streams, seeded at once
    for i, (n, gen) in enumerate(zip(n_samples, gens)):
        n = int(n)
        if n >= total:
            out[i] = gen.permutation(n)[:total]
            continue
        # fresh permutations of the client's samples, concatenated and cut: ``permuted`` shuffles the rows one after
        # another with the same draws as one ``permutation(n)`` each (one call instead of one per permutation)
        rows = np.empty((-(-total // n), n), dtype=np.int64)
        rows[:] = np.arange(n, dtype=np.int64)  # each row 0..n-1 (filled in place: a third less than copying a broadcast view)
        out[i] = gen.permuted(rows, axis=1, out=rows).reshape(-1)[:total]
    return torch.from_numpy(out).view(len(client_ids), n_steps, batch_size)


@dataclass(frozen=True, eq=False)
class CohortTask:
    """One round's local training of a cohort, checked when made.

    Client ``client_ids[i]`` holds ``client_datas[i]`` (``(x, y)``) and runs ``n_steps`` steps of
    plain SGD at ``lr`` on minibatches of ``batch_size``, drawn by :func:`minibatch_indices` from
    (``seed``, ``round_idx``, its id); ``prox_mu`` > 0 adds FedProx's proximal term.
    """

    client_datas: Sequence[tuple[Tensor, Tensor]]
    client_ids: Sequence[int]
    n_steps: int
    batch_size: int
    lr: float
    seed: int
    round_idx: int
    prox_mu: float = 0.0

    def __post_init__(self) -> None:
        if len(self.client_datas) != len(self.client_ids):
            raise ValueError(f"{len(self.client_datas)} client datasets but {len(self.client_ids)} client ids")
        if len(self.client_ids) == 0:
            raise ValueError("empty cohort")
        if self.n_steps < 1 or self.batch_size < 1:
            raise ValueError(f"n_steps and batch_size must be >= 1, got {self.n_steps}, {self.batch_size}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not self.prox_mu >= 0:
            raise ValueError(f"prox_mu must be >= 0, got {self.prox_mu}")
        for cid, (x, y) in zip(self.client_ids, self.client_datas):
            if x.shape[0] != y.shape[0]:
                raise ValueError(f"client {cid}: {x.shape[0]} inputs but {y.shape[0]} labels")


def _model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


class CohortTrainer:
    """Trains cohorts of one model on one device; keeps what can be reused across rounds.

    ``strategy``: one of :data:`MODES`. ``memory_budget_bytes``: what one vmap chunk may use
    (``None``: 80 % of the free GPU memory, half the available RAM on the CPU);
    ``max_batched_clients`` caps the chunk further. ``cuda_graphs``: capture the vmap step as a
    CUDA graph (CUDA only; ignored on the CPU). ``precision``: see
    :func:`flamingo_sim.fl.training.device.precision_context`. ``channels_last``: the per-client
    strategies (``sequential``, ``streams``) train model copies and minibatches in NHWC memory
    order. ``tuner`` (with ``strategy="auto"``): an
    :class:`~flamingo_sim.fl.training.autotune.Tuner` that picks the strategy from measurements
    on the first cohort of each input shape and batch size (:attr:`choice`); ``log`` gets its lines.
    """

    def __init__(
        self,
        model: nn.Module,
        strategy: str = "auto",
        precision: str = "fp32",
        memory_budget_bytes: int | None = None,
        max_batched_clients: int | None = None,
        cuda_graphs: bool = False,
        n_streams: int = 4,
        channels_last: bool = False,
        tuner: Any = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if strategy not in MODES:
            raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}, got {strategy!r}")
        self.model = model
        self.device = _model_device(model)
        self.strategy = "vmap" if strategy == "batched" else strategy
        self.precision = precision
        self.memory_budget_bytes = memory_budget_bytes
        self.max_batched_clients = max_batched_clients
        self.cuda_graphs = bool(cuda_graphs) and self.device.type == "cuda"
        self.n_streams = int(n_streams)
        self.channels_last = bool(channels_last)
        self.tuner = tuner
        self.log = log or (lambda _m: None)
        #: What the tuner chose (an :class:`~flamingo_sim.fl.training.autotune.Choice`, for the last input shape and
        #: batch size it measured); None without a tuner.
        self.choice: Any = None
        self._graphs: dict[tuple, GraphedStep] = {}
        self._works: dict[tuple, nn.Module] = {}
        self._plans: dict[tuple, tuple[str, int]] = {}
        self._tuned: dict[tuple, CohortTrainer] = {}

    def plan(self, input_shape: Sequence[int], batch_size: int, n_clients: int) -> tuple[str, int]:
        """``(strategy, clients per chunk)`` for a cohort of ``n_clients``."""
        key = (tuple(input_shape), batch_size)
        if key not in self._plans:
            budget = self.memory_budget_bytes if self.memory_budget_bytes is not None else default_budget_bytes(self.device)
            per_client = per_client_bytes(self.model, tuple(input_shape), batch_size)
            chunk = max(1, int(budget // max(per_client, 1)))
            strategy = self.strategy
            if strategy == "auto":
                strategy = choose_strategy(self.model, input_shape, self.device, min(chunk, 2))
            self._plans[key] = (strategy, chunk)
        strategy, chunk = self._plans[key]
        if self.max_batched_clients is not None:
            chunk = min(chunk, max(1, int(self.max_batched_clients)))
        return strategy, min(chunk, n_clients)

    def train(self, global_params: dict[str, Tensor], task: CohortTask) -> CohortResult:
        """Run ``task``'s local SGD for each client, starting from ``global_params`` (see :func:`train_cohort`)."""
        if self.strategy == "auto" and self.tuner is not None:
            return self._chosen(global_params, task).train(global_params, task)
        client_datas, client_ids, n_steps, batch_size, lr = task.client_datas, task.client_ids, task.n_steps, task.batch_size, task.lr
        seed, round_idx, prox_mu = task.seed, task.round_idx, float(task.prox_mu)
        state = self.start_state(global_params)
        cohort = cohort_indices([int(x.shape[0]) for x, _ in client_datas], client_ids, n_steps, batch_size, seed, round_idx)
        strategy, chunk = self.plan(tuple(client_datas[0][0].shape[1:]), batch_size, len(client_ids))
        devices = [self.device] if self.device.type == "cuda" else []
        indices: list[Tensor] = list(cohort.unbind(0)) if strategy != "vmap" else []  # the per-client strategies' views
        with torch.random.fork_rng(devices=devices), precision_context(self.precision, self.device):
            dropout_seed = derive_seed(seed, "dropout", round_idx)
            if devices:
                torch.manual_seed(dropout_seed)
            else:  # only the CPU generator draws: torch.manual_seed would also queue a lazy CUDA seeding (a stack trace, ~4 ms)
                torch.default_generator.manual_seed(dropout_seed)
            if strategy == "sequential":
                work = self._work_copy()
                cl = self.channels_last
                parts = [train_one_client(work, state, x, y, idx, lr, self.device, prox_mu, cl) for (x, y), idx in zip(client_datas, indices)]
                params = {name: torch.stack([p[0][name] for p in parts]) for name in state}
                return CohortResult(params, torch.stack([p[1] for p in parts]), "sequential")
            if strategy == "threads":
                if self.device.type != "cpu":
                    raise ValueError(f"mode 'threads' trains on the CPU, the model is on {self.device}")
                seeds = [derive_seed(seed, "dropout", round_idx, int(c)) for c in client_ids]
                params, losses = train_threads(self.model, state, client_datas, indices, lr, torch.get_num_threads(), seeds, prox_mu)
                return CohortResult(params, losses, "threads")
            if strategy == "streams":
                params, losses = train_streams(self.model, state, client_datas, indices, lr, self.device, self.n_streams, prox_mu,
                                               self.channels_last)
                return CohortResult(params, losses, "streams")
            chunks = [
                self._vmap_chunk(state, client_datas[i : i + chunk], cohort[i : i + chunk], lr, prox_mu) for i in range(0, len(client_ids), chunk)
            ]
        if len(chunks) == 1:
            return CohortResult(chunks[0][0], chunks[0][1], "vmap")
        params = {name: torch.cat([c[0][name] for c in chunks]) for name in state}
        return CohortResult(params, torch.cat([c[1] for c in chunks]), "vmap")

    def _work_copy(self) -> nn.Module:
        """The training copy the per-client loop trains on, made once (a deep copy of a MobileNetV2 costs tens of
        milliseconds a round): :func:`~flamingo_sim.fl.training.batched.train_one_client` loads every parameter and
        buffer from the round's state into it and clears the gradients before each step, so a kept copy trains as a fresh one."""
        key = (self.device, self.channels_last)
        if key not in self._works:
            self._works[key] = model_copy(self.model, self.device, self.channels_last)
        return self._works[key]

    def _chosen(self, global_params: dict[str, Tensor], task: CohortTask) -> CohortTrainer:
        """The trainer the tuner chose for this cohort's input shape and batch size (measured on the first such cohort)."""
        key = (tuple(task.client_datas[0][0].shape[1:]), task.batch_size)
        if key not in self._tuned:
            self.choice = choice = self.tuner.choose(self, global_params, task)
            self._tuned[key] = choice.candidate.trainer(self.model, self.memory_budget_bytes)
        return self._tuned[key]

    def start_state(self, global_params: dict[str, Tensor]) -> dict[str, Tensor]:
        """The model's state with ``global_params`` put in (checked: names and shapes), on the trainer's device."""
        state = model_state(self.model)
        for name, value in global_params.items():
            if name not in state:
                raise ValueError(f"global_params has {name!r}, which the model does not have (model keys: {', '.join(state)})")
            if value.shape != state[name].shape:
                raise ValueError(f"global_params[{name!r}] has shape {tuple(value.shape)}, the model expects {tuple(state[name].shape)}")
            state[name] = value.detach().to(device=self.device, dtype=state[name].dtype)
        return state

    def _vmap_chunk(
        self, state: dict[str, Tensor], client_datas: Sequence[tuple[Tensor, Tensor]], indices: Tensor, lr: float, prox_mu: float
    ) -> tuple[dict[str, Tensor], Tensor]:
        # All clients' samples in one tensor, moved once; per-step gather indices offset into it.
        k = len(client_datas)
        x_all = torch.cat([x for x, _ in client_datas])
        y_all = torch.cat([y for _, y in client_datas])
        sizes = torch.tensor([int(x.shape[0]) for x, _ in client_datas])
        offsets = torch.cumsum(sizes, 0) - sizes
        gather = indices.transpose(0, 1) + offsets.view(1, k, 1)  # (n_steps, k, batch)
        if self.device.type == "cuda":  # pinned host memory for what is still on the host (resident data is not)
            x_all, y_all, gather = (t.pin_memory().to(self.device, non_blocking=True) if t.device.type == "cpu" else t for t in (x_all, y_all, gather))
        else:
            x_all, y_all = x_all.to(self.device), y_all.to(self.device)
        graphs = self._graphs if self.cuda_graphs else None
        return train_vmap(self.model, state, x_all, y_all, gather, lr, graphs, prox_mu)


def train_cohort(
    model: nn.Module,
    global_params: dict[str, Tensor],
    task: CohortTask,
    mode: Mode = "auto",
    max_batched_clients: int | None = None,
) -> CohortResult:
    """Run ``task``'s local SGD for each client of a cohort, starting from ``global_params``.

    ``model`` supplies the architecture only; it is not modified. ``global_params`` is a model
    state (:func:`model_state`); entries it lacks are taken from ``model``. Training runs on
    ``model``'s device and the result lives there. ``max_batched_clients`` bounds how many
    clients one vmap call trains at once (memory); ``None`` means what the memory budget allows.
    The task's ``prox_mu`` > 0 pulls towards ``global_params``. A one-off :class:`CohortTrainer`; the simulation keeps one across rounds.
    """
    trainer = CohortTrainer(model, strategy=mode, max_batched_clients=max_batched_clients)
    return trainer.train(global_params, task)


@torch.no_grad()
def evaluate_batches(model: nn.Module, params: dict[str, Tensor] | None, x: Tensor, y: Tensor, batch_size: int = 1024) -> tuple[list[int], list[float]]:
    """Per batch of ``batch_size`` test samples: correct predictions and summed cross-entropy.

    Runs in eval mode (BatchNorm uses its running statistics) without modifying ``model``;
    ``params=None`` evaluates the model's own state. :func:`evaluate` adds them up in order.
    """
    device = _model_device(model)
    state = {} if params is None else {n: v.to(device) for n, v in params.items()}
    was_training = model.training
    model.eval()
    correct: list[int] = []
    losses: list[float] = []
    try:
        for start in range(0, x.shape[0], batch_size):
            xb = x[start : start + batch_size].to(device)
            yb = y[start : start + batch_size].to(device)
            out = functional_call(model, state, (xb,)) if state else model(xb)
            losses.append(float(F.cross_entropy(out, yb, reduction="sum")))
            correct.append(int((out.argmax(dim=1) == yb).sum()))
    finally:
        model.train(was_training)
    return correct, losses


def evaluate(model: nn.Module, params: dict[str, Tensor] | None, x: Tensor, y: Tensor, batch_size: int = 1024) -> tuple[float, float]:
    """``(accuracy, mean cross-entropy loss)`` of ``model`` with state ``params`` on ``(x, y)``.

    Runs in eval mode (BatchNorm uses its running statistics) without modifying ``model``;
    ``params=None`` evaluates the model's own state. Accuracy is a fraction in [0, 1].
    """
    if x.shape[0] != y.shape[0] or x.shape[0] == 0:
        raise ValueError(f"need the same, non-zero number of inputs and labels, got {x.shape[0]} and {y.shape[0]}")
    correct, losses = evaluate_batches(model, params, x, y, batch_size)
    loss_sum = 0.0
    for s in losses:
        loss_sum += s
    n = int(x.shape[0])
    return sum(correct) / n, loss_sum / n
