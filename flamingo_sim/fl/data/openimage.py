"""FedScale's client-partitioned layout: the shared mapping-file reader and the image dataset.

:class:`FedScaleLayout` reads ``client_data_mapping/{train,test}.csv`` and serves each client's
samples lazily; a subclass decodes one sample file. :class:`FedScaleImageDataset` reads
OpenImage's images; :mod:`flamingo_sim.fl.data.speech` reads Google Speech's WAV clips.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from flamingo_sim.errors import InputDataError
from flamingo_sim.fl.data.base import FederatedDataset, LRUCache, check_client_id
from flamingo_sim.rng import derive_seed

__all__ = ["FedScaleLayout", "FedScaleImageDataset", "MappingRows", "TRANSFORMS", "IMAGENET_MEAN", "IMAGENET_STD",
           "FEDSCALE_MEAN", "FEDSCALE_STD"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
#: FedScale's OpenImage normalisation (fedscale/dataloaders/utils_data.py)
FEDSCALE_MEAN = (0.4914, 0.4822, 0.4465)
FEDSCALE_STD = (0.2023, 0.1994, 0.2010)
#: ``data.transform`` -> (mean, std)
TRANSFORMS = {"default": (IMAGENET_MEAN, IMAGENET_STD), "fedscale": (FEDSCALE_MEAN, FEDSCALE_STD)}


@dataclass(frozen=True)
class MappingRows:
    """A mapping file's rows: client id, sample file (relative to the split's folder), label, line number."""

    client: list[str]
    sample: list[str]
    label: np.ndarray  # int64
    line: np.ndarray  # int64, 1-based line in the file

    def __len__(self) -> int:
        return len(self.client)

    def head(self, n: int) -> "MappingRows":
        return MappingRows(self.client[:n], self.sample[:n], self.label[:n], self.line[:n])


def _group_rows(clients: list[str]) -> dict[str, list[int]]:
    """Row numbers of each client id, clients in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(clients):
        groups.setdefault(c, []).append(i)
    return groups


class FedScaleLayout(FederatedDataset):
    """Samples partitioned into clients by a FedScale mapping file; subclasses decode the files.

    Layout (as FedScale's ``OpenImage`` and ``SPEECH`` readers expect)::

        root/client_data_mapping/train.csv   e.g. client_id,sample_path,label_name,label_id
        root/client_data_mapping/test.csv
        root/train/<sample_path>             one sample file per row
        root/test/<sample_path>

    The mapping files are read as FedScale reads them, by position: the first line is skipped
    whatever it says (header names differ between copies in circulation: ``sample_path``,
    ``data_path``, ``sample_name``), then field 0 is the client id, field 1 the sample file and
    the label is taken by :meth:`_label` (OpenImage: the last field, an integer). A row with
    fewer than ``MIN_FIELDS`` fields, an empty client id or sample file, or a bad label is an
    :class:`InputDataError` naming the file and line; so is a sample file that is missing
    (raised when its client is first read).

    Clients are the distinct client ids of ``split``'s mapping, numbered 0.. in order of first
    appearance. Clients with fewer than ``min_samples_per_client`` rows are dropped, as
    FedScale's ``filter_less`` does (its benchmarks use 21; the default 16 is one minibatch of
    the paper's batch size: with ``drop_last`` a smaller client never completes a step);
    ``max_clients`` then keeps the first ones. ``client_keys[i]`` is the original id of client
    ``i``. ``n_classes`` is ``1 + max(label)`` over both mapping files unless given.

    Sample files are read lazily, per client, and cached (LRU); ``n_read`` counts the
    clients read from disk so far. ``test_data()`` pools the rows of ``test.csv`` (the first
    ``max_test_samples`` of them if given). A subclass sets ``SAMPLE_KIND`` (a word for
    error messages), ``READ_ERRORS`` (what its decoder raises for an unreadable file) and
    ``input_shape``, and implements :meth:`_read_sample` (one file) and :meth:`_collate`
    (a client's samples into one ``(n, *input_shape)`` float32 tensor).
    """

    SAMPLE_KIND = "sample"
    READ_ERRORS: tuple[type[BaseException], ...] = (OSError,)
    #: fewest fields a mapping row may have: client id, sample file, label
    MIN_FIELDS = 3
    #: what the fields are, for the too-few-fields error
    FIELDS_HINT = "client id, sample file, ..., label id"

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
        if min_samples_per_client < 1:
            raise ValueError(f"min_samples_per_client must be >= 1, got {min_samples_per_client}")
        self.root = Path(root)
        self.split = split
        mapping = self._read_mapping(split)
        test_mapping = mapping if split == "test" else self._read_mapping("test")
        labels_max = max(int(mapping.label.max()), int(test_mapping.label.max()))
        self.n_classes = int(n_classes) if n_classes is not None else labels_max + 1
        if labels_max >= self.n_classes:
            raise InputDataError(f"{self.root}: label {labels_max} >= n_classes {self.n_classes}")

        groups = _group_rows(mapping.client)  # first-appearance order
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
        self._test_mapping = test_mapping if max_test_samples is None else test_mapping.head(int(max_test_samples))
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

    def _label(self, fields: list[str], path: Path, line: int) -> int:
        """The label of one mapping row (OpenImage: the last field, a non-negative integer)."""
        text = fields[-1].strip()
        if not text.isdigit():
            raise InputDataError(f"{path}: line {line}: label id {fields[-1]!r} (last field) is not a non-negative integer")
        return int(text)

    def _read_mapping(self, split: str) -> "MappingRows":
        import csv

        path = self._mapping_path(split)
        if not path.is_file():
            raise InputDataError(f"{path}: mapping file not found (expected FedScale layout root/client_data_mapping/{split}.csv)")
        client, sample, label, lines = [], [], [], []
        try:
            with open(path, newline="", encoding="utf-8") as fh:
                reader = csv.reader(fh)
                next(reader, None)  # FedScale skips the first line, whatever it holds
                for fields in reader:
                    if not fields or fields == [""]:
                        continue
                    line = reader.line_num
                    if len(fields) < self.MIN_FIELDS:
                        raise InputDataError(
                            f"{path}: line {line}: {len(fields)} field(s), expected at least {self.MIN_FIELDS} ({self.FIELDS_HINT})"
                        )
                    for k, what in ((0, "client id"), (1, "sample file")):
                        if not fields[k].strip():
                            raise InputDataError(f"{path}: line {line}: empty {what} (field {k + 1})")
                    client.append(fields[0])
                    sample.append(fields[1])
                    label.append(self._label(fields, path, line))
                    lines.append(line)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise InputDataError(f"{path}: not a readable CSV ({exc})") from None
        if not client:
            raise InputDataError(f"{path}: no rows after the header line")
        return MappingRows(client, sample, np.array(label, dtype=np.int64), np.array(lines, dtype=np.int64))

    def _read_sample(self, path: Path) -> Tensor:
        """One sample file, decoded; raise one of ``READ_ERRORS`` if it is unreadable."""
        raise NotImplementedError

    def _collate(self, samples: list[Tensor]) -> Tensor:
        """A client's decoded samples as one float32 tensor ``(n, *input_shape)``."""
        raise NotImplementedError

    def _load_rows(self, frame: "MappingRows", rows: np.ndarray, split: str) -> tuple[Tensor, Tensor]:
        mapping_path = self._mapping_path(split)
        samples = []
        for row in rows.tolist():
            path = self.root / split / frame.sample[row]
            line = int(frame.line[row])
            try:
                samples.append(self._read_sample(path))
            except FileNotFoundError:
                raise InputDataError(f"{mapping_path}: line {line}: {self.SAMPLE_KIND} {path} not found") from None
            except self.READ_ERRORS as exc:
                raise InputDataError(f"{mapping_path}: line {line}: {self.SAMPLE_KIND} {path} unreadable ({exc})") from None
        x = self._collate(samples).to(torch.float32)
        y = torch.as_tensor(frame.label[rows], dtype=torch.int64)
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
    and normalised; ``transform`` picks how (:data:`TRANSFORMS`):

    ``default``
        ImageNet mean/std, no augmentation. The default because it keeps CPU runs affordable:
        at the default ``image_size`` 64 a sample is 16x cheaper to train on than at 256.
    ``fedscale``
        FedScale's OpenImage pipeline: its mean (0.4914, 0.4822, 0.4465) and std (0.2023,
        0.1994, 0.2010), and for the training split a random horizontal flip
        (:meth:`train_augment`); use it with ``image_size`` 256 to match FedScale exactly.

    FedScale flips each sample each time a minibatch draws it; here each sample of a client is
    flipped or not once per round (a draw from ``(seed, round, client)``), so that runs stay
    deterministic and resumable while decoded images are cached.
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
        transform: str = "default",
    ) -> None:
        if image_size < 1:
            raise ValueError(f"image_size must be >= 1, got {image_size}")
        if transform not in TRANSFORMS:
            raise ValueError(f"transform must be one of {', '.join(TRANSFORMS)}, got {transform!r}")
        super().__init__(root, split, max_clients, min_samples_per_client, max_test_samples, n_classes, cache_clients)
        self.image_size = int(image_size)
        self.transform = transform
        self.input_shape: tuple[int, ...] = (3, self.image_size, self.image_size)
        self.name = f"fedscale-images:{self.root.name}"
        mean, std = TRANSFORMS[transform]
        flip = ", random horizontal flip per round" if transform == "fedscale" and split == "train" else ""
        self.description = (
            f"FedScale image dataset at {self.root} {self._layout_summary()}, images resized to "
            f"{self.image_size}x{self.image_size} ({transform} transform: mean {mean}, std {std}{flip}); {self._dropped_summary()}"
        )
        from PIL import UnidentifiedImageError
        from torchvision import transforms

        self.READ_ERRORS = (UnidentifiedImageError, OSError)
        self._transform = transforms.Compose(
            [
                transforms.Resize((self.image_size, self.image_size)),
                transforms.ToTensor(),
                transforms.Normalize(mean, std),
            ]
        )

    def _read_sample(self, path: Path) -> Tensor:
        from PIL import Image

        with Image.open(path) as img:
            return self._transform(img.convert("RGB"))

    def _collate(self, samples: list[Tensor]) -> Tensor:
        return torch.stack(samples)

    def train_augment(self, x: Tensor, client_id: int, round_idx: int, seed: int) -> Tensor:
        """``x`` (a client's images) as trained on in round ``round_idx``: each flipped left-right
        with probability 1/2 under the ``fedscale`` transform of the training split, else ``x``."""
        if self.transform != "fedscale" or self.split != "train":
            return x
        return random_hflip(x, client_id, round_idx, seed)


def random_hflip(x: Tensor, client_id: int, round_idx: int, seed: int) -> Tensor:
    """Each image of ``x`` flipped left-right with probability 1/2, drawn from ``(seed, round, client)``."""
    gen = torch.Generator().manual_seed(derive_seed(seed, "hflip", round_idx, int(client_id)))
    flip = (torch.rand(x.shape[0], generator=gen) < 0.5).to(x.device)  # drawn on the CPU: the same flips on any device
    return torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)
