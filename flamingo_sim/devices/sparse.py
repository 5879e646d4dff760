"""Per-client numbers kept only for the clients that have one: :class:`SparseVector`.

Most per-client state of a simulation (rounds kept, training energy drawn, choices explored,
lost to training) is zero for every client that has not been selected yet. A dense array over
10,000,000 clients would cost 80 MB each and, worse, a page fault on the first write to each
untouched page (a few milliseconds a round while the cohorts wander over the population). A
:class:`SparseVector` holds the non-default entries as sorted client ids and their values:
reading or updating ``k`` clients costs O(k log m + m) for ``m`` entries held, its
checkpoint holds only them, and :meth:`SparseVector.dense` gives the whole array when needed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SparseVector"]


class SparseVector:
    """A length-``n`` vector of ``dtype`` that is zero except at the sorted ids :attr:`idx`.

    :attr:`idx` and :attr:`values` are replaced, never changed in place, on each update.
    Updates apply element for element the arithmetic a dense array would (``+=`` in the same
    dtype), so the numbers are the same bit for bit.
    """

    def __init__(self, n: int, dtype: Any) -> None:
        self.n = int(n)
        self.dtype = np.dtype(dtype)
        self.idx = np.zeros(0, dtype=np.int64)
        self.values = np.zeros(0, dtype=self.dtype)

    def __len__(self) -> int:
        return self.n

    def _find(self, clients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.searchsorted(self.idx, clients)
        hit = pos < len(self.idx)
        hit[hit] = self.idx[pos[hit]] == clients[hit]
        return pos, hit

    def get(self, clients: Any) -> np.ndarray:
        """The entries of ``clients`` (any shape of ids)."""
        clients = np.asarray(clients, dtype=np.int64)
        out = np.zeros(clients.shape, dtype=self.dtype)
        if len(self.idx) and clients.size:
            pos, hit = self._find(clients.ravel())
            out.ravel()[hit] = self.values[pos[hit]]
        return out

    def __getitem__(self, key: Any) -> Any:
        """``v[i]``, ``v[ids]`` or ``v[a:b]``, as a dense array would answer (read only)."""
        if isinstance(key, slice):
            return self.get(np.arange(self.n)[key])
        if np.ndim(key) == 0:
            i = int(key)
            if not -self.n <= i < self.n:
                raise IndexError(f"index {i} is out of bounds for {self.n} clients")
            return self.get(np.array([i % self.n]))[0]
        return self.get(key)

    def _entries(self, clients: np.ndarray) -> np.ndarray:
        """Positions of ``clients`` (distinct) in :attr:`idx`, inserting zeros for new ones."""
        pos, hit = self._find(clients)
        if not hit.all():
            new = np.unique(clients[~hit])
            at = np.searchsorted(self.idx, new)
            self.idx = np.insert(self.idx, at, new)
            self.values = np.insert(self.values, at, np.zeros(len(new), dtype=self.dtype))
            pos = np.searchsorted(self.idx, clients)
        return pos

    def add(self, clients: Any, amounts: Any) -> None:
        """``v[clients] += amounts`` (a repeated client adds each of its amounts, as ``np.add.at``;
        zero amounts store nothing)."""
        clients = np.asarray(clients, dtype=np.int64).ravel()
        amounts = np.broadcast_to(np.asarray(amounts), clients.shape)
        touch = amounts != 0
        if not touch.any():
            return
        clients, amounts = clients[touch], amounts[touch]
        pos = self._entries(clients)
        values = self.values.copy()
        np.add.at(values, pos, amounts)
        self.values = values

    def set(self, clients: Any, value: Any) -> None:
        """``v[clients] = value`` (a non-zero value)."""
        clients = np.asarray(clients, dtype=np.int64).ravel()
        if len(clients):
            pos = self._entries(clients)
            values = self.values.copy()
            values[pos] = value
            self.values = values

    def nonzero(self) -> np.ndarray:
        """The sorted ids whose entry is not zero."""
        return self.idx[self.values != 0]

    def count_nonzero(self) -> int:
        return int(np.count_nonzero(self.values))

    def dense(self) -> np.ndarray:
        """The whole vector (O(n))."""
        out = np.zeros(self.n, dtype=self.dtype)
        out[self.idx] = self.values
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"n": self.n, "idx": self.idx.copy(), "values": self.values.copy()}

    def load_state_dict(self, state: Any, name: str = "vector") -> None:
        """Restore :meth:`state_dict`'s form, or a dense array of ``n`` entries (saved by an older version)."""
        if isinstance(state, dict):
            idx = np.asarray(state["idx"], dtype=np.int64)
            values = np.asarray(state["values"]).astype(self.dtype)
            if int(state["n"]) != self.n:
                raise ValueError(f"{name} is for {int(state['n'])} clients, this simulation has {self.n}")
            if idx.ndim != 1 or values.shape != idx.shape or np.any(np.diff(idx) <= 0) or (len(idx) and (idx[0] < 0 or idx[-1] >= self.n)):
                raise ValueError(f"{name}: the saved client ids are malformed")
        else:
            dense = np.asarray(state).astype(self.dtype)
            if dense.shape != (self.n,):
                raise ValueError(f"{name} is for {dense.shape[0] if dense.ndim else 0} clients, this simulation has {self.n}")
            idx = np.flatnonzero(dense)
            values = dense[idx]
        self.idx, self.values = idx.copy(), values.copy()
