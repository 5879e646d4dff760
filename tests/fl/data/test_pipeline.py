"""The real-data path: parallel decoding into a byte-bounded cache, and packed datasets."""

from __future__ import annotations

import numpy as np
import torch

from flamingo_sim.fl.data.openimage import FedScaleImageDataset
from flamingo_sim.fl.data.pipeline import DecodedCache, PackedDataset, is_packed, pack_dataset
from flamingo_sim.fl.runner.run import run_experiment
from tests.fl.data.test_data import _write_fedscale
from tests.fl.runner.test_run import ROOT, TINY_REAL


def _reader(root):
    _write_fedscale(root, {"a": 5, "b": 6, "c": 4, "d": 7})
    return FedScaleImageDataset(root, "train", image_size=8, min_samples_per_client=1)


def test_decoded_cache_serves_the_readers_tensors_and_counts_decoding(tmp_path):
    reader = _reader(tmp_path)
    one_client_bytes = 7 * (3 * 8 * 8 * 4 + 8)  # the largest client, float32 x + int64 y
    cached = DecodedCache(reader, workers=3, cache_bytes=2 * one_client_bytes)
    cached.prefetch([0, 1, 3])
    assert cached.n_decoded == 5 + 6 + 7 and cached.images_per_s > 0
    assert len(cached._cache) == 2 and 0 not in cached._cache  # the byte budget evicted client 0
    for cid in (3, 1, 0, 2):  # two hits, then two misses (each evicting the oldest)
        x, y = cached.client_data(cid)
        rx, ry = reader._read_client(cid)
        assert torch.equal(x, rx) and torch.equal(y, ry)
    assert cached.n_decoded == 18 + 5 + 4  # 0 and 2 decoded again, 1 and 3 were cached
    assert cached.n_clients == 4 and cached.input_shape == (3, 8, 8)  # the reader's attributes


def test_pack_then_read_packed(tmp_path):
    reader = _reader(tmp_path / "raw")
    out = pack_dataset(reader, tmp_path / "packed", workers=2).root
    assert is_packed(out) and not is_packed(tmp_path / "raw")
    packed = PackedDataset(out)
    assert packed.n_clients == 4 and packed.samples_per_client.tolist() == [5, 6, 4, 7]
    assert packed.input_shape == (3, 8, 8) and packed.n_classes == 3
    for cid in range(4):
        x, y = packed.client_data(cid)
        rx, ry = reader.client_data(cid)
        assert x.dtype == torch.float32 and torch.equal(y, ry)
        np.testing.assert_allclose(x.numpy(), rx.numpy(), atol=2e-3, rtol=1e-3)  # float16 on disk
    tx, ty = packed.test_data()
    assert torch.equal(ty, reader.test_data()[1]) and tx.shape == reader.test_data()[0].shape


def test_run_on_a_packed_dataset(tmp_path):
    _write_fedscale(tmp_path / "raw", {"a": 16, "b": 20, "c": 16})
    reader = FedScaleImageDataset(tmp_path / "raw", "train", image_size=32)
    pack_dataset(reader, tmp_path / "packed")
    result = run_experiment(
        ROOT / "experiments/openimage_mobilenet.yaml", out_dir=tmp_path / "run",
        overrides=[f"data.root={tmp_path / 'packed'}", *TINY_REAL], device="cpu", log=lambda m: None,
    )
    assert result.summary["data"].startswith(f"packed dataset at {tmp_path / 'packed'} (3 clients, float16)")
    assert result.metrics["n_kept"].tolist() == [0, 2, 2]  # round 0 (the initial model), then 2 rounds
