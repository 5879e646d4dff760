"""Bring your own federated data: per-client arrays from files, or LEAF's JSON layout.

Two layouts under ``data.root`` (``data.name`` says which):

``arrays``
    ``train/`` holds one file per client, ``<client>.npz`` (arrays ``x`` and ``y``) or
    ``<client>.parquet`` (an integer column ``y``, every other column a float feature);
    clients are ordered by file name. The central test set is ``test.npz``/``test.parquet``
    beside ``train/``, or every file of a ``test/`` directory, concatenated. ``x`` may have any
    shape ``(n, ...)``; ``y`` holds class ids 0..C-1.
``leaf``
    LEAF's layout (https://leaf.cmu.edu): ``train/*.json`` and ``test/*.json``, each
    ``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [...], "y": [...]}}}``.
    A client is a user of the train files (in file, then ``users`` order); the test set is every
    test user's samples. FEMNIST: ``x`` rows of 784 pixels become ``(1, 28, 28)`` images, 62
    classes. Shakespeare: ``x`` strings of 80 characters and ``y`` single characters become
    indices into LEAF's 80-letter alphabet (float32 ``(80,)`` inputs, 80 classes); a model
    embeds them (``experiments/byo/models.py:CharBag`` is an example).

Everything is read once, up front; a malformed file is one :class:`InputDataError` line
naming the file and what was expected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from flamingo_sim.config import read_text
from flamingo_sim.errors import ConfigError, InputDataError
from flamingo_sim.fl.data.base import FederatedDataset, check_client_id

__all__ = ["ArrayFederated", "read_arrays", "read_leaf", "LEAF_LETTERS"]

#: LEAF's Shakespeare alphabet: a character's class id is its index here.
LEAF_LETTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
FEMNIST_PIXELS = 784


class ArrayFederated(FederatedDataset):
    """Client data held in memory as tensors (:class:`~flamingo_sim.fl.data.base.FederatedDataset`)."""

    def __init__(self, name: str, clients: list[tuple[Tensor, Tensor]], test: tuple[Tensor, Tensor], n_classes: int, source: str) -> None:
        if not clients:
            raise InputDataError(f"{source}: no clients")
        self.name = name
        self._clients = clients
        self._test = test
        self.n_clients = len(clients)
        self.samples_per_client = np.array([len(y) for _, y in clients], dtype=np.int64)
        self.input_shape = tuple(int(d) for d in clients[0][0].shape[1:])
        self.n_classes = int(n_classes)
        s = self.samples_per_client
        self.description = (
            f"{name} from {source}: {self.n_clients} clients, {int(s.sum())} training samples "
            f"(per client min {int(s.min())}, median {int(np.median(s))}, max {int(s.max())}), "
            f"input shape {self.input_shape}, {self.n_classes} classes, test set {len(test[1])} samples"
        )

    def client_data(self, client_id: int) -> tuple[Tensor, Tensor]:
        return self._clients[check_client_id(client_id, self.n_clients)]

    def test_data(self) -> tuple[Tensor, Tensor]:
        return self._test


def _tensors(x: np.ndarray, y: np.ndarray, where: str) -> tuple[Tensor, Tensor]:
    if x.ndim < 1 or y.ndim != 1 or len(x) != len(y):
        raise InputDataError(f"{where}: expected x of shape (n, ...) and y of shape (n,), got {x.shape} and {y.shape}")
    if len(y) == 0:
        raise InputDataError(f"{where}: no samples")
    if not np.issubdtype(y.dtype, np.integer) and not np.all(np.mod(y, 1) == 0):
        raise InputDataError(f"{where}: y must hold integer class ids, got {y.dtype}")
    if (y < 0).any():
        raise InputDataError(f"{where}: y must hold class ids >= 0, got {int(y.min())}")
    try:
        xf = np.asarray(x, dtype=np.float32)
    except (TypeError, ValueError):
        raise InputDataError(f"{where}: x must be numeric, got {x.dtype}") from None
    return torch.from_numpy(np.ascontiguousarray(xf)), torch.from_numpy(y.astype(np.int64))


def _read_file(path: Path) -> tuple[Tensor, Tensor]:
    if path.suffix == ".npz":
        try:
            with open(path, "rb") as fh:
                magic = fh.read(4)
        except OSError as exc:
            raise InputDataError(f"{path}: cannot read ({exc.strerror})") from None
        if magic[:2] != b"PK":  # np.savez writes a zip archive; anything else is not one (np.load would talk of pickles)
            raise InputDataError(f"{path}: not an .npz archive (np.savez's zip format); expected arrays 'x' and 'y'")
        try:
            with np.load(path, allow_pickle=False) as z:
                if "x" not in z or "y" not in z:
                    raise InputDataError(f"{path}: expected arrays 'x' and 'y', found {', '.join(z.files) or 'none'}")
                return _tensors(z["x"], z["y"], str(path))
        except (OSError, ValueError) as exc:
            raise InputDataError(f"{path}: not a readable .npz file ({exc})") from None
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise InputDataError(f"{path}: not a readable parquet file ({exc})") from None
    if "y" not in frame.columns:
        raise InputDataError(f"{path}: expected a label column 'y', found {', '.join(map(str, frame.columns))}")
    return _tensors(frame.drop(columns="y").to_numpy(), frame["y"].to_numpy(), str(path))


def _client_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".npz", ".parquet"))


def _concat(parts: list[tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]:
    return torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])


def _n_classes(clients: list[tuple[Tensor, Tensor]], test: tuple[Tensor, Tensor]) -> int:
    return int(max(int(y.max()) for _, y in [*clients, test])) + 1


def _check_shapes(clients: list[tuple[Tensor, Tensor]], test: tuple[Tensor, Tensor], names: list[str], root: Path) -> None:
    shape = clients[0][0].shape[1:]
    for (x, _), name in zip([*clients, test], [*names, "the test set"]):
        if x.shape[1:] != shape:
            raise InputDataError(f"{root}: {name} has inputs of shape {tuple(x.shape[1:])}, the first client {tuple(shape)}")


def read_arrays(root: Path) -> ArrayFederated:
    """Per-client ``.npz``/``.parquet`` files under ``root/train/`` and a test set (module docstring)."""
    train = root / "train"
    if not train.is_dir():
        raise InputDataError(f"{root}: expected a train/ directory of per-client .npz or .parquet files")
    files = _client_files(train)
    if not files:
        raise InputDataError(f"{train}: no .npz or .parquet client files")
    clients = [_read_file(f) for f in files]
    test_files = [root / "test.npz", root / "test.parquet"]
    found = [f for f in test_files if f.is_file()]
    if found:
        test = _read_file(found[0])
    elif (root / "test").is_dir() and _client_files(root / "test"):
        test = _concat([_read_file(f) for f in _client_files(root / "test")])
    else:
        raise InputDataError(f"{root}: no test set (expected test.npz, test.parquet or a test/ directory)")
    _check_shapes(clients, test, [f.name for f in files], root)
    return ArrayFederated("arrays", clients, test, _n_classes(clients, test), str(root))


def _leaf_users(path: Path) -> list[tuple[str, dict[str, Any]]]:
    try:
        text = read_text(path, "a LEAF JSON file")
    except ConfigError as exc:  # another encoding, a directory, a binary file
        raise InputDataError(str(exc)) from None
    try:
        blob = json.loads(text)
        users, data = blob["users"], blob["user_data"]
        return [(u, data[u]) for u in users]
    except (OSError, ValueError) as exc:
        raise InputDataError(f"{path}: not valid JSON ({exc})") from None
    except (KeyError, TypeError) as exc:
        raise InputDataError(f"{path}: expected LEAF's {{'users': [...], 'user_data': {{user: {{'x', 'y'}}}}}}, missing {exc}") from None


def _leaf_arrays(user: dict[str, Any], where: str) -> tuple[np.ndarray, np.ndarray, str]:
    """``(x, y, kind)`` of one LEAF user; ``kind`` is "text" (Shakespeare), "femnist" or "other"."""
    try:
        x, y = user["x"], user["y"]
    except (KeyError, TypeError):
        raise InputDataError(f"{where}: expected 'x' and 'y'") from None
    if x and isinstance(x[0], str):  # Shakespeare: strings -> letter indices
        try:
            xs = np.array([[LEAF_LETTERS.index(c) for c in s] for s in x], dtype=np.float32)
            ys = np.array([LEAF_LETTERS.index(c) for c in y], dtype=np.int64)
        except ValueError as exc:
            raise InputDataError(f"{where}: a character outside LEAF's alphabet ({exc})") from None
        return xs, ys, "text"
    try:
        xs = np.asarray(x, dtype=np.float32)
    except (TypeError, ValueError):
        raise InputDataError(f"{where}: x must be rows of numbers or strings") from None
    if xs.ndim == 2 and xs.shape[1] == FEMNIST_PIXELS:  # FEMNIST: 28 x 28 grey images
        return xs.reshape(-1, 1, 28, 28), np.asarray(y), "femnist"
    return xs, np.asarray(y), "other"


def read_leaf(root: Path) -> ArrayFederated:
    """LEAF's ``train/*.json`` and ``test/*.json`` (module docstring)."""
    parts: dict[str, list[tuple[Tensor, Tensor]]] = {}
    kinds: set[str] = set()
    for split in ("train", "test"):
        folder = root / split
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
        if not files:
            raise InputDataError(f"{root}: expected LEAF's {split}/ directory of .json files")
        parts[split] = []
        for f in files:
            for name, user in _leaf_users(f):
                where = f"{f}: user {name!r}"
                x, y, kind = _leaf_arrays(user, where)
                kinds.add(kind)
                parts[split].append(_tensors(x, y, where))
    clients, test = parts["train"], _concat(parts["test"])
    _check_shapes(clients, test, [f"client {i}" for i in range(len(clients))], root)
    known = {"text": len(LEAF_LETTERS), "femnist": 62}
    n_classes = max(_n_classes(clients, test), *(known.get(k, 0) for k in kinds))
    name = {"text": "leaf shakespeare", "femnist": "leaf femnist"}.get(kinds.pop(), "leaf") if len(kinds) == 1 else "leaf"
    return ArrayFederated(name, clients, test, n_classes, str(root))
