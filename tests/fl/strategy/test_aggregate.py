"""FedAvg against hand-computed numbers."""

from __future__ import annotations

import pytest
import torch

from flamingo_sim.fl.strategy.aggregate import fedavg


def test_fedavg_sample_weighted_mean_by_hand():
    stacked = {
        "w": torch.tensor([[1.0, 2.0], [3.0, 6.0], [5.0, -2.0]]),
        "b": torch.tensor([0.0, 10.0, 20.0]),
    }
    # weights 1, 1, 2 -> (1*p0 + 1*p1 + 2*p2) / 4
    out = fedavg(stacked, torch.tensor([1, 1, 2]))
    assert torch.allclose(out["w"], torch.tensor([(1 + 3 + 10) / 4, (2 + 6 - 4) / 4]))  # [3.5, 1.0]
    assert torch.allclose(out["b"], torch.tensor((0 + 10 + 40) / 4))  # 12.5
    assert out["w"].dtype == torch.float32 and out["w"].shape == (2,)


def test_fedavg_equal_weights_is_plain_mean_and_scale_free():
    stacked = {"w": torch.tensor([[2.0], [4.0]])}
    assert fedavg(stacked, [1.0, 1.0])["w"].item() == pytest.approx(3.0)
    assert fedavg(stacked, [300, 100])["w"].item() == pytest.approx(2.5)
    assert fedavg(stacked, [3, 1])["w"].item() == pytest.approx(2.5)


def test_fedavg_rounds_integer_buffers():
    out = fedavg({"num_batches_tracked": torch.tensor([20, 21, 21])}, [1, 1, 1])
    assert out["num_batches_tracked"].dtype == torch.int64 and out["num_batches_tracked"].item() == 21


def test_fedavg_is_pure():
    stacked = {"w": torch.tensor([[1.0], [3.0]])}
    before = stacked["w"].clone()
    fedavg(stacked, [1, 3])
    assert torch.equal(stacked["w"], before)


@pytest.mark.parametrize("weights", [[1.0, -1.0], [0.0, 0.0], [], [1.0, float("nan")]])
def test_fedavg_rejects_bad_weights(weights):
    with pytest.raises(ValueError):
        fedavg({"w": torch.zeros(2, 3)}, weights)


def test_fedavg_rejects_mismatched_leading_dim():
    with pytest.raises(ValueError, match="w: expected a leading client dimension of 3"):
        fedavg({"w": torch.zeros(2, 3)}, [1, 1, 1])


# -- what mutation testing found unchecked (docs/install.md, "Mutation testing") -------------------
def test_fedavg_takes_zero_and_fractional_weights_and_names_bad_ones():
    """FedBuff's staleness weights are below 1 and a client may weigh 0: both are weights."""
    stacked = {"w": torch.tensor([[100.0], [1.0], [3.0]], dtype=torch.float64)}
    assert torch.equal(fedavg(stacked, [0.0, 0.5, 0.5])["w"], torch.tensor([2.0], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^no clients to aggregate$"):
        fedavg({"w": torch.zeros(0, 1)}, [])
    with pytest.raises(ValueError, match=r"^weights sum to zero$"):
        fedavg(stacked, [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"^weights must be finite and non-negative, got \[1\.0, -1\.0, 1\.0\]$"):
        fedavg(stacked, [1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match=r"^weights must be finite and non-negative, got \[1\.0, nan, 1\.0\]$"):
        fedavg(stacked, [1.0, float("nan"), 1.0])
