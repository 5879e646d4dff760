"""Client-partitioned datasets: the embedded synthetic proxy and FedScale's mapping layout.

Every dataset satisfies :class:`FederatedDataset`: a number of clients, the number of samples
each holds (known up front, cheaply), each client's ``(x, y)`` on demand, and a central test
set. Client data is produced lazily and cached in a small LRU cache, so a 14,477-client
population never sits in memory at once. FedScale's Google Speech layout is read by
:mod:`flamingo_sim.fl.speech` on top of :class:`FedScaleLayout`.

Tensors: ``x`` is float32 with shape ``(n, *input_shape)``, ``y`` is int64 class ids with
shape ``(n,)``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor

from flamingo_sim.errors import InputDataError
from flamingo_sim.rng import rng

__all__ = ["FederatedDataset", "SyntheticFederated", "FedScaleLayout", "FedScaleImageDataset", "IMAGENET_MEAN", "IMAGENET_STD"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@runtime_checkable
class FederatedDataset(Protocol):
    """What the round loop needs from a dataset."""

    name: str
    description: str
    n_clients: int
    samples_per_client: np.ndarray
    input_shape: tuple[int, ...]
    n_classes: int

    def client_data(self, client_id: int) -> tuple[Tensor, Tensor]:
        """``(x float32 (n, *input_shape), y int64 (n,))`` of client ``client_id``."""
        ...

    def test_data(self) -> tuple[Tensor, Tensor]:
        """The central test set, same tensor conventions as :meth:`client_data`."""
        ...


class _LRU:
    """A tiny least-recently-used cache of client data keyed by client id."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"cache size must be >= 1, got {size}")
        self.size = size
        self._items: OrderedDict[int, tuple[Tensor, Tensor]] = OrderedDict()

    def get(self, key: int, make: Callable[[], tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]:
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = make()
        self._items[key] = value
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)


def _check_client_id(client_id: int, n_clients: int) -> int:
    cid = int(client_id)
    if not 0 <= cid < n_clients:
        raise IndexError(f"client id {client_id} out of range [0, {n_clients})")
    return cid


class SyntheticFederated:
    """Synthetic(alpha, beta) after FedProx/LEAF, with a shared teacher, generated lazily per client.

    Client ``k`` has its own softmax-regression "teacher" and its own input distribution:

    - ``u_k ~ N(0, alpha)``, ``W_k[c, j] ~ W0[c, j] + N(u_k, s^2)``, ``b_k[c] ~ b0[c] + N(u_k, s^2)``;
    - ``B_k ~ N(0, beta)``, ``v_k[j] ~ N(B_k, 1)``, ``x ~ N(v_k, Sigma)`` with
      ``Sigma = diag(j ** -1.2)`` for ``j = 1..n_features``;
    - ``y = argmax softmax(W_k x + b_k)``.

    Departure from the published recipe (which has ``W0 = b0 = 0`` and ``s = 1``): a teacher
    ``W0, b0 ~ N(0, 1)`` shared by all clients, drawn from ``rng(seed, "synthetic",
    "shared-teacher")``, and per-client deviations of standard deviation
    ``s = client_teacher_sd``. Without a shared part every client labels with an unrelated
    random model and no global model can beat chance on clients it has not seen; with it,
    FedAvg's test accuracy rises clearly over tens of rounds while clients stay non-IID (their
    inputs sit in different places, so their label mixes differ). ``client_teacher_sd``
    controls how far each client's labelling departs from the shared one. (``u_k`` shifts all
    logits equally and so does not change labels; it is kept for fidelity to the recipe.)
    ``beta`` controls how much the clients' inputs differ (a variance).

    Samples per client are heavy-tailed:
    ``min_samples + floor(LogNormal)`` with mean about ``mean_samples`` and log-sd
    ``size_sigma``, drawn for all clients at once from ``rng(seed, "synthetic", "sizes")``.

    A client's teacher and inputs come from ``rng(seed, "synthetic", "client", k)`` only, so
    its data is the same whatever else was generated before and whatever ``n_clients`` is.

    Test set: ``test_samples`` fresh samples (not any client's training samples) pooled from a
    deterministic sample of ``min(n_clients, test_clients)`` clients chosen with
    ``rng(seed, "synthetic", "test-clients")``, split as evenly as possible among them; each
    client's test samples come from ``rng(seed, "synthetic", "test", k)`` and its own teacher.
    It measures how well one global model serves a typical client.
    """

    def __init__(
        self,
        n_clients: int,
        n_classes: int = 10,
        n_features: int = 60,
        alpha: float = 1.0,
        beta: float = 1.0,
        seed: int = 0,
        min_samples: int = 16,
        mean_samples: float = 116.0,
        size_sigma: float = 1.0,
        test_samples: int = 2000,
        test_clients: int = 100,
        client_teacher_sd: float = 0.5,
        cache_clients: int = 256,
    ) -> None:
        if n_clients < 1:
            raise ValueError(f"n_clients must be >= 1, got {n_clients}")
        if n_classes < 2 or n_features < 1:
            raise ValueError(f"need n_classes >= 2 and n_features >= 1, got {n_classes}, {n_features}")
        if alpha < 0 or beta < 0:
            raise ValueError(f"alpha and beta are variances (>= 0), got {alpha}, {beta}")
        if min_samples < 1 or mean_samples <= min_samples:
            raise ValueError(f"need 1 <= min_samples < mean_samples, got {min_samples}, {mean_samples}")
        if client_teacher_sd < 0:
            raise ValueError(f"client_teacher_sd must be >= 0, got {client_teacher_sd}")
        if test_samples < 1 or test_clients < 1:
            raise ValueError(f"test_samples and test_clients must be >= 1, got {test_samples}, {test_clients}")
        self.n_clients = int(n_clients)
        self.n_classes = int(n_classes)
        self.n_features = int(n_features)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.seed = int(seed)
        self.input_shape: tuple[int, ...] = (self.n_features,)
        self.name = f"synthetic({alpha:g},{beta:g})"
        self.client_teacher_sd = float(client_teacher_sd)
        shared = rng(self.seed, "synthetic", "shared-teacher")
        self._w0 = shared.normal(0.0, 1.0, size=(self.n_classes, self.n_features))
        self._b0 = shared.normal(0.0, 1.0, size=self.n_classes)
        self._sigma_sd = np.arange(1, self.n_features + 1, dtype=np.float64) ** (-1.2 / 2)
        # Sizes: lognormal tail above min_samples with the requested mean.
        extra_mean = mean_samples - min_samples
        mu = math.log(extra_mean) - size_sigma**2 / 2
        draw = rng(self.seed, "synthetic", "sizes").lognormal(mu, size_sigma, size=self.n_clients)
        self.samples_per_client = (min_samples + np.floor(draw)).astype(np.int64)
        self.test_samples = int(test_samples)
        n_test_clients = min(self.n_clients, int(test_clients))
        chosen = rng(self.seed, "synthetic", "test-clients").choice(self.n_clients, size=n_test_clients, replace=False)
        self.test_client_ids = np.sort(chosen).astype(np.int64)
        self._cache = _LRU(cache_clients)
        self._test: tuple[Tensor, Tensor] | None = None
        self.n_generated = 0  # client datasets generated so far (cache misses), for tests and logs
        self.description = (
            f"synthetic federated data, Synthetic(alpha={alpha:g}, beta={beta:g}) after FedProx/LEAF: "
            f"{self.n_clients} clients, {int(self.samples_per_client.sum())} training samples "
            f"(per client min {int(self.samples_per_client.min())}, median {int(np.median(self.samples_per_client))}, "
            f"max {int(self.samples_per_client.max())}), {self.n_features} features, {self.n_classes} classes, "
            f"shared teacher with per-client deviation sd {self.client_teacher_sd:g}, "
            f"test set {self.test_samples} samples from {n_test_clients} clients; seed {self.seed}. "
            f"NOT real data: a generated proxy"
        )

    def _teacher(self, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        u = gen.normal(0.0, math.sqrt(self.alpha))
        w = self._w0 + gen.normal(u, self.client_teacher_sd, size=(self.n_classes, self.n_features))
        b = self._b0 + gen.normal(u, self.client_teacher_sd, size=self.n_classes)
        big_b = gen.normal(0.0, math.sqrt(self.beta))
        v = gen.normal(big_b, 1.0, size=self.n_features)
        return w, b, v

    def _samples(self, gen: np.random.Generator, teacher: tuple[np.ndarray, np.ndarray, np.ndarray], n: int) -> tuple[Tensor, Tensor]:
        w, b, v = teacher
        x = v + gen.standard_normal((n, self.n_features)) * self._sigma_sd
        y = np.argmax(x @ w.T + b, axis=1)  # argmax of softmax == argmax of logits
        return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(np.int64))

    def _generate(self, cid: int) -> tuple[Tensor, Tensor]:
        self.n_generated += 1
        gen = rng(self.seed, "synthetic", "client", cid)
        teacher = self._teacher(gen)
        return self._samples(gen, teacher, int(self.samples_per_client[cid]))

    def client_data(self, client_id: int) -> tuple[Tensor, Tensor]:
        """Client ``client_id``'s training data, generated on first use (LRU-cached)."""
        cid = _check_client_id(client_id, self.n_clients)
        return self._cache.get(cid, lambda: self._generate(cid))

    def test_data(self) -> tuple[Tensor, Tensor]:
        """The held-out test set described in the class docstring (computed once)."""
        if self._test is None:
            k = len(self.test_client_ids)
            counts = np.full(k, self.test_samples // k, dtype=np.int64)
            counts[: self.test_samples % k] += 1
            xs, ys = [], []
            for cid, n in zip(self.test_client_ids.tolist(), counts.tolist()):
                if n == 0:
                    continue
                teacher = self._teacher(rng(self.seed, "synthetic", "client", cid))
                x, y = self._samples(rng(self.seed, "synthetic", "test", cid), teacher, n)
                xs.append(x)
                ys.append(y)
            self._test = (torch.cat(xs), torch.cat(ys))
        return self._test


class FedScaleLayout:
    """Samples partitioned into clients by a FedScale mapping file; subclasses decode the files.

    Layout (as FedScale's ``OpenImage`` and ``SPEECH`` readers expect)::

        root/client_data_mapping/train.csv   header: client_id,sample_path,label_name,label_id
        root/client_data_mapping/test.csv
        root/train/<sample_path>             one sample file per row
        root/test/<sample_path>

    Clients are the distinct ``client_id`` values of ``split``'s mapping, numbered 0.. in
    order of first appearance. Clients with fewer than ``min_samples_per_client`` rows (by
    default one minibatch of 16) are dropped, as FedScale's ``filter_less`` does, since with
    ``drop_last`` they never complete a step; ``max_clients`` then keeps the first ones.
    ``client_keys[i]`` is the original id of client ``i``. Labels are the ``label_id``
    column; ``n_classes`` is ``1 + max(label_id)`` over both mapping files unless given.

    Sample files are read lazily, per client, and cached (LRU); ``n_read`` counts the
    clients read from disk so far. ``test_data()`` pools the rows of ``test.csv`` (the first
    ``max_test_samples`` of them if given). A subclass sets ``SAMPLE_KIND`` (a word for
    error messages), ``READ_ERRORS`` (what its decoder raises for an unreadable file) and
    ``input_shape``, and implements :meth:`_read_sample` (one file) and :meth:`_collate`
    (a client's samples into one ``(n, *input_shape)`` float32 tensor).
    """

    REQUIRED_COLUMNS = ("client_id", "sample_path", "label_name", "label_id")
    SAMPLE_KIND = "sample"
    READ_ERRORS: tuple[type[BaseException], ...] = (OSError,)

    def __init__(
        self,
        root: str | Path,
        split: str = "train",
        max_clients: int | None = None,
        min_samples_per_client: int = 16,
        max_test_samples: int | None = None,
        n_classes: int | None = None,
        cache_clients: int = 64,
    ) -> None:
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        self.root = Path(root)
        self.split = split
        mapping = self._read_mapping(split)
        test_mapping = mapping if split == "test" else self._read_mapping("test")
        labels_max = max(int(mapping["label_id"].max()), int(test_mapping["label_id"].max()))
        self.n_classes = int(n_classes) if n_classes is not None else labels_max + 1
        if labels_max >= self.n_classes:
            raise InputDataError(f"{self.root}: label_id {labels_max} >= n_classes {self.n_classes}")

        groups = mapping.groupby("client_id", sort=False).indices  # first-appearance order
        keys = [k for k, rows in groups.items() if len(rows) >= min_samples_per_client]
        if max_clients is not None:
            keys = keys[: int(max_clients)]
        if not keys:
            raise InputDataError(
                f"{self._mapping_path(split)}: no client has >= {min_samples_per_client} samples"
            )
        self.client_keys = np.array(keys, dtype=object)
        self._rows = [np.asarray(groups[k], dtype=np.int64) for k in keys]
        self._mapping = mapping
        self._test_mapping = test_mapping if max_test_samples is None else test_mapping.iloc[: int(max_test_samples)]
        self.n_clients = len(keys)
        self.samples_per_client = np.array([len(r) for r in self._rows], dtype=np.int64)
        self.min_samples_per_client = int(min_samples_per_client)
        self.n_dropped = len(groups) - len(keys)
        self._cache = _LRU(cache_clients)
        self._test: tuple[Tensor, Tensor] | None = None
        self.n_read = 0  # client datasets read from disk so far (cache misses)

    def _layout_summary(self) -> str:
        """The part of ``description`` every FedScale-layout dataset shares."""
        return (
            f"({self.split} split): {self.n_clients} clients, {int(self.samples_per_client.sum())} samples, "
            f"{self.n_classes} classes"
        )

    def _dropped_summary(self) -> str:
        return (
            f"{self.n_dropped} clients left out (fewer than {self.min_samples_per_client} samples, "
            f"or beyond max_clients); test set {len(self._test_mapping)} samples"
        )

    def _mapping_path(self, split: str) -> Path:
        return self.root / "client_data_mapping" / f"{split}.csv"

    def _read_mapping(self, split: str):  # -> pandas.DataFrame
        import pandas as pd

        path = self._mapping_path(split)
        if not path.is_file():
            raise InputDataError(f"{path}: mapping file not found (expected FedScale layout root/client_data_mapping/{split}.csv)")
        try:
            frame = pd.read_csv(path, dtype={"client_id": str, "sample_path": str, "label_name": str})
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise InputDataError(f"{path}: not a readable CSV ({exc})") from None
        missing = [c for c in self.REQUIRED_COLUMNS if c not in frame.columns]
        if missing:
            raise InputDataError(
                f"{path}: missing column(s) {', '.join(missing)}; expected header {','.join(self.REQUIRED_COLUMNS)}"
            )
        if frame.empty:
            raise InputDataError(f"{path}: no rows")
        for col in ("client_id", "sample_path"):
            bad = frame[col].isna().to_numpy().nonzero()[0]
            if len(bad):
                raise InputDataError(f"{path}: line {bad[0] + 2}: empty {col}")
        labels = pd.to_numeric(frame["label_id"], errors="coerce")
        bad = (labels.isna() | (labels < 0) | (labels != labels.round())).to_numpy().nonzero()[0]
        if len(bad):
            row = bad[0]
            raise InputDataError(f"{path}: line {row + 2}: label_id {frame['label_id'].iloc[row]!r} is not a non-negative integer")
        frame["label_id"] = labels.astype(np.int64)
        return frame

    def _read_sample(self, path: Path) -> Tensor:
        """One sample file, decoded; raise one of ``READ_ERRORS`` if it is unreadable."""
        raise NotImplementedError

    def _collate(self, samples: list[Tensor]) -> Tensor:
        """A client's decoded samples as one float32 tensor ``(n, *input_shape)``."""
        raise NotImplementedError

    def _load_rows(self, frame, rows: np.ndarray, split: str) -> tuple[Tensor, Tensor]:
        mapping_path = self._mapping_path(split)
        samples = []
        for row in rows.tolist():
            path = self.root / split / frame["sample_path"].iloc[row]
            try:
                samples.append(self._read_sample(path))
            except FileNotFoundError:
                raise InputDataError(f"{mapping_path}: line {row + 2}: {self.SAMPLE_KIND} {path} not found") from None
            except self.READ_ERRORS as exc:
                raise InputDataError(f"{mapping_path}: line {row + 2}: {self.SAMPLE_KIND} {path} unreadable ({exc})") from None
        x = self._collate(samples).to(torch.float32)
        y = torch.as_tensor(frame["label_id"].to_numpy()[rows], dtype=torch.int64)
        return x, y

    def _read_client(self, cid: int) -> tuple[Tensor, Tensor]:
        self.n_read += 1
        return self._load_rows(self._mapping, self._rows[cid], self.split)

    def client_data(self, client_id: int) -> tuple[Tensor, Tensor]:
        """Client ``client_id``'s samples and labels, read on first use (LRU-cached)."""
        cid = _check_client_id(client_id, self.n_clients)
        return self._cache.get(cid, lambda: self._read_client(cid))

    def test_data(self) -> tuple[Tensor, Tensor]:
        """All (or the first ``max_test_samples``) rows of ``test.csv``, pooled."""
        if self._test is None:
            self._test = self._load_rows(self._test_mapping, np.arange(len(self._test_mapping)), "test")
        return self._test


class FedScaleImageDataset(FedScaleLayout):
    """Images in FedScale's OpenImage layout (see :class:`FedScaleLayout` for the layout).

    Images are opened with PIL, converted to RGB, resized to ``image_size`` x ``image_size``
    and normalised with the ImageNet mean and standard deviation.
    """

    SAMPLE_KIND = "image"

    def __init__(
        self,
        root: str | Path,
        split: str = "train",
        image_size: int = 64,
        max_clients: int | None = None,
        min_samples_per_client: int = 16,
        max_test_samples: int | None = None,
        n_classes: int | None = None,
        cache_clients: int = 64,
    ) -> None:
        if image_size < 1:
            raise ValueError(f"image_size must be >= 1, got {image_size}")
        super().__init__(root, split, max_clients, min_samples_per_client, max_test_samples, n_classes, cache_clients)
        self.image_size = int(image_size)
        self.input_shape: tuple[int, ...] = (3, self.image_size, self.image_size)
        self.name = f"fedscale-images:{self.root.name}"
        self.description = (
            f"FedScale image dataset at {self.root} {self._layout_summary()}, images resized to "
            f"{self.image_size}x{self.image_size}; {self._dropped_summary()}"
        )
        from PIL import UnidentifiedImageError
        from torchvision import transforms

        self.READ_ERRORS = (UnidentifiedImageError, OSError)
        self._transform = transforms.Compose(
            [
                transforms.Resize((self.image_size, self.image_size)),
                transforms.ToTensor(),
                transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
            ]
        )

    def _read_sample(self, path: Path) -> Tensor:
        from PIL import Image

        with Image.open(path) as img:
            return self._transform(img.convert("RGB"))

    def _collate(self, samples: list[Tensor]) -> Tensor:
        return torch.stack(samples)
