"""The split of a job over ranks: balanced contiguous shares, flat buffers that round-trip, and a
one-process group whose distributed cohort gives exactly what the local one gives."""

from __future__ import annotations

import socket

import numpy as np
import pytest
import torch

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.data.base import FederatedDataset
from flamingo_sim.fl.distributed.seam import DistributedSeam, Layout, _evaluate_share, _layout, _train_share, prepare_trainer, serve, split_by_cost
from flamingo_sim.fl.distributed.world import World, start
from flamingo_sim.fl.sim.seam import LocalSeam, TrainJob
from flamingo_sim.fl.training.trainer import CohortTrainer, model_state
from flamingo_sim.models import build_model


def _convnet() -> torch.nn.Module:
    """Convolution, BatchNorm (an int64 buffer) and dropout: what makes the split delicate, small."""
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Dropout(0.2), nn.Linear(4 * 6 * 6, 3))


def test_split_by_cost_balances_contiguous_shares():
    assert split_by_cost(np.ones(10), 3) == [(0, 3), (3, 7), (7, 10)]  # 3.33 and 6.67 round to the nearest cut
    assert split_by_cost(np.ones(4), 1) == [(0, 4)]
    assert split_by_cost(np.ones(2), 3) == [(0, 1), (1, 1), (1, 2)]  # fewer clients than ranks: an empty share
    assert split_by_cost([], 2) == [(0, 0), (0, 0)]
    # unequal work: one heavy client takes a share of its own
    assert split_by_cost([6, 1, 1, 1, 1, 1, 1], 2) == [(0, 1), (1, 7)]
    assert split_by_cost([1, 1, 1, 1, 4, 2], 2) == [(0, 4), (4, 6)]  # sums 4 | 6: the cut nearest half of 10 (8 | 2 is further)
    with pytest.raises(ValueError, match="parts must be >= 1"):
        split_by_cost([1.0], 0)


def test_layout_packs_mixed_dtypes_and_round_trips():
    model = _convnet()
    state = model_state(model)
    stacked = {k: torch.stack([v, v + 1 if v.dtype.is_floating_point else v + 2]) for k, v in state.items()}
    layout = Layout(state)
    rows = layout.pack(stacked, 2, torch.device("cpu"))
    assert set(rows) == {torch.float32, torch.int64}
    assert rows[torch.int64].shape == (2, sum(1 for v in state.values() if v.dtype == torch.int64))
    assert rows[torch.float32].shape == (2, sum(v.numel() for v in state.values() if v.dtype == torch.float32))
    back = layout.unpack(rows)
    assert list(back) == [k for k in state if state[k].dtype == torch.float32] + [k for k in state if state[k].dtype == torch.int64]
    for k in state:
        assert torch.equal(back[k], stacked[k]), k
    padded = layout.pack(stacked, 2, torch.device("cpu"), rows=3)  # a share padded to the widest one
    assert padded[torch.float32].shape == (3, rows[torch.float32].shape[1]) and torch.equal(padded[torch.float32][:2], rows[torch.float32])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _local(model, strategy="auto"):
    g = torch.Generator().manual_seed(0)
    datas = {c: (torch.randn(12 + c, 3, 8, 8, generator=g), torch.randint(0, 3, (12 + c,), generator=g)) for c in range(5)}

    class Data(FederatedDataset):  # the contract: prefetch and train_augment keep their defaults
        def client_data(self, c):
            return datas[c]

    test = (torch.randn(1500, 3, 8, 8, generator=g), torch.randint(0, 3, (1500,), generator=g))  # two evaluation batches
    return LocalSeam(Data(), CohortTrainer(model, strategy=strategy), test, local_steps=2, batch_size=4, lr=0.005, seed=0,
                       precision="fp32", device=torch.device("cpu"))


def test_one_process_group_gives_the_local_result(monkeypatch):
    """World size 1 through the real collectives (gloo): the same states, losses and accuracy, bit for bit."""
    import torch.distributed as dist

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    model = _convnet()
    local = _local(model, "threads")
    job = TrainJob(model_state(model), (0, 3, 4), (0, 3, 4), round_idx=2, prox_mu=0.01)
    want = local.train(job)
    comm = start(World(0, 1, 0, 1), timeout_s=30)
    try:
        cohort = DistributedSeam(local, comm, work_per_client=8.0)
        for got in (cohort.train(job), _train_share(local, comm, _layout(local), job, 8.0)):  # a group of one skips the collectives
            assert got is not None
            for k in want.params:
                assert torch.equal(got.params[k], want.params[k]), k
            assert torch.equal(got.losses, want.losses) and got.n_samples.tolist() == [12.0, 15.0, 16.0]
        assert all(torch.isfinite(v).all() for v in want.params.values())
        assert cohort.evaluate(job.start) == local.evaluate(job.start) == _evaluate_share(local, comm, job.start)
        assert comm.train_jobs == 0 and comm.calls == 5 and comm.bytes_moved == 0  # two barriers, a receive, two gathers; nothing moved
        cohort.close()
        with pytest.raises(ValueError, match="unknown job kind 7"):  # a header no rank 0 sends
            monkeypatch.setattr("flamingo_sim.fl.distributed.seam._Job.receive", lambda self: (7, None, None))
            serve(local, comm, 8.0)
    finally:
        dist.destroy_process_group()


def test_dropout_models_train_with_per_client_masks_over_several_ranks():
    model = _convnet()
    auto = _local(model)
    prepare_trainer(auto, 2, print)
    assert auto.trainer.strategy == "threads"
    one = _local(model)
    prepare_trainer(one, 1, print)
    assert one.trainer.strategy == "auto"  # one process: nothing to change
    with pytest.raises(ConfigError, match="fl.train_mode: 'sequential' draws every client's dropout masks from one generator"):
        prepare_trainer(_local(model, "sequential"), 3, print)
    mlp = _local(build_model("mlp", (3, 8, 8), 3), "vmap")
    prepare_trainer(mlp, 3, print)  # no dropout: vmap's clients do not depend on who else is in the batch
    assert mlp.trainer.strategy == "vmap"


class _Wire:
    """A fake collective: rank 0's broadcasts recorded, and replayed to a receiving rank."""

    def __init__(self) -> None:
        self.device = torch.device("cpu")
        self.sent: list[tuple[str, torch.Tensor]] = []
        self.train_jobs = self.eval_jobs = 0
        self.replay: list[torch.Tensor] = []

    def broadcast(self, tensor: torch.Tensor, what: str) -> torch.Tensor:
        if self.replay:
            tensor.copy_(self.replay.pop(0))
        else:
            self.sent.append((what, tensor.clone()))
        return tensor


def test_the_model_crosses_once_per_change():
    from flamingo_sim.fl.distributed.seam import EVAL, TRAIN, _Job

    state = {"w": torch.tensor([[1.0, -0.0], [2.0, 3.0]]), "n": torch.tensor(4)}
    layout = Layout(state)
    sender, receiver = _Job(_Wire(), layout), _Job(_Wire(), layout)
    job = TrainJob({k: v.clone() for k, v in state.items()}, (5, 7), (11, 13), 1, 0.0, None)
    sender.send(EVAL, params=state)
    sender.send(TRAIN, job)  # the same bits: header and clients only
    changed = {"w": torch.tensor([[1.0, 0.0], [2.0, 3.0]]), "n": torch.tensor(4)}  # -0.0 -> 0.0: other bits, sent again
    sender.send(EVAL, params=changed)
    whats = [w for w, _ in sender.comm.sent]
    assert whats == ["job header", "model broadcast (torch.float32)", "model broadcast (torch.int64)",
                     "job header", "job clients",
                     "job header", "model broadcast (torch.float32)", "model broadcast (torch.int64)"]
    receiver.comm.replay = [t for _, t in sender.comm.sent]
    got = [receiver.receive() for _ in range(3)]
    assert got[0][0] == EVAL and all(torch.equal(got[0][2][k], state[k]) for k in state)
    kind, train, _ = got[1]
    assert kind == TRAIN and train is not None and train.clients == (5, 7) and train.keys == (11, 13)
    assert all(torch.equal(train.start[k], state[k]) for k in state)
    assert torch.equal(got[2][2]["w"].view(torch.int32), changed["w"].view(torch.int32))  # the bits, not only the values
    train.start["w"].add_(1.0)  # a job's model is its own: the kept buffer is not changed through it
    assert torch.equal(receiver.last[torch.float32], sender.last[torch.float32])
