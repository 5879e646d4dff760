"""Which clients are online, counted and drawn without touching every client.

A :class:`~flamingo_sim.devices.battery.PopulationBudget` knows a client's online flag from
its *pair* (trace client, battery capacity; a few thousand of them) unless the client is one
of the few whose training made it *deviate*. :class:`OnlineIndex` keeps, for fixed blocks of
consecutive client ids, how many clients of the block sit on an online pair; with the deviated
clients' corrections that gives the number of online clients and the client at any rank of
the sorted online list:

- building it costs O(clients) once (a sparse block x pair count matrix, column by pair);
- a trace step that flips the online flag of ``f`` pairs costs O(pairs + f x blocks);
- :meth:`OnlineIndex.count` costs O(blocks + deviated), :meth:`OnlineIndex.take` of ``k``
  ranks O(blocks + deviated + k x BLOCK) (each rank reads its own block's clients);
- only :meth:`OnlineIndex.members` (the whole sorted list) costs O(clients).

So a uniform draw of a cohort among 10,000,000 clients reads a few thousand numbers per round
instead of ten million. The answers are exactly those of ``np.flatnonzero(online)`` on the
whole-population flag array (``tests/devices/test_online.py`` checks it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["BLOCK", "OnlineIndex", "OnlineClients"]

#: Clients per block: a rank is resolved by reading one block's clients.
BLOCK = 1 << 14
#: Block x pair matrices up to this many cells are counted densely (one bincount); larger by sorting.
_DENSE_CELLS = 1 << 24


class OnlineIndex:
    """Rank and select over the online clients of a population whose clients map to pairs.

    ``pair_of`` (n,) is each client's pair, ``n_pairs`` how many pairs there are. The index
    follows the pairs' online flags through :meth:`update`; the deviated clients (sorted ids,
    their online flags) are passed to each query, since the budget owns them.
    """

    def __init__(self, pair_of: np.ndarray, n_pairs: int, block: int = BLOCK) -> None:
        pair_of = np.asarray(pair_of, dtype=np.int64)
        self.n = len(pair_of)
        self.block = int(block)
        self.n_blocks = max(1, -(-self.n // self.block))
        self.pair_of = pair_of
        nb = self.n_blocks
        key = pair_of * nb + np.arange(self.n, dtype=np.int64) // self.block  # column-major: by pair, then block
        if n_pairs * nb <= _DENSE_CELLS:
            counts = np.bincount(key, minlength=n_pairs * nb)
            cells = np.flatnonzero(counts)
            values = counts[cells]
        else:
            cells, values = np.unique(key, return_counts=True)
        del key
        self._col_block = (cells % nb).astype(np.int64)
        self._col_count = values.astype(np.int64)
        self._col_ptr = np.searchsorted(cells // nb, np.arange(n_pairs + 1, dtype=np.int64))
        self.pair_online = np.zeros(n_pairs, dtype=bool)
        self.base = np.zeros(nb, dtype=np.int64)  # per block: clients on an online pair

    def update(self, pair_online: np.ndarray) -> None:
        """Follow new pair online flags: blocks gain or lose the clients of the pairs that flipped."""
        flipped = np.flatnonzero(pair_online != self.pair_online)
        if not len(flipped):
            return
        start, stop = self._col_ptr[flipped], self._col_ptr[flipped + 1]
        lengths = stop - start
        entries = np.repeat(start - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
        sign = np.repeat(np.where(pair_online[flipped], 1, -1), lengths)
        np.add.at(self.base, self._col_block[entries], sign * self._col_count[entries])
        self.pair_online = np.array(pair_online, dtype=bool, copy=True)

    def counts(self, dev: np.ndarray, dev_online: np.ndarray) -> np.ndarray:
        """Online clients per block, the deviated clients' own flags included."""
        out = self.base.copy()
        if len(dev):
            delta = dev_online.astype(np.int64) - self.pair_online[self.pair_of[dev]]
            np.add.at(out, dev // self.block, delta)
        return out

    def count(self, dev: np.ndarray, dev_online: np.ndarray) -> int:
        """How many clients are online."""
        return int(self.counts(dev, dev_online).sum())

    def _block_members(self, b: int, dev: np.ndarray, dev_online: np.ndarray) -> np.ndarray:
        lo, hi = b * self.block, min(self.n, (b + 1) * self.block)
        mask = self.pair_online[self.pair_of[lo:hi]]
        i, j = np.searchsorted(dev, [lo, hi])
        mask[dev[i:j] - lo] = dev_online[i:j]
        return np.flatnonzero(mask) + lo

    def take(self, positions: np.ndarray, dev: np.ndarray, dev_online: np.ndarray) -> np.ndarray:
        """The clients at ``positions`` (ranks, 0-based) of the sorted online list: ``members()[positions]``."""
        positions = np.asarray(positions, dtype=np.int64)
        counts = self.counts(dev, dev_online)
        ends = np.cumsum(counts)
        if len(positions) and (positions.min() < 0 or positions.max() >= ends[-1]):
            raise IndexError(f"online ranks must be in [0, {int(ends[-1])})")
        blk = np.searchsorted(ends, positions, side="right")
        local = positions - (ends[blk] - counts[blk])
        out = np.empty(len(positions), dtype=np.int64)
        for b in np.unique(blk):
            at = blk == b
            out[at] = self._block_members(int(b), dev, dev_online)[local[at]]
        return out

    def rank(self, clients: np.ndarray, dev: np.ndarray, dev_online: np.ndarray) -> np.ndarray:
        """How many online clients have a smaller id than each of ``clients``."""
        clients = np.asarray(clients, dtype=np.int64)
        counts = self.counts(dev, dev_online)
        before = np.cumsum(counts) - counts
        blk = clients // self.block
        out = np.empty(len(clients), dtype=np.int64)
        for b in np.unique(blk):
            at = blk == b
            out[at] = before[b] + np.searchsorted(self._block_members(int(b), dev, dev_online), clients[at])
        return out

    def members(self, dev: np.ndarray, dev_online: np.ndarray) -> np.ndarray:
        """Every online client, sorted (O(clients))."""
        mask = self.pair_online[self.pair_of]
        mask[dev] = dev_online
        return np.flatnonzero(mask)


class OnlineClients:
    """The sorted online clients of a budget at one moment, as a lazy sequence.

    ``len()`` is the count; :meth:`take` the clients at some ranks; :meth:`members` (or
    ``np.asarray``) the whole sorted array, built on first use. ``exclude`` (sorted, distinct)
    leaves some clients out (FedBuff's busy ones): ranks then skip them.
    """

    def __init__(self, index: OnlineIndex, dev: np.ndarray, dev_online: np.ndarray, exclude: np.ndarray | None = None) -> None:
        self._index, self._dev, self._dev_online = index, dev, dev_online
        self._members: np.ndarray | None = None
        self._skip = np.zeros(0, dtype=np.int64)  # online ranks of the excluded clients that are online, sorted
        if exclude is not None and len(exclude):
            exclude = np.asarray(exclude, dtype=np.int64)
            online = self._online_flags(exclude)
            self._skip = index.rank(exclude[online], dev, dev_online)
        self._len = index.count(dev, dev_online) - len(self._skip)

    def _online_flags(self, clients: np.ndarray) -> np.ndarray:
        flags = self._index.pair_online[self._index.pair_of[clients]]
        pos = np.searchsorted(self._dev, clients)
        hit = pos < len(self._dev)
        hit[hit] = self._dev[pos[hit]] == clients[hit]
        flags[hit] = self._dev_online[pos[hit]]
        return flags

    def __len__(self) -> int:
        return self._len

    def take(self, positions: Any) -> np.ndarray:
        """The clients at ``positions`` (0-based) of the sorted list."""
        pos = np.asarray(positions, dtype=np.int64)
        if len(pos) and (pos.min() < 0 or pos.max() >= self._len):
            raise IndexError(f"online ranks must be in [0, {self._len})")
        if self._members is not None:
            return self._members[pos]
        for r in self._skip:  # sorted: each skipped rank at or below a position moves it up by one
            pos = pos + (pos >= r)
        return self._index.take(pos, self._dev, self._dev_online)

    def members(self) -> np.ndarray:
        """Every client of the set, sorted (O(clients), built once)."""
        if self._members is None:
            every = self._index.members(self._dev, self._dev_online)
            self._members = np.delete(every, self._skip) if len(self._skip) else every
        return self._members

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.members()
        return out if dtype is None else out.astype(dtype)
