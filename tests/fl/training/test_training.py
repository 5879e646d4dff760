"""Local training: batched equals sequential, hand-checked SGD, determinism, learning."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from flamingo_sim.fl.data.proxy import SyntheticFederated
from flamingo_sim.fl.strategy.aggregate import fedavg
from flamingo_sim.fl.training.trainer import CohortTask, evaluate, minibatch_indices, model_state, supports_batched, train_cohort
from flamingo_sim.models import build_model
from flamingo_sim.rng import rng


def _cohort(ds: SyntheticFederated, ids: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [ds.client_data(c) for c in ids]


def test_minibatch_indices_cycle_through_shuffled_data():
    idx = minibatch_indices(10, n_steps=5, batch_size=4, seed=1, round_idx=2, client_id=3)
    assert idx.shape == (5, 4) and idx.dtype == torch.int64
    flat = idx.flatten().tolist()
    assert sorted(flat[:10]) == list(range(10)) and sorted(flat[10:20]) == list(range(10))
    assert flat[:10] != list(range(10))  # shuffled
    assert torch.equal(idx, minibatch_indices(10, 5, 4, seed=1, round_idx=2, client_id=3))
    assert not torch.equal(idx, minibatch_indices(10, 5, 4, seed=1, round_idx=3, client_id=3))
    assert not torch.equal(idx, minibatch_indices(10, 5, 4, seed=1, round_idx=2, client_id=4))


def test_cohort_indices_are_each_clients_permutations_one_after_another():
    """Issue 52: a cohort's indices (streams seeded at once, a small client's permutations drawn in one ``permuted`` call)
    are what one ``rng(seed, "local-shuffle", round, client).permutation(n)`` after another, concatenated and cut, gives."""
    from flamingo_sim.fl.training.trainer import cohort_indices

    def one_at_a_time(n: int, cid: int, total: int) -> np.ndarray:
        gen, out = rng(4, "local-shuffle", 9, cid), []
        while sum(map(len, out)) < total:
            out.append(gen.permutation(n))
        return np.concatenate(out)[:total]

    sizes, ids = [1, 2, 15, 16, 17, 100, 319, 320, 321, 1000], [0, 7, 2**32, 5, 2**40 + 1, 11, 12, 13, 14, 2**63]
    got = cohort_indices(sizes, ids, 20, 16, seed=4, round_idx=9)
    assert got.shape == (10, 20, 16)
    for row, n, cid in zip(got, sizes, ids):
        assert np.array_equal(row.flatten().numpy(), one_at_a_time(n, cid, 320)), n


def test_the_per_client_loop_trains_on_a_kept_copy_as_on_a_fresh_one():
    """Issue 52: the sequential strategy keeps its training copy across rounds; a second cohort (another global state, the
    first cohort's gradients and BatchNorm statistics left in the copy) trains to what a new trainer gives, bit for bit."""
    from flamingo_sim.fl.training.trainer import CohortTrainer

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    datas = [(torch.randn(20, 4), torch.randint(0, 3, (20,))) for _ in range(3)]
    task = lambda r: CohortTask(datas, [0, 1, 2], n_steps=4, batch_size=5, lr=0.1, seed=0, round_idx=r)  # noqa: E731
    kept = CohortTrainer(model, strategy="sequential")
    first = kept.train(model_state(model), task(1))
    start = {k: v[0] for k, v in first.params.items()}
    again, fresh = kept.train(start, task(2)), CohortTrainer(model, strategy="sequential").train(start, task(2))
    assert again.mode == fresh.mode == "sequential"
    assert all(torch.equal(again.params[k], fresh.params[k]) for k in fresh.params) and torch.equal(again.losses, fresh.losses)


def test_one_sgd_step_by_hand_on_logreg():
    model = build_model("logreg", (2,), 2)
    state = {"1.weight": torch.tensor([[1.0, 0.0], [0.0, 1.0]]), "1.bias": torch.zeros(2)}
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    y = torch.tensor([1, 1])
    res = train_cohort(model, state, CohortTask([(x, y)], [0], n_steps=1, batch_size=2, lr=0.5, seed=0, round_idx=0))
    # logits: sample 0 -> (1, 0), sample 1 -> (0, 2); p = softmax; grad_logits = (p - onehot) / 2
    e = np.e
    p0 = np.array([e / (e + 1), 1 / (e + 1)])
    p1 = np.array([1 / (1 + e**2), e**2 / (1 + e**2)])
    g0, g1 = (p0 - [0, 1]) / 2, (p1 - [0, 1]) / 2
    grad_w = np.outer(g0, [1, 0]) + np.outer(g1, [0, 2])
    grad_b = g0 + g1
    expected_loss = (-np.log(p0[1]) - np.log(p1[1])) / 2
    assert res.mode == "vmap"
    assert torch.allclose(res.params["1.weight"][0], torch.tensor(np.eye(2) - 0.5 * grad_w, dtype=torch.float32), atol=1e-6)
    assert torch.allclose(res.params["1.bias"][0], torch.tensor(-0.5 * grad_b, dtype=torch.float32), atol=1e-6)
    assert res.losses[0].item() == pytest.approx(expected_loss, rel=1e-6)


@pytest.mark.parametrize("name", ["mlp", "logreg"])
def test_batched_equals_sequential(name):
    ds = SyntheticFederated(40, seed=4)
    ids = [3, 17, 0, 25, 9]  # clients of different sizes
    model = build_model(name, ds.input_shape, ds.n_classes, seed=1)
    start = model_state(model)
    kwargs = dict(n_steps=12, batch_size=16, lr=0.05, seed=9, round_idx=2)
    bat = train_cohort(model, start, CohortTask(_cohort(ds, ids), ids, **kwargs), mode="batched")
    seq = train_cohort(model, start, CohortTask(_cohort(ds, ids), ids, **kwargs), mode="sequential")
    assert (bat.mode, seq.mode) == ("vmap", "sequential")
    for key in start:
        assert bat.params[key].shape == (len(ids), *start[key].shape)
        torch.testing.assert_close(bat.params[key], seq.params[key], atol=1e-5, rtol=1e-5)
        assert not torch.allclose(bat.params[key][0], start[key])  # it trained
    torch.testing.assert_close(bat.losses, seq.losses, atol=1e-5, rtol=1e-5)
    chunked = train_cohort(model, start, CohortTask(_cohort(ds, ids), ids, **kwargs), mode="batched", max_batched_clients=2)
    for key in start:
        torch.testing.assert_close(chunked.params[key], bat.params[key], atol=1e-6, rtol=1e-6)


def test_training_is_deterministic_and_leaves_model_alone():
    ds = SyntheticFederated(20, seed=4)
    model = build_model("mlp", ds.input_shape, ds.n_classes, seed=1)
    before = model_state(model)
    ids = [1, 2, 3]
    a = train_cohort(model, before, CohortTask(_cohort(ds, ids), ids, 5, 16, 0.05, seed=1, round_idx=0))
    b = train_cohort(model, before, CohortTask(_cohort(ds, ids), ids, 5, 16, 0.05, seed=1, round_idx=0))
    c = train_cohort(model, before, CohortTask(_cohort(ds, ids), ids, 5, 16, 0.05, seed=1, round_idx=1))
    for key in before:
        assert torch.equal(a.params[key], b.params[key])
        assert torch.equal(model_state(model)[key], before[key])
    assert not torch.equal(a.params["1.weight"], c.params["1.weight"])  # other round, other batches
    # A client's update does not depend on who else is in the cohort.
    solo = train_cohort(model, before, CohortTask(_cohort(ds, [2]), [2], 5, 16, 0.05, seed=1, round_idx=0))
    torch.testing.assert_close(solo.params["1.weight"][0], a.params["1.weight"][1], atol=1e-6, rtol=1e-6)


class _TinyBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 8)
        self.bn = nn.BatchNorm1d(8)
        self.out = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.bn(self.fc(x))))


def test_models_with_buffers_train_batched_with_per_client_buffers():
    model = _TinyBN()
    assert supports_batched(model)
    gen = torch.Generator().manual_seed(0)
    datas = [(torch.randn(20, 6, generator=gen), torch.randint(0, 3, (20,), generator=gen)) for _ in range(2)]
    res = train_cohort(model, model_state(model), CohortTask(datas, [0, 1], 3, 8, 0.1, seed=0, round_idx=0), mode="batched")
    assert res.mode == "vmap"
    assert res.params["bn.num_batches_tracked"].tolist() == [3, 3]
    assert not torch.allclose(res.params["bn.running_mean"][0], torch.zeros(8))
    assert not torch.allclose(res.params["bn.running_mean"][0], res.params["bn.running_mean"][1])  # each its own
    merged = fedavg(res.params, [20, 20])
    acc, loss = evaluate(model, merged, datas[0][0], datas[0][1])
    assert 0.0 <= acc <= 1.0 and loss > 0


def test_evaluate_by_hand():
    model = build_model("logreg", (2,), 2)
    params = {"1.weight": torch.tensor([[1.0, 0.0], [0.0, 1.0]]), "1.bias": torch.zeros(2)}
    x = torch.tensor([[2.0, 0.0], [0.0, 3.0], [1.0, 0.0], [0.0, 0.0]])
    y = torch.tensor([0, 1, 1, 0])  # predictions 0, 1, 0, 0 (tie -> first) -> 3 of 4 right
    acc, loss = evaluate(model, params, x, y, batch_size=3)
    logits = x @ params["1.weight"].T
    expected = torch.nn.functional.cross_entropy(logits, y).item()
    assert acc == pytest.approx(0.75)
    assert loss == pytest.approx(expected, rel=1e-6)
    model.train()
    evaluate(model, params, x, y)
    assert model.training


def test_validation_errors():
    model = build_model("logreg", (2,), 2)
    data = [(torch.zeros(4, 2), torch.zeros(4, dtype=torch.int64))]
    with pytest.raises(ValueError, match="1 client datasets but 2 client ids"):
        train_cohort(model, model_state(model), CohortTask(data, [0, 1], 1, 2, 0.1, 0, 0))
    with pytest.raises(ValueError, match="lr"):
        train_cohort(model, model_state(model), CohortTask(data, [0], 1, 2, 0.0, 0, 0))
    with pytest.raises(ValueError, match="mode"):
        train_cohort(model, model_state(model), CohortTask(data, [0], 1, 2, 0.1, 0, 0), mode="fast")


@pytest.mark.slow
def test_fedavg_on_synthetic_improves_accuracy():
    ds = SyntheticFederated(2000, seed=0)
    model = build_model("mlp", ds.input_shape, ds.n_classes, seed=0)
    xt, yt = ds.test_data()
    state = model_state(model)
    acc0, loss0 = evaluate(model, state, xt, yt)
    for r in range(20):
        ids = rng(0, "test-selection", r).choice(ds.n_clients, 30, replace=False).tolist()
        res = train_cohort(model, state, CohortTask(_cohort(ds, ids), ids, 20, 16, 0.05, seed=0, round_idx=r))
        state = fedavg(res.params, ds.samples_per_client[ids])
    acc, loss = evaluate(model, state, xt, yt)
    assert acc > acc0 + 0.15, (acc0, acc)
    assert loss < loss0 - 0.3, (loss0, loss)


def test_global_params_must_match_the_model():
    model = build_model("logreg", (2,), 2)
    data = [(torch.zeros(4, 2), torch.zeros(4, dtype=torch.int64))]
    with pytest.raises(ValueError, match="'fc.weight', which the model does not have"):
        train_cohort(model, {"fc.weight": torch.zeros(2, 2)}, CohortTask(data, [0], 1, 2, 0.1, 0, 0))
    with pytest.raises(ValueError, match=r"has shape \(3, 2\), the model expects \(2, 2\)"):
        train_cohort(model, {"1.weight": torch.zeros(3, 2)}, CohortTask(data, [0], 1, 2, 0.1, 0, 0))
