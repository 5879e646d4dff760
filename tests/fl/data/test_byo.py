"""Bring your own data: LEAF (FEMNIST, Shakespeare) and per-client arrays, models from import paths."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from flamingo_sim.errors import ConfigError, FlamingoError, InputDataError
from flamingo_sim.fl.data.byo import LEAF_LETTERS, read_arrays, read_leaf
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.models import build_model

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "experiments" / "data"


def test_leaf_femnist_layout():
    ds = read_leaf(DATA / "leaf_femnist_tiny")
    blob = json.loads(next((DATA / "leaf_femnist_tiny" / "train").glob("*.json")).read_text())
    assert ds.name == "leaf femnist" and ds.n_clients == 6 and ds.n_classes == 62
    assert ds.input_shape == (1, 28, 28) and ds.samples_per_client.tolist() == [16] * 6
    x, y = ds.client_data(2)
    user = blob["user_data"][blob["users"][2]]
    assert x.dtype == torch.float32 and x[3, 0, 1, 2].item() == pytest.approx(user["x"][3][28 + 2])
    assert y.tolist() == user["y"]
    assert len(ds.test_data()[1]) == 24


def test_leaf_shakespeare_letters_by_hand():
    assert len(LEAF_LETTERS) == 80
    ds = read_leaf(DATA / "leaf_shakespeare_tiny")
    assert ds.name == "leaf shakespeare" and ds.n_classes == 80 and ds.input_shape == (80,)
    x, y = ds.client_data(0)
    # "To be" -> T = 25 + 19 = 44, o = 53 + 14 = 67, space = 1, b = 54, e = 57 (A = 25, a = 53)
    assert x[0, :5].tolist() == [44.0, 67.0, 1.0, 54.0, 57.0]
    assert y.dtype == torch.int64 and 0 <= int(y.min()) and int(y.max()) < 80


def test_arrays_npz_and_parquet(tmp_path):
    ds = read_arrays(DATA / "arrays_tiny")
    z = np.load(DATA / "arrays_tiny" / "train" / "client_003.npz")
    assert ds.n_clients == 8 and ds.input_shape == (12,)
    assert torch.equal(ds.client_data(3)[0], torch.from_numpy(z["x"])) and ds.client_data(3)[1].tolist() == z["y"].tolist()
    (tmp_path / "train").mkdir()
    for name, rows in [("a", [[0.5, 1.5, 0], [2.0, 3.0, 2]]), ("b", [[1.0, 1.0, 1]])]:
        pd.DataFrame(rows, columns=["f0", "f1", "y"]).astype({"y": "int64"}).to_parquet(tmp_path / "train" / f"{name}.parquet")
    pd.DataFrame([[0.0, 0.0, 1]], columns=["f0", "f1", "y"]).to_parquet(tmp_path / "test.parquet")
    ds = read_arrays(tmp_path)
    assert ds.n_clients == 2 and ds.n_classes == 3 and ds.client_data(0)[0].tolist() == [[0.5, 1.5], [2.0, 3.0]]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: None, "expected a train/ directory of per-client .npz or .parquet files"),
        (lambda d: ((d / "train").mkdir(), np.savez(d / "train" / "c.npz", x=np.zeros((2, 3)))), "c.npz: expected arrays 'x' and 'y', found x"),
        (lambda d: ((d / "train").mkdir(), np.savez(d / "train" / "c.npz", x=np.zeros((2, 3)), y=np.array([0, -1]))), "c.npz: y must hold class ids >= 0, got -1"),
        (lambda d: ((d / "train").mkdir(), np.savez(d / "train" / "c.npz", x=np.zeros((2, 3)), y=np.array([0, 1]))), "no test set (expected test.npz, test.parquet or a test/ directory)"),
    ],
)
def test_bad_arrays_are_one_line(tmp_path, make, message):
    make(tmp_path)
    with pytest.raises(InputDataError) as exc:
        read_arrays(tmp_path)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_bad_leaf_is_one_line(tmp_path):
    for split in ("train", "test"):
        (tmp_path / split).mkdir()
        (tmp_path / split / "d.json").write_text(json.dumps({"users": ["u"], "num_samples": [1]}))
    with pytest.raises(InputDataError, match=r"d\.json: expected LEAF's .* missing 'user_data'"):
        read_leaf(tmp_path)


def test_model_from_an_import_path():
    model = build_model("byo_models:CharBag", (80,), 80, seed=0, search=[ROOT / "experiments"])
    assert model(torch.zeros(2, 80)).shape == (2, 80)
    again = build_model("byo_models:CharBag", (80,), 80, seed=0, search=[ROOT / "experiments"])
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    with pytest.raises(ConfigError, match=r"data\.model: model 'nope_mod:Net': cannot import"):
        build_model("nope_mod:Net", (3,), 2)
    with pytest.raises(FlamingoError, match=r"model 'builtins:slice': the factory returned slice, not a torch\.nn\.Module"):
        build_model("builtins:slice", (3,), 2)
    with pytest.raises(FlamingoError, match=r"model 'json:dumps': calling it with \(input_shape=\(3,\), n_classes=2\) failed \(TypeError"):
        build_model("json:dumps", (3,), 2)


@pytest.mark.slow
def test_leaf_shakespeare_experiment_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    res = run_experiment(ROOT / "experiments/toolkit_leaf_shakespeare.yaml", out_dir=tmp_path / "r", overrides=["fl.rounds=2", "fl.local_steps=2", "policies=[baseline]"], log=lambda m: None)
    assert "leaf shakespeare" in res.summary["data"] and len(res.metrics) == 3  # round 0 (the initial model) and 2 rounds
    with pytest.raises(ConfigError, match=r"data\.root: .*expected LEAF's train/ directory"):
        run_experiment(ROOT / "experiments/toolkit_leaf_shakespeare.yaml", out_dir=tmp_path / "x", overrides=[f"data.root={tmp_path}"], log=lambda m: None)
    assert not (tmp_path / "x").exists()
