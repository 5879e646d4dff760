"""Datasets: the lazy synthetic proxy and the FedScale image layout reader."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from PIL import Image

from flamingo_sim.errors import InputDataError
from flamingo_sim.fl.data import proxy
from flamingo_sim.fl.data.base import DeviceResident, FederatedDataset
from flamingo_sim.fl.data.openimage import FedScaleImageDataset
from flamingo_sim.fl.data.proxy import SyntheticFederated
from tests.layouts import COLORS  # noqa: F401 - a name the tests below use
from tests.layouts import write_openimage as _write_fedscale

# ---------------------------------------------------------------- synthetic


def test_synthetic_satisfies_protocol_and_shapes():
    ds = SyntheticFederated(50, n_classes=7, n_features=12, seed=3)
    assert isinstance(ds, FederatedDataset)
    assert ds.samples_per_client.shape == (50,)
    assert ds.samples_per_client.dtype == np.int64
    x, y = ds.client_data(4)
    assert x.dtype == torch.float32 and y.dtype == torch.int64
    assert x.shape == (ds.samples_per_client[4], 12) and y.shape == (ds.samples_per_client[4],)
    assert int(y.min()) >= 0 and int(y.max()) < 7
    xt, yt = ds.test_data()
    assert xt.shape == (ds.test_samples, 12) and yt.shape == (ds.test_samples,)
    assert "NOT real data" in ds.description and "50 clients" in ds.description


def test_synthetic_client_data_depends_only_on_seed_and_client():
    a = SyntheticFederated(100, seed=11)
    b = SyntheticFederated(300, seed=11)  # larger population, different access order
    b.client_data(99)
    b.client_data(5)
    xa, ya = a.client_data(42)
    xb, yb = b.client_data(42)
    assert torch.equal(xa, xb) and torch.equal(ya, yb)
    assert np.array_equal(a.samples_per_client, b.samples_per_client[:100])
    xc, _ = SyntheticFederated(100, seed=12).client_data(42)
    assert xc.shape != xa.shape or not torch.equal(xc, xa)
    # The cache does not change results: evicted and regenerated data is identical.
    small = SyntheticFederated(100, seed=11, cache_clients=1)
    first = small.client_data(42)[0].clone()
    small.client_data(43)
    assert torch.equal(small.client_data(42)[0], first)
    assert small.n_generated == 3


def test_synthetic_is_lazy_at_openimage_scale():
    start = time.perf_counter()
    ds = SyntheticFederated(14_477, seed=0)
    assert ds.n_generated == 0
    assert int(ds.samples_per_client.sum()) > 1_000_000  # about 1.67 M like OpenImage
    assert int(ds.samples_per_client.min()) >= 16
    ds.test_data()
    for cid in (0, 14_476, 7_000):
        ds.client_data(cid)
    ds.client_data(0)  # cached
    assert ds.n_generated == 3
    assert time.perf_counter() - start < 5.0


def test_synthetic_sizes_heavy_tailed_with_requested_mean():
    ds = SyntheticFederated(20_000, seed=1, min_samples=16, mean_samples=116.0)
    sizes = ds.samples_per_client
    assert abs(sizes.mean() - 116) < 5
    assert sizes.max() > 8 * np.median(sizes)


def test_synthetic_clients_are_non_iid_but_share_a_teacher():
    ds = SyntheticFederated(200, seed=2, mean_samples=400)
    hists = np.stack([np.bincount(ds.client_data(c)[1].numpy(), minlength=10) for c in range(20)])
    fractions = hists / hists.sum(axis=1, keepdims=True)
    assert fractions.max(axis=1).mean() > 0.3  # skewed label mixes per client
    assert (hists.sum(axis=0) > 0).sum() >= 8  # but most classes occur overall


def test_synthetic_rejects_bad_arguments():
    with pytest.raises(ValueError):
        SyntheticFederated(0)
    with pytest.raises(ValueError):
        SyntheticFederated(10, min_samples=20, mean_samples=10)
    with pytest.raises(IndexError):
        SyntheticFederated(10).client_data(10)


def test_labels_from_a_blas_product_are_the_fixed_orders_labels():
    """Issue 52's eighth session: a client's labels from a matrix product, exactly the fixed-order sum's: on the proxy's
    own draws (every label of 400 clients, the teacher's logits as generated) and on logits far apart and close."""
    ds = SyntheticFederated(400, seed=5)
    for c in range(400):
        gen = proxy.rng(ds.seed, "synthetic", "client", c)
        w, b, v = ds._teacher(gen)
        x = v + gen.standard_normal((int(ds.samples_per_client[c]), ds.n_features)) * ds._sigma_sd
        assert np.array_equal(proxy.labels(x, w, b), proxy.labels_fixed_order(x, w, b)), c
        assert np.array_equal(ds.client_data(c)[1].numpy(), proxy.labels_fixed_order(x, w, b)), c
    big = np.random.default_rng(1)
    x, w, b = big.standard_normal((500, 33)) * 1e8, big.standard_normal((6, 33)), big.standard_normal(6) * 1e9
    assert np.array_equal(proxy.labels(x, w, b), proxy.labels_fixed_order(x, w, b))


def test_labels_recompute_in_the_fixed_order_every_row_whose_lead_rounding_could_undo(monkeypatch):
    """Where the order of the sum decides the label (1 + 1e16 - 1e16 is 0 left to right and 1 from the right), the row
    is summed in the fixed order: hand-computed labels, and only those rows recomputed."""
    x = np.array([[1.0, 1e16, -1e16], [1e16, -1e16, 1.0], [1e16, 1.0, -1e16], [3.0, 0.0, 0.0]])
    w = np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    b = np.array([0.0, 0.5])  # class 1's logit is 0.5; class 0's is 0 or 1 as summed, 3 in the last row
    seen: list[np.ndarray] = []
    fixed = proxy.labels_fixed_order
    monkeypatch.setattr(proxy, "labels_fixed_order", lambda xs, *a: seen.append(xs.copy()) or fixed(xs, *a))
    assert proxy.labels(x, w, b).tolist() == [1, 0, 1, 0]  # left to right: 0, 1, 0 then 3
    assert len(seen) == 1 and np.array_equal(seen[0], x[:3])  # the clear last row kept from the product


# ---------------------------------------------------------------- FedScale layout


@pytest.mark.slow
def test_fedscale_reads_layout_filters_small_clients(tmp_path):
    _write_fedscale(tmp_path, {"c9": 5, "c1": 2, "c5": 6})
    ds = FedScaleImageDataset(tmp_path, "train", image_size=8, min_samples_per_client=3)
    assert isinstance(ds, FederatedDataset)
    assert ds.n_clients == 2 and list(ds.client_keys) == ["c9", "c5"]  # c1 (2 < 3) dropped
    assert ds.samples_per_client.tolist() == [5, 6]
    assert ds.n_classes == 3 and ds.input_shape == (3, 8, 8)
    x, y = ds.client_data(1)
    assert x.shape == (6, 3, 8, 8) and x.dtype == torch.float32
    assert y.tolist() == [0, 1, 2, 0, 1, 2]
    # a pure red image, normalised: channel 0 = (1 - 0.485) / 0.229, channel 1 = (0 - 0.456) / 0.224
    assert torch.allclose(x[0, 0], torch.full((8, 8), (1 - 0.485) / 0.229), atol=1e-5)
    assert torch.allclose(x[0, 1], torch.full((8, 8), -0.456 / 0.224), atol=1e-5)
    xt, yt = ds.test_data()
    assert xt.shape == (4, 3, 8, 8) and yt.tolist() == [0, 1, 2, 0]
    assert FedScaleImageDataset(tmp_path, "train", image_size=8, min_samples_per_client=3, max_clients=1).n_clients == 1


def test_fedscale_missing_mapping(tmp_path):
    with pytest.raises(InputDataError, match=r"client_data_mapping.train\.csv.*not found"):
        FedScaleImageDataset(tmp_path, "train", image_size=8)


def test_fedscale_mapping_is_read_by_position_whatever_the_header(tmp_path):
    """FedScale skips the first line and reads row[0] client, row[1] file, row[-1] label."""
    _write_fedscale(tmp_path, {"a": 3, "b": 2})
    ref = FedScaleImageDataset(tmp_path, "train", image_size=8, min_samples_per_client=1)
    path = tmp_path / "client_data_mapping" / "train.csv"
    lines = path.read_text().splitlines()
    for header in ("client_id,data_path,label_name,label_id", "clientId,sample_name,label", "a,a_0.png,class0,0"):
        body = lines[1:] if header.count(",") == 3 else [",".join(ln.split(",")[i] for i in (0, 1, 3)) for ln in lines[1:]]
        path.write_text("\n".join([header, *body]) + "\n")
        ds = FedScaleImageDataset(tmp_path, "train", image_size=8, min_samples_per_client=1)
        assert list(ds.client_keys) == ["a", "b"] and ds.samples_per_client.tolist() == [3, 2], header
        assert torch.equal(ds.client_data(0)[1], ref.client_data(0)[1])
        assert torch.equal(ds.client_data(1)[0], ref.client_data(1)[0])


def test_fedscale_too_few_fields_names_file_and_line(tmp_path):
    _write_fedscale(tmp_path, {"a": 3})
    path = tmp_path / "client_data_mapping" / "train.csv"
    path.write_text("client_id,sample_path,label_name,label_id\na,a_0.png,class0,0\n\na,a_1.png\n")
    with pytest.raises(InputDataError) as exc:
        FedScaleImageDataset(tmp_path, "train", image_size=8, min_samples_per_client=1)
    assert str(exc.value) == f"{path}: line 4: 2 field(s), expected at least 3 (client id, sample file, ..., label id)"


def test_fedscale_header_only_is_an_error(tmp_path):
    _write_fedscale(tmp_path, {"a": 3})
    path = tmp_path / "client_data_mapping" / "test.csv"
    path.write_text("client_id,sample_path,label_name,label_id\n")
    with pytest.raises(InputDataError, match=r"test\.csv: no rows after the header line"):
        FedScaleImageDataset(tmp_path, "train", image_size=8, min_samples_per_client=1)


def test_fedscale_missing_image_names_file_and_line(tmp_path):
    _write_fedscale(tmp_path, {"a": 3})
    (tmp_path / "train" / "a_1.png").unlink()
    ds = FedScaleImageDataset(tmp_path, "train", image_size=8, min_samples_per_client=1)
    with pytest.raises(InputDataError, match=r"train\.csv: line 3: image .*a_1\.png not found"):
        ds.client_data(0)


def test_fedscale_bad_label_names_line(tmp_path):
    _write_fedscale(tmp_path, {"a": 3})
    path = tmp_path / "client_data_mapping" / "train.csv"
    lines = path.read_text().splitlines()
    lines[2] = "a,a_1.png,class1,one"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputDataError, match=r"train.csv: line 3: label id 'one' \(last field\) is not a non-negative integer"):
        FedScaleImageDataset(tmp_path, "train", image_size=8, min_samples_per_client=1)


def test_fedscale_no_client_big_enough(tmp_path):
    _write_fedscale(tmp_path, {"a": 3})
    with pytest.raises(InputDataError, match="no client has >= 16 samples"):
        FedScaleImageDataset(tmp_path, "train", image_size=8)


def test_fedscale_reads_images_lazily_per_client(tmp_path):
    _write_fedscale(tmp_path, {"a": 3, "b": 3})
    (tmp_path / "train" / "b_0.png").unlink()  # only client 1 is broken
    ds = FedScaleImageDataset(tmp_path, "train", image_size=8, min_samples_per_client=1, max_test_samples=2)
    assert ds.client_data(0)[0].shape == (3, 3, 8, 8)
    assert ds.test_data()[1].tolist() == [0, 1]
    with pytest.raises(InputDataError, match="b_0.png not found"):
        ds.client_data(1)


@pytest.mark.slow
def test_fedscale_end_to_end_with_mobilenet(tmp_path):
    from flamingo_sim.fl.strategy.aggregate import fedavg
    from flamingo_sim.fl.training.trainer import CohortTask, evaluate, model_state, train_cohort
    from flamingo_sim.models import build_model

    _write_fedscale(tmp_path, {"a": 4, "b": 5})
    ds = FedScaleImageDataset(tmp_path, "train", image_size=32, min_samples_per_client=4)
    model = build_model("mobilenet_v2", ds.input_shape, ds.n_classes, seed=0)
    ids = [0, 1]
    res = train_cohort(model, model_state(model), CohortTask([ds.client_data(i) for i in ids], ids, 2, 4, 0.05, seed=0, round_idx=0))
    expected = "threads" if torch.get_num_threads() >= 2 else "sequential"  # auto: convolutions on the CPU
    assert res.mode == expected and res.losses.shape == (2,) and torch.isfinite(res.losses).all()
    state = fedavg(res.params, ds.samples_per_client[ids])
    acc, loss = evaluate(model, state, *ds.test_data())
    assert 0.0 <= acc <= 1.0 and np.isfinite(loss)


def test_fedscale_transform_normalises_with_fedscales_mean_std_and_flips_in_training(tmp_path):
    from flamingo_sim.fl.data.openimage import FEDSCALE_MEAN, FEDSCALE_STD

    _write_fedscale(tmp_path, {"a": 40})
    # left half red, right half blue: a flip swaps the halves
    for i in range(40):
        img = Image.new("RGB", (8, 8), (0, 0, 255))
        img.paste((255, 0, 0), (0, 0, 4, 8))
        img.save(tmp_path / "train" / f"a_{i}.png")
    ds = FedScaleImageDataset(tmp_path, "train", image_size=8, min_samples_per_client=1, transform="fedscale")
    x, _ = ds.client_data(0)
    red = ((1 - FEDSCALE_MEAN[0]) / FEDSCALE_STD[0], -FEDSCALE_MEAN[1] / FEDSCALE_STD[1], -FEDSCALE_MEAN[2] / FEDSCALE_STD[2])
    assert torch.allclose(x[0, :, 0, 0], torch.tensor(red), atol=1e-5)  # client_data itself is never flipped
    assert torch.allclose(x[:, 0, :, :4], torch.tensor(red[0]), atol=1e-5)
    a = ds.train_augment(x, 0, round_idx=3, seed=1)
    flipped = a[:, 0, 0, 0] < 0  # red channel low on the left: the image was mirrored
    assert torch.equal(a[flipped], x[flipped].flip(-1)) and torch.equal(a[~flipped], x[~flipped])
    assert 8 <= int(flipped.sum()) <= 32  # about half of 40
    assert torch.equal(ds.train_augment(x, 0, round_idx=3, seed=1), a)  # deterministic in (seed, round, client)
    assert not torch.equal(ds.train_augment(x, 0, round_idx=4, seed=1), a)
    # the test split and the default transform never flip; the default normalises with ImageNet's mean/std
    assert torch.equal(FedScaleImageDataset(tmp_path, "test", image_size=8, min_samples_per_client=1,
                                            transform="fedscale").train_augment(x, 0, 3, 1), x)
    plain = FedScaleImageDataset(tmp_path, "train", image_size=8, min_samples_per_client=1)
    assert torch.equal(plain.train_augment(x, 0, 3, 1), x)
    assert torch.allclose(plain.client_data(0)[0][0, 0, 0, 0], torch.tensor((1 - 0.485) / 0.229), atol=1e-5)
    assert "fedscale transform: mean (0.4914, 0.4822, 0.4465), std (0.2023, 0.1994, 0.201), random horizontal flip" in ds.description


def test_device_resident_keeps_clients_within_its_bytes_and_forwards_the_rest():
    ds = SyntheticFederated(n_clients=6, seed=3)
    sizes = [sum(t.numel() * t.element_size() for t in ds.client_data(c)) for c in range(6)]
    budget = sizes[0] + sizes[1] + sizes[2]  # room for clients 0-2
    resident = DeviceResident(ds, torch.device("cpu"), max_bytes=budget)
    for cid in (0, 1, 2, 0, 1, 2):
        x, y = resident.client_data(cid)
        assert torch.equal(x, ds.client_data(cid)[0]) and torch.equal(y, ds.client_data(cid)[1])
    assert resident.n_moved == 3  # the repeats were resident
    resident.client_data(3)  # over the budget: the least recently used, client 0, goes first
    assert 0 not in resident._cache and 3 in resident._cache and resident._cache.n_bytes <= budget
    resident.client_data(0)
    assert resident.n_moved == 5  # moved again
    assert resident.n_clients == 6 and resident.test_data()[0].shape == ds.test_data()[0].shape  # the dataset's own
    with pytest.raises(ValueError, match="max_bytes must be >= 1, got 0"):
        DeviceResident(ds, torch.device("cpu"), max_bytes=0)


def test_device_resident_prefetches_only_what_is_not_resident():
    asked = []

    class Decoding(SyntheticFederated):
        def prefetch(self, ids):
            asked.append(list(ids))

    resident = DeviceResident(Decoding(n_clients=4, seed=0), torch.device("cpu"), max_bytes=1 << 30)
    resident.client_data(1)
    resident.prefetch([0, 1, 3])
    assert asked == [[0, 3]]
