"""The optional hooks of the contracts, as the round loops call them: a dataset's ``prefetch``
and ``train_augment`` (:class:`~flamingo_sim.fl.data.base.FederatedDataset`) and a policy's
``settle`` (:class:`~flamingo_sim.devices.policies.Policy`), each with its default when a
dataset or policy does not override it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from flamingo_sim.devices.policies import BaselinePolicy
from flamingo_sim.fl.config import FedBuffConfig
from flamingo_sim.fl.data.proxy import SyntheticFederated
from flamingo_sim.fl.plugins import experiment_policy
from flamingo_sim.fl.sim.fedbuff import AsyncSimulation
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.fl.strategy.selection import UniformSelector
from tests.fl.sim.test_simulation import scripted_parts


class Recording(SyntheticFederated):
    """The scripted scenario's data, recording the hooks; it trains on ``-x`` (so it shows)."""

    def __init__(self) -> None:
        super().__init__(n_clients=4, n_features=5, n_classes=3, seed=0, mean_samples=40, test_samples=50, test_clients=4)
        self.calls: list[tuple] = []

    def prefetch(self, client_ids):
        self.calls.append(("prefetch", [int(c) for c in client_ids]))

    def train_augment(self, x, client_id, round_idx, seed):
        self.calls.append(("augment", int(client_id), round_idx, seed))
        return -x


class Settling(BaselinePolicy):
    def __init__(self, config=None) -> None:
        super().__init__(config)
        self.settled: list[np.ndarray] = []

    def settle(self, outcome, done_frac):
        self.settled.append(np.asarray(done_frac).copy())


def test_the_defaults_do_nothing():
    ds = SyntheticFederated(n_clients=3, seed=0)
    x = torch.randn(4, 60)
    assert ds.train_augment(x, 1, 2, 3) is x and ds.prefetch([0, 1]) is None
    assert BaselinePolicy().settle(None, np.ones(2)) is None  # type: ignore[arg-type]


def test_the_round_loop_calls_the_hooks():
    parts = scripted_parts(rounds=1)
    plain = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 7, UniformSelector())
    plain.step()
    data = Recording()
    policy = Settling(parts.cfg.policy)
    sim = Simulation(dataclasses.replace(parts, dataset=data), policy, "baseline", 7, UniformSelector())
    row = sim.step().to_row()
    # client 0 is the one kept (tests/fl/sim/test_simulation.py: test_scripted_round_by_hand)
    assert row["n_kept"] == 1 and data.calls == [("prefetch", [0]), ("augment", 0, 1, 7)]
    assert any(not torch.equal(plain.params[k], sim.params[k]) for k in sim.params)  # it trained on -x
    assert len(policy.settled) == 1 and policy.settled[0].shape == (3,) and policy.settled[0].max() == 1.0


@pytest.mark.slow
def test_fedbuff_calls_the_hooks_like_the_round_loop():
    parts = scripted_parts()
    parts = dataclasses.replace(parts, dataset=Recording(),
                                cfg=dataclasses.replace(parts.cfg, fedbuff=FedBuffConfig(buffer_size=1, concurrency=3)))
    policy = Settling(parts.cfg.policy)
    sim = AsyncSimulation(parts, policy, "baseline", 5, UniformSelector())
    sim.step()
    # client 0 arrives first (tests/fl/sim/test_fedbuff.py); trained as the sync loop trains, in
    # its dispatch's own stream (dispatch ids, like its minibatches), round 0
    prefetched = [c for kind, *rest in parts.dataset.calls if kind == "prefetch" for c in rest[0]]
    augmented = [rest for kind, *rest in parts.dataset.calls if kind == "augment"]
    assert prefetched == [0] and len(augmented) == 1 and augmented[0][1:] == [0, 5]
    assert policy.settled and all(d.shape == (1,) for d in policy.settled)  # one per dispatch
