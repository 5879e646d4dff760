"""The ``threads`` strategy: model copies on CPU worker threads equal the per-client loop."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.training.threads import ClientDropout, threads_safe, train_threads
from flamingo_sim.fl.training.trainer import CohortTask, CohortTrainer, choose_strategy, model_state, train_cohort
from flamingo_sim.models import build_model
from tests.fl.runner.test_run import ROOT
from tests.fl.training.test_batched import _datas, _max_diff, _TinyCNN, paper_network_case


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_float64_threads_equal_the_loop_with_fedprox(two_threads):
    model = _TinyCNN().double()
    datas = _datas(5, (3, 8, 8), 4, torch.float64)
    start = model_state(model)
    for mu in (0.0, 0.5):
        kw = dict(n_steps=3, batch_size=8, lr=0.05, seed=1, round_idx=2, prox_mu=mu)
        ref = train_cohort(model, start, CohortTask(datas, [0, 1, 2, 3, 4], **kw), mode="sequential")
        got = CohortTrainer(model, strategy="threads").train(start, CohortTask(datas, [0, 1, 2, 3, 4], **kw))
        assert got.mode == "threads"
        assert _max_diff(got.params, ref.params) < 1e-12
        assert torch.equal(got.params["bn.num_batches_tracked"], torch.tensor([3] * 5))
        torch.testing.assert_close(got.losses, ref.losses, atol=1e-12, rtol=0)
    assert torch.get_num_threads() == 2  # restored after the workers ran on one thread each


def test_dropout_is_per_client_whatever_the_number_of_workers():
    model = _TinyCNN(p_drop=0.5)
    x, y = _datas(1, (3, 8, 8), 4, torch.float32)[0]
    datas = [(x, y), (x.clone(), y.clone()), (x.clone(), y.clone())]  # identical data
    start = model_state(model)
    idx = [torch.arange(16).view(2, 8) % 10] * 3

    def run(workers, seeds):
        return train_threads(model, start, datas, idx, 0.05, workers, seeds)[0]["fc.weight"]

    one, three = run(1, [7, 8, 7]), run(3, [7, 8, 7])
    assert torch.equal(one, three)  # bit for bit, one worker or three
    assert torch.equal(one[0], one[2]) and not torch.equal(one[0], one[1])  # the client's seed decides its masks
    assert not torch.equal(run(2, [9, 8, 7])[0], one[0])


def test_client_dropout_scales_like_nn_dropout():
    drop = ClientDropout(0.25)
    drop.generator.manual_seed(3)
    out = drop(torch.ones(10_000))
    kept = out[out != 0]
    assert torch.allclose(kept, torch.full_like(kept, 1 / 0.75))
    assert abs(len(kept) / 10_000 - 0.75) < 0.02
    assert torch.equal(drop.eval()(torch.ones(3)), torch.ones(3))


def test_a_workers_error_reaches_the_caller():
    model = _TinyCNN()
    datas = _datas(3, (3, 8, 8), 4, torch.float32)
    datas[1] = (datas[1][0], torch.full_like(datas[1][1], 9))  # labels beyond the 4 classes
    with pytest.raises(IndexError, match="out of bounds"):
        train_threads(model, model_state(model), datas, [torch.zeros(1, 8, dtype=torch.int64)] * 3, 0.05, 2, [0, 1, 2])


def test_auto_takes_threads_for_convolutions_on_a_multicore_cpu():
    cpu = torch.device("cpu")
    mobilenet = build_model("mobilenet_v2", (3, 32, 32), 5)
    assert choose_strategy(mobilenet, (3, 32, 32), cpu, 8, cpu_threads=2) == "threads"
    assert choose_strategy(mobilenet, (3, 32, 32), cpu, 8, cpu_threads=1) == "sequential"
    assert choose_strategy(build_model("mlp", (60,), 10), (60,), cpu, 8, cpu_threads=2) == "vmap"

    class Custom(nn.Module):  # a user's layer: its forward might draw random numbers its own way
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.conv(x).mean(dim=(2, 3))

    assert not threads_safe(Custom()) and threads_safe(mobilenet)
    assert not threads_safe(nn.Sequential(nn.Conv2d(3, 4, 3), nn.Dropout2d(0.1)))
    assert choose_strategy(Custom(), (3, 8, 8), cpu, 8, cpu_threads=2) == "sequential"


def test_threads_on_a_gpu_device_is_a_config_error(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA, to ask for cuda and be refused first")
    from flamingo_sim.errors import ConfigError

    with pytest.raises(ConfigError, match="fl.device: 'cuda' asked for a CUDA GPU but torch sees none"):
        run_experiment(ROOT / "experiments/openimage_mobilenet.yaml", out_dir=tmp_path / "r", overrides=["fl.train_mode=threads"],
                       device="cuda", log=lambda m: None)
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["mobilenet_v2", "shufflenet_v2_x2_0", "resnet34"])
def test_paper_networks_float64_threads_equal_the_loop(arch, two_threads):
    """3 clients, 3 steps, 32 px, float64, dropout off (the strategies draw different masks):
    bit for bit the loop on one torch thread, as each worker runs one. (The loop on two threads
    splits its reductions differently: 1e-9 away from itself on one, BatchNorm over 1x1 maps
    amplifying the rounding.)"""
    model, datas, start, kw = paper_network_case(arch)
    got = train_cohort(model, start, CohortTask(datas, [0, 1, 2], **kw), mode="auto")
    torch.set_num_threads(1)
    ref = train_cohort(model, start, CohortTask(datas, [0, 1, 2], **kw), mode="sequential")
    assert got.mode == "threads"
    assert all(torch.equal(got.params[k], ref.params[k]) for k in ref.params)
