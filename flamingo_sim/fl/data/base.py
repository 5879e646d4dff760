"""The dataset contract: :class:`FederatedDataset`, and the helpers every source shares.

Every dataset satisfies :class:`FederatedDataset`: a number of clients, the number of samples
each holds (known up front, cheaply), each client's ``(x, y)`` on demand, and a central test
set. Client data is produced lazily and kept in an LRU cache bounded in bytes (the proxy:
512 MiB, which holds a 2,400-client population whole and most of OpenImage's 14,477, so a
selected client is rarely generated twice), so a large population never sits in memory at
once. This module holds the protocol and the shared LRU cache; the generated proxy is
:mod:`flamingo_sim.fl.data.proxy`; FedScale's layouts are read by
:mod:`flamingo_sim.fl.data.openimage` (images) and :mod:`flamingo_sim.fl.data.speech` (audio).

Tensors: ``x`` is float32 with shape ``(n, *input_shape)``, ``y`` is int64 class ids with
shape ``(n,)``.

Two hooks are optional, declared in the protocol with their defaults: a dataset that
subclasses :class:`FederatedDataset` inherits them, and overrides what it needs.
``prefetch(client_ids)`` gets a cohort ready before the round loop asks for each client
(real data: decode in parallel; default: nothing); ``train_augment(x, client_id, round_idx,
seed)`` gives what the round loop trains on instead of ``x`` (a deterministic function of its
arguments, e.g. FedScale's random horizontal flip,
:class:`~flamingo_sim.fl.data.openimage.FedScaleImageDataset`; default: ``x`` unchanged).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterable, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor

__all__ = ["FederatedDataset", "LRUCache", "DeviceResident", "check_client_id"]


@runtime_checkable
class FederatedDataset(Protocol):
    """What the round loop needs from a dataset; subclass it to inherit the optional hooks' defaults."""

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

    def prefetch(self, client_ids: Iterable[int]) -> None:
        """Optional: get these clients ready before :meth:`client_data` is asked for each (real
        data: decode them in parallel). Default: nothing."""
        return None

    def train_augment(self, x: Tensor, client_id: int, round_idx: int, seed: int) -> Tensor:
        """Optional: what client ``client_id`` trains on in round ``round_idx`` instead of ``x``
        (a deterministic function of the arguments). Default: ``x`` unchanged."""
        return x


class LRUCache:
    """A least-recently-used cache of client data keyed by client id.

    Holds at most ``size`` clients and, with ``max_bytes``, at most that many bytes of tensors
    (the most recent client is always kept, even when it alone is larger).
    """

    def __init__(self, size: int, max_bytes: int | None = None) -> None:
        if size < 1:
            raise ValueError(f"cache size must be >= 1, got {size}")
        if max_bytes is not None and max_bytes < 1:
            raise ValueError(f"cache max_bytes must be >= 1, got {max_bytes}")
        self.size = size
        self.max_bytes = max_bytes
        self.n_bytes = 0
        self._items: OrderedDict[int, tuple[Tensor, Tensor]] = OrderedDict()

    @staticmethod
    def _bytes(value: tuple[Tensor, Tensor]) -> int:
        return sum(t.numel() * t.element_size() for t in value)

    def get(self, key: int, make: Callable[[], tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]:
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = make()
        self._items[key] = value
        self.n_bytes += self._bytes(value)
        while len(self._items) > 1 and (len(self._items) > self.size or (self.max_bytes is not None and self.n_bytes > self.max_bytes)):
            _, old = self._items.popitem(last=False)
            self.n_bytes -= self._bytes(old)
        return value

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: int) -> bool:
        return key in self._items


class DeviceResident:
    """``dataset`` with its clients' samples kept on ``device`` (a GPU), least recently used
    first out once they hold more than ``max_bytes``.

    A round then moves to the device only the clients it has not trained lately; with the
    proxy task or a small real dataset every client stays resident after its first round.
    Everything else (``n_clients``, ``test_data``, ``train_augment``, ...) is the dataset's;
    :meth:`prefetch` forwards only the clients not resident (real data: decoding them).
    """

    def __init__(self, dataset: Any, device: torch.device, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        self.dataset = dataset
        self.device = torch.device(device)
        self._cache = LRUCache(1 << 62, max_bytes=max_bytes)
        self.n_moved = 0  # clients copied to the device so far (cache misses)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dataset, name)

    def _move(self, client_id: int) -> tuple[Tensor, Tensor]:
        self.n_moved += 1
        x, y = self.dataset.client_data(client_id)
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def prefetch(self, client_ids: Any) -> None:
        missing = [int(c) for c in client_ids if int(c) not in self._cache]
        if missing:
            self.dataset.prefetch(missing)

    def client_data(self, client_id: int) -> tuple[Tensor, Tensor]:
        cid = int(client_id)
        return self._cache.get(cid, lambda: self._move(cid))


def check_client_id(client_id: int, n_clients: int) -> int:
    cid = int(client_id)
    if not 0 <= cid < n_clients:
        raise IndexError(f"client id {client_id} out of range [0, {n_clients})")
    return cid
