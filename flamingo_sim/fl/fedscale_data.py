"""FedScale's client-partitioned layout: the shared mapping-file reader and the image dataset.

:class:`FedScaleLayout` reads ``client_data_mapping/{train,test}.csv`` and serves each client's
samples lazily; a subclass decodes one sample file. :class:`FedScaleImageDataset` reads
OpenImage's images; :mod:`flamingo_sim.fl.speech` reads Google Speech's WAV clips.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from flamingo_sim.errors import InputDataError
from flamingo_sim.fl.data import LRUCache, check_client_id

__all__ = ["FedScaleLayout", "FedScaleImageDataset", "IMAGENET_MEAN", "IMAGENET_STD"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


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
        self._cache = LRUCache(cache_clients)
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
        cid = check_client_id(client_id, self.n_clients)
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
