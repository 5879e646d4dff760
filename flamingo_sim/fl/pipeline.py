"""A real-data path that keeps up with the GPU: parallel decoding, a decoded-tensor cache, packing.

FedScale's OpenImage is JPEG files and Google Speech WAV files; decoding them one client at a
time on one core is slower than a GPU trains (a round at 224 px reads about 11,500 images).

- :class:`DecodedCache` wraps any dataset with the ``client_data`` API (the FedScale readers of
  :mod:`flamingo_sim.fl.fedscale_data` and :mod:`flamingo_sim.fl.speech`): :meth:`~DecodedCache.prefetch`
  decodes a round's clients on ``workers`` threads (PIL's JPEG decoder, the resize and torch's
  ops release the GIL), and the decoded, resized tensors stay in an LRU cache bounded in bytes.
  It counts what it decoded and how long that took (:attr:`~DecodedCache.images_per_s`).
- :func:`pack_dataset` decodes a dataset once into a compact on-disk array (float16, one file
  for all samples, memory-mapped); :class:`PackedDataset` serves it with no decoding at all.
  ``data.root`` may point at such a directory.
"""

from __future__ import annotations

import functools
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch
from torch import Tensor

from flamingo_sim.errors import InputDataError
from flamingo_sim.fl.data import LRUCache, check_client_id

__all__ = ["DecodedCache", "pack_dataset", "PackedDataset", "PACK_MANIFEST", "is_packed"]

PACK_MANIFEST = "flamingo-packed.json"


def _same(value: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
    return value


class DecodedCache:
    """``dataset`` with parallel decoding and a decoded-tensor cache of ``cache_bytes``.

    Every other attribute (``n_clients``, ``samples_per_client``, ``input_shape``, ...) is the
    wrapped dataset's.
    """

    def __init__(self, dataset: Any, workers: int, cache_bytes: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.dataset = dataset
        self.workers = int(workers)
        self._cache = LRUCache(1 << 62, max_bytes=int(cache_bytes))
        self.n_decoded = 0  # samples decoded so far
        self.decode_s = 0.0  # wall time spent decoding (prefetch and misses)
        self.description = f"{dataset.description}; decoded on {self.workers} threads, cache {cache_bytes / 2**30:.1f} GiB"

    def __getattr__(self, name: str) -> Any:
        if name == "dataset":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.dataset, name)

    @property
    def images_per_s(self) -> float:
        """Samples decoded per second of decoding wall time (NaN before any)."""
        return self.n_decoded / self.decode_s if self.decode_s > 0 else float("nan")

    def _read(self, cid: int) -> tuple[Tensor, Tensor]:
        return self.dataset._read_client(cid) if hasattr(self.dataset, "_read_client") else self.dataset.client_data(cid)

    def prefetch(self, client_ids: Iterable[int]) -> None:
        """Decode the clients not cached yet, in parallel, and cache them."""
        missing = sorted({check_client_id(c, self.dataset.n_clients) for c in client_ids} - {c for c in client_ids if c in self._cache})
        if not missing:
            return
        started = time.perf_counter()
        with ThreadPoolExecutor(self.workers) as pool:
            decoded = list(pool.map(self._read, missing))
        self.decode_s += time.perf_counter() - started
        for cid, value in zip(missing, decoded):
            self.n_decoded += int(value[1].shape[0])
            self._cache.get(cid, functools.partial(_same, value))

    def client_data(self, client_id: int) -> tuple[Tensor, Tensor]:
        cid = check_client_id(client_id, self.dataset.n_clients)
        if cid not in self._cache:
            self.prefetch([cid])
        return self._cache.get(cid, lambda: self._read(cid))

    def test_data(self) -> tuple[Tensor, Tensor]:
        return self.dataset.test_data()


def pack_dataset(dataset: Any, out: str | Path, workers: int = 1, log: Any = None) -> Path:
    """Decode every client and the test set of ``dataset`` once into ``out`` (float16 arrays).

    Files: ``x.npy`` (all training samples, client after client), ``y.npy``, ``offsets.npy``
    (client ``i`` is rows ``offsets[i]:offsets[i+1]``), ``test_x.npy``, ``test_y.npy`` and the
    manifest :data:`PACK_MANIFEST` (shape, classes, the source's description).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = np.asarray(dataset.samples_per_client, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    shape = tuple(int(d) for d in dataset.input_shape)
    x = np.lib.format.open_memmap(out / "x.npy", mode="w+", dtype=np.float16, shape=(int(offsets[-1]), *shape))
    y = np.zeros(int(offsets[-1]), dtype=np.int64)
    reader = DecodedCache(dataset, workers, cache_bytes=1)
    chunk = max(1, 4 * workers)
    for start in range(0, dataset.n_clients, chunk):
        ids = list(range(start, min(start + chunk, dataset.n_clients)))
        began = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            for cid, (cx, cy) in zip(ids, pool.map(reader._read, ids)):
                x[offsets[cid] : offsets[cid + 1]] = cx.numpy().astype(np.float16)
                y[offsets[cid] : offsets[cid + 1]] = cy.numpy()
        reader.decode_s += time.perf_counter() - began
        reader.n_decoded += int(offsets[ids[-1] + 1] - offsets[ids[0]])
        if log:
            log(f"packed {ids[-1] + 1}/{dataset.n_clients} clients, {reader.images_per_s:,.0f} samples/s decoded")
    x.flush()
    del x
    tx, ty = dataset.test_data()
    np.save(out / "y.npy", y)
    np.save(out / "offsets.npy", offsets)
    np.save(out / "test_x.npy", tx.numpy().astype(np.float16))
    np.save(out / "test_y.npy", ty.numpy())
    manifest = {"input_shape": list(shape), "n_classes": int(dataset.n_classes), "n_clients": int(dataset.n_clients), "source": dataset.description}
    (out / PACK_MANIFEST).write_text(json.dumps(manifest, indent=1))
    return out


def is_packed(root: str | Path) -> bool:
    return (Path(root) / PACK_MANIFEST).is_file()


class PackedDataset:
    """A dataset written by :func:`pack_dataset`, memory-mapped: no decoding, float16 on disk."""

    def __init__(self, root: str | Path, max_clients: int | None = None) -> None:
        self.root = Path(root)
        try:
            manifest = json.loads((self.root / PACK_MANIFEST).read_text())
            self._x = np.load(self.root / "x.npy", mmap_mode="r")
            self._y = np.load(self.root / "y.npy")
            self._offsets = np.load(self.root / "offsets.npy")
        except (OSError, ValueError, KeyError) as exc:
            raise InputDataError(f"{self.root}: not a readable packed dataset ({exc})") from None
        n = len(self._offsets) - 1 if max_clients is None else min(int(max_clients), len(self._offsets) - 1)
        self.n_clients = n
        self.samples_per_client = np.diff(self._offsets)[:n].astype(np.int64)
        self.input_shape = tuple(manifest["input_shape"])
        self.n_classes = int(manifest["n_classes"])
        self.name = f"packed:{self.root.name}"
        self.description = f"packed dataset at {self.root} ({n} clients, float16) of: {manifest['source']}"
        self._test: tuple[Tensor, Tensor] | None = None

    def client_data(self, client_id: int) -> tuple[Tensor, Tensor]:
        cid = check_client_id(client_id, self.n_clients)
        a, b = int(self._offsets[cid]), int(self._offsets[cid + 1])
        return torch.from_numpy(np.asarray(self._x[a:b], dtype=np.float32)), torch.from_numpy(self._y[a:b].copy())

    def test_data(self) -> tuple[Tensor, Tensor]:
        if self._test is None:
            x = np.load(self.root / "test_x.npy").astype(np.float32)
            self._test = (torch.from_numpy(x), torch.from_numpy(np.load(self.root / "test_y.npy")))
        return self._test
