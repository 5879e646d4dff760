"""fl.device / --device, fl.threads / --threads, explicit precision; the shipped experiments on real layouts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from flamingo_sim.cli import main
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.training.device import precision_context, resolve_device, set_threads
from tests.fl.runner.test_run import ROOT, TINY_REAL

NO_CUDA = not torch.cuda.is_available()


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == (torch.device("cuda:0") if not NO_CUDA else torch.device("cpu"))
    with pytest.raises(ConfigError, match=r"^fl.device: expected auto, cpu, cuda or cuda:N, got 'gpu'$"):
        resolve_device("gpu")
    with pytest.raises(ConfigError, match=r"cuda:x"):
        resolve_device("cuda:x")


@pytest.mark.skipif(not NO_CUDA, reason="checks the no-GPU message")
def test_cuda_without_a_gpu_is_one_line():
    with pytest.raises(ConfigError, match=r"^fl.device: 'cuda:1' asked for a CUDA GPU but torch sees none .*; use --device cpu$"):
        resolve_device("cuda:1")


def test_set_threads_once_and_default(monkeypatch):
    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        assert set_threads(None) == 2
        assert set_threads(None, small_model=True) == 2  # the environment wins
        monkeypatch.delenv("OMP_NUM_THREADS")
        assert set_threads(None, small_model=True) == 1 and torch.get_num_threads() == 1
        monkeypatch.setattr("flamingo_sim.fl.training.device.usable_cores", lambda: 3)
        assert set_threads(None) == 3 and torch.get_num_threads() == 3
        with pytest.raises(ConfigError, match="fl.threads: expected a count >= 1, got 0"):
            set_threads(0)
    finally:
        torch.set_num_threads(before)


def test_precision_is_fp32_unless_asked():
    torch.backends.cudnn.allow_tf32 = True  # torch's own default
    with precision_context("fp32", torch.device("cpu")):
        assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
    with precision_context("tf32", torch.device("cpu")):
        assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
    with precision_context("bf16", torch.device("cpu")):
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16 and torch.is_autocast_enabled("cpu")
    assert torch.backends.cudnn.allow_tf32  # restored
    with pytest.raises(ValueError, match="precision must be one of fp32, tf32, bf16, got 'fp16'"):
        with precision_context("fp16", torch.device("cpu")):
            pass


def test_bad_device_fails_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", str(ROOT / "experiments/openimage_mobilenet.yaml"), "--out", str(out), "--device", "tpu"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "device: expected auto, cpu, cuda or cuda:N, got 'tpu'" in err[0]
    assert not out.exists()


def _tiny_layout(root: Path, experiment: str) -> None:
    if experiment.startswith("speech"):
        from tests.fl.data.test_speech import _write_speech

        _write_speech(root, {"a": 16, "b": 20, "c": 16})
    else:
        from tests.fl.data.test_data import _write_fedscale

        _write_fedscale(root, {"a": 16, "b": 20, "c": 16})


@pytest.mark.slow
@pytest.mark.parametrize("name", ["openimage_mobilenet", "openimage_shufflenet", "speech_resnet34"])
def test_shipped_experiments_on_a_tiny_real_layout_with_device_cpu(tmp_path, name):
    root = tmp_path / "data"
    _tiny_layout(root, name)
    before = torch.get_num_threads()
    try:
        result = run_experiment(
            ROOT / "experiments" / f"{name}.yaml", out_dir=tmp_path / "run", overrides=[f"data.root={root}", *TINY_REAL],
            device="cpu", threads=1, log=lambda m: None,
        )
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert result.summary["data"].startswith("FedScale ")
    assert result.metrics["n_kept"].tolist() == [0, 2, 2] and result.metrics["accuracy"].notna().all()
    saved = (tmp_path / "run" / "config.yaml").read_text()
    assert "device: cpu" in saved and "threads: 1" in saved
