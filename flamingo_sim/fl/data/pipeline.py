"""A real-data path that keeps up with the GPU: parallel decoding, a decoded-tensor cache, packing.

FedScale's OpenImage is JPEG files and Google Speech WAV files; decoding them one client at a
time on one core is slower than a GPU trains (a round at 224 px reads about 11,500 images).

- :class:`DecodedCache` wraps any dataset with the ``client_data`` API (the FedScale readers of
  :mod:`flamingo_sim.fl.data.openimage` and :mod:`flamingo_sim.fl.data.speech`): :meth:`~DecodedCache.prefetch`
  decodes a round's clients on ``workers`` threads (PIL's JPEG decoder, the resize and torch's
  ops release the GIL), and the decoded, resized tensors stay in an LRU cache bounded in bytes.
  It counts what it decoded and how long that took (:attr:`~DecodedCache.images_per_s`).
- :func:`pack_dataset` decodes a dataset once into a compact on-disk array (float16, one file
  for all samples; ``flamingo-sim pack-data`` on the command line), written whole or not at all;
  :class:`PackedDataset` memory-maps it, verifies it against its manifest and serves it with no
  decoding at all. ``data.root`` may point at such a directory.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import torch
from torch import Tensor

from flamingo_sim.errors import InputDataError
from flamingo_sim.fl.data.base import FederatedDataset, LRUCache, check_client_id
from flamingo_sim.fl.data.openimage import random_hflip
from flamingo_sim.io import atomic_dir

__all__ = ["DecodedCache", "PackInfo", "pack_dataset", "PackedDataset", "PACK_MANIFEST", "is_packed", "verify_pack"]

#: The pack's own manifest: format version, counts, shapes, each file's size and SHA-256.
PACK_MANIFEST = "flamingo-packed.json"
#: 1: the unversioned packs of earlier releases (no digests); they are refused, pack again.
PACK_FORMAT_VERSION = 2
#: The arrays of a pack.
PACK_FILES = ("x.npy", "y.npy", "offsets.npy", "test_x.npy", "test_y.npy")
#: A pack's kind for :func:`flamingo_sim.io.atomic_dir` (an earlier pack may be replaced whole).
PACK_KIND = "packed dataset"


def _same(value: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
    return value


class DecodedCache:
    """``dataset`` with parallel decoding and a decoded-tensor cache of ``cache_bytes``.

    Every other attribute (``n_clients``, ``samples_per_client``, ``input_shape``, ...) is the
    wrapped dataset's.
    """

    def __init__(self, dataset: Any, workers: int, cache_bytes: int, log: Callable[[str], None] | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.dataset = dataset
        self.workers = int(workers)
        self._cache = LRUCache(1 << 62, max_bytes=int(cache_bytes))
        self.n_decoded = 0  # samples decoded so far
        self.decode_s = 0.0  # wall time spent decoding (prefetch and misses)
        self.description = f"{dataset.description}; decoded on {self.workers} threads, cache {cache_bytes / 2**30:.1f} GiB"
        self.log = log  # says when the test set is decoded (the first evaluation waits for it)
        self._test_said = False

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
        """The wrapped dataset's test set; the first call says that it decodes it and how long that took."""
        if self._test_said or self.log is None:
            return self.dataset.test_data()
        self._test_said = True
        mapping = getattr(self.dataset, "_test_mapping", None)
        size = f" ({len(mapping):,} samples)" if mapping is not None else ""
        self.log(f"decoding the test set{size}, once: the first evaluation waits for it")
        started = time.perf_counter()
        data = self.dataset.test_data()
        self.log(f"test set decoded in {time.perf_counter() - started:.1f} s")
        return data


@dataclass(frozen=True)
class PackInfo:
    """What :func:`pack_dataset` wrote: where, how much, and how fast it decoded."""

    root: Path
    n_clients: int
    n_samples: int
    n_test_samples: int
    size_bytes: int  # all files of the pack on disk
    samples_per_s: float  # training samples decoded per second of decoding wall time
    workers: int

    def describe(self) -> str:
        return (f"packed dataset at {self.root}: {self.n_clients:,} clients, {self.n_samples:,} samples (+ {self.n_test_samples:,} test), "
                f"{_size(self.size_bytes)} on disk; decoded {self.samples_per_s:,.0f} samples/s on {self.workers} thread{'s' if self.workers > 1 else ''}")


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 2**30:.2f} GiB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:.1f} MiB"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _write_x(path: Path, chunks: Iterable[np.ndarray], shape: tuple[int, ...]) -> str:
    """Write the float16 rows of ``chunks`` (``shape[0]`` in all) as one ``.npy`` file, hashing as it goes."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float16)),
                                                  "fortran_order": False, "shape": shape})
    digest = hashlib.sha256(header.getvalue())
    with open(path, "wb") as f:
        f.write(header.getvalue())
        for chunk in chunks:
            data = np.ascontiguousarray(chunk, dtype=np.float16).tobytes()
            digest.update(data)
            f.write(data)
    return digest.hexdigest()


def pack_dataset(dataset: Any, out_dir: str | Path, workers: int = 1, log: Callable[[str], None] | None = None,
                 settings: dict[str, Any] | None = None) -> PackInfo:
    """Decode every client and the test set of ``dataset`` once into ``out_dir`` (float16 arrays).

    Files: ``x.npy`` (all training samples, client after client), ``y.npy``, ``offsets.npy``
    (client ``i`` is rows ``offsets[i]:offsets[i+1]``), ``test_x.npy``, ``test_y.npy`` and the
    manifest :data:`PACK_MANIFEST`: format version, counts, input shape, classes, the source's
    description, ``settings`` (the config it was read with), and each file's size and SHA-256.

    ``out_dir`` must be absent, empty or an earlier pack (replaced whole); the pack is written
    into a temporary sibling directory and renamed into place only when complete, so an
    interrupted or failed pack leaves nothing that reads as a pack (:func:`flamingo_sim.io.atomic_dir`).
    Decoding runs on ``workers`` threads; ``log`` gets a progress line per chunk of clients.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    sizes = np.asarray(dataset.samples_per_client, dtype=np.int64)
    offsets = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(sizes)])
    shape = tuple(int(d) for d in dataset.input_shape)
    n_clients, n_samples = int(dataset.n_clients), int(offsets[-1])
    read = dataset._read_client if hasattr(dataset, "_read_client") else dataset.client_data  # no reader-side caching
    y = np.zeros(n_samples, dtype=np.int64)
    decode_s = 0.0

    def decoded() -> Iterator[np.ndarray]:
        nonlocal decode_s
        chunk = 4 * workers
        pool = ThreadPoolExecutor(workers)
        try:
            for start in range(0, n_clients, chunk):
                ids = range(start, min(start + chunk, n_clients))
                began = time.perf_counter()
                parts = list(pool.map(read, ids))
                decode_s += time.perf_counter() - began
                for cid, (cx, cy) in zip(ids, parts):
                    if tuple(cx.shape) != (int(sizes[cid]), *shape) or tuple(cy.shape) != (int(sizes[cid]),):
                        raise InputDataError(f"{dataset.description}: client {cid} decoded to shape {tuple(cx.shape)}, "
                                             f"expected {(int(sizes[cid]), *shape)}")
                    y[offsets[cid] : offsets[cid + 1]] = cy.numpy()
                    yield cx.numpy()
                if log:
                    done = int(offsets[ids[-1] + 1])
                    log(f"packed {ids[-1] + 1:,}/{n_clients:,} clients, {done:,}/{n_samples:,} samples, {done / max(decode_s, 1e-9):,.0f} samples/s decoded")
        finally:  # an error or Ctrl-C: decode no further client
            pool.shutdown(cancel_futures=True)

    with atomic_dir(out_dir, PACK_KIND) as stage:
        files: dict[str, dict[str, Any]] = {"x.npy": {"sha256": _write_x(stage / "x.npy", decoded(), (n_samples, *shape))}}
        tx, ty = dataset.test_data()
        np.save(stage / "y.npy", y)
        np.save(stage / "offsets.npy", offsets)
        np.save(stage / "test_x.npy", tx.numpy().astype(np.float16))
        np.save(stage / "test_y.npy", ty.numpy().astype(np.int64))
        for name in PACK_FILES:
            files.setdefault(name, {"sha256": _sha256(stage / name)})["bytes"] = (stage / name).stat().st_size
        manifest = {
            "format": "flamingo-sim packed dataset", "format_version": PACK_FORMAT_VERSION,
            "n_clients": n_clients, "n_samples": n_samples, "n_test_samples": int(ty.shape[0]),
            "input_shape": list(shape), "n_classes": int(dataset.n_classes), "dtype": "float16",
            "source": dataset.description, "settings": settings or {}, "files": files,
            # FedScale's OpenImage transform flips training images at random each round: the pack keeps that
            "train_augment": "hflip" if getattr(dataset, "transform", None) == "fedscale" else None,
        }
        (stage / PACK_MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        size = sum(f.stat().st_size for f in stage.iterdir())
    return PackInfo(Path(out_dir), n_clients, n_samples, int(ty.shape[0]), size,
                    n_samples / decode_s if decode_s > 0 else float("nan"), workers)


def is_packed(root: str | Path) -> bool:
    return (Path(root) / PACK_MANIFEST).is_file()


def _manifest(root: Path) -> dict[str, Any]:
    path = root / PACK_MANIFEST
    if not path.is_file():
        raise InputDataError(f"{path}: missing (not a packed dataset; write one with flamingo-sim pack-data)")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputDataError(f"{path}: not a readable manifest ({exc})") from None
    if not isinstance(doc, dict) or "format_version" not in doc:
        raise InputDataError(f"{path}: no format_version (written by an older flamingo-sim); pack the data again with flamingo-sim pack-data")
    if doc["format_version"] != PACK_FORMAT_VERSION:
        raise InputDataError(f"{path}: format_version {doc['format_version']!r}, this flamingo-sim reads {PACK_FORMAT_VERSION}; "
                             "pack the data again with flamingo-sim pack-data")
    expected = {"n_clients": int, "n_samples": int, "n_test_samples": int, "n_classes": int, "input_shape": list, "source": str,
                "settings": dict, "files": dict}
    for key, kind in expected.items():
        if not isinstance(doc.get(key), kind) or isinstance(doc.get(key), bool):
            raise InputDataError(f"{path}: {key}: expected {kind.__name__}, got {doc.get(key)!r}")
    for name in PACK_FILES:
        entry = doc["files"].get(name)
        if not (isinstance(entry, dict) and isinstance(entry.get("bytes"), int) and isinstance(entry.get("sha256"), str)):
            raise InputDataError(f"{path}: files: {name}: expected its bytes and sha256, got {entry!r}")
    return doc


def _load(path: Path, mmap: bool = False) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputDataError(f"{path}: not a readable .npy array ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None


def _check_labels(path: Path, y: np.ndarray, n_classes: int) -> None:
    bad = np.flatnonzero((y < 0) | (y >= n_classes))
    if bad.size:
        raise InputDataError(f"{path}: label {int(y[bad[0]])} at row {int(bad[0])} is outside [0, {n_classes})")


class PackedDataset(FederatedDataset):
    """A dataset written by :func:`pack_dataset`, memory-mapped: no decoding, float16 on disk.

    Opening verifies the pack before trusting it: every file present, the byte size of every
    file and the SHA-256 of the small ones (``y``, ``offsets``, ``test_x``, ``test_y``) as the
    manifest recorded them, the offsets (start at 0, never decrease, end at the rows of ``x``),
    the arrays' shapes and dtypes against the manifest, and every label in ``[0, n_classes)``.
    ``x.npy`` (all training samples, often many GB) is checked by size and shape only: hashing
    it at every load would take longer than a round; ``full=True`` (``flamingo-sim pack-data
    --verify``) hashes it too. Any failure is an :class:`~flamingo_sim.errors.InputDataError`
    naming the file and what was wrong. Nothing is unpickled.
    """

    def __init__(self, root: str | Path, max_clients: int | None = None, full: bool = False) -> None:
        self.root = Path(root)
        manifest = _manifest(self.root)
        files = manifest["files"]
        for name in PACK_FILES:
            path = self.root / name
            if not path.is_file():
                raise InputDataError(f"{path}: missing (the manifest {PACK_MANIFEST} lists it)")
            size = path.stat().st_size
            if size != files[name]["bytes"]:
                raise InputDataError(f"{path}: {size:,} bytes, the manifest says {files[name]['bytes']:,} "
                                     "(truncated or changed since it was packed; pack the data again)")
            if (name != "x.npy" or full) and _sha256(path) != files[name]["sha256"]:
                raise InputDataError(f"{path}: SHA-256 differs from the manifest's (changed since it was packed; pack the data again)")
        n, m = manifest["n_samples"], manifest["n_test_samples"]
        self.input_shape = tuple(int(d) for d in manifest["input_shape"])
        self.n_classes = int(manifest["n_classes"])
        self._x = _load(self.root / "x.npy", mmap=True)
        self._y = _load(self.root / "y.npy")
        self._offsets = _load(self.root / "offsets.npy")
        test_x, test_y = _load(self.root / "test_x.npy"), _load(self.root / "test_y.npy")
        for name, arr, dtype, want in (("x.npy", self._x, np.float16, (n, *self.input_shape)), ("y.npy", self._y, np.int64, (n,)),
                                       ("offsets.npy", self._offsets, np.int64, (manifest["n_clients"] + 1,)),
                                       ("test_x.npy", test_x, np.float16, (m, *self.input_shape)), ("test_y.npy", test_y, np.int64, (m,))):
            if arr.dtype != dtype or arr.shape != want:
                raise InputDataError(f"{self.root / name}: {arr.dtype} of shape {arr.shape}, the manifest says "
                                     f"{np.dtype(dtype)} of shape {want}")
        self._check_offsets(self.root / "offsets.npy", len(self._x))
        _check_labels(self.root / "y.npy", self._y, self.n_classes)
        _check_labels(self.root / "test_y.npy", test_y, self.n_classes)
        self._test = (torch.from_numpy(test_x.astype(np.float32)), torch.from_numpy(test_y))
        n_all = manifest["n_clients"]
        self.n_clients = n_all if max_clients is None else min(int(max_clients), n_all)
        self.samples_per_client = np.diff(self._offsets)[: self.n_clients].astype(np.int64)
        self.settings: dict[str, Any] = manifest["settings"]
        self.augment = manifest.get("train_augment")
        if self.augment not in (None, "hflip"):
            raise InputDataError(f"{self.root / PACK_MANIFEST}: train_augment: expected null or 'hflip', got {self.augment!r}")
        self.name = f"packed:{self.root.name}"
        self.description = f"packed dataset at {self.root} ({self.n_clients} clients, float16) of: {manifest['source']}"

    def _check_offsets(self, path: Path, n_rows: int) -> None:
        o = self._offsets
        if o[0] != 0:
            raise InputDataError(f"{path}: the first offset is {int(o[0])}, expected 0")
        down = np.flatnonzero(np.diff(o) < 0)
        if down.size:
            i = int(down[0])
            raise InputDataError(f"{path}: offsets decrease at client {i} ({int(o[i])} then {int(o[i + 1])})")
        if o[-1] != n_rows:
            raise InputDataError(f"{path}: the last offset is {int(o[-1])}, expected {n_rows} (the rows of x.npy)")

    def client_data(self, client_id: int) -> tuple[Tensor, Tensor]:
        cid = check_client_id(client_id, self.n_clients)
        a, b = int(self._offsets[cid]), int(self._offsets[cid + 1])
        return torch.from_numpy(np.asarray(self._x[a:b], dtype=np.float32)), torch.from_numpy(self._y[a:b].copy())

    def test_data(self) -> tuple[Tensor, Tensor]:
        return self._test

    def train_augment(self, x: Tensor, client_id: int, round_idx: int, seed: int) -> Tensor:
        """The reader's augmentation, as it would have applied it (``data.transform: fedscale``: a random flip)."""
        return x if self.augment is None else random_hflip(x, client_id, round_idx, seed)


def verify_pack(root: str | Path) -> str:
    """Open the pack at ``root`` with every check, ``x.npy``'s SHA-256 included; one line saying what was verified."""
    began = time.perf_counter()
    ds = PackedDataset(root, full=True)
    size = sum((ds.root / name).stat().st_size for name in PACK_FILES)
    took = time.perf_counter() - began
    return (f"{ds.root}: packed dataset verified: {ds.n_clients:,} clients, {len(ds._y):,} samples, inputs "
            f"{'x'.join(map(str, ds.input_shape))}, {ds.n_classes} classes; every file matches its size and SHA-256 "
            f"({_size(size)} hashed in {took:.1f} s)")
