"""The simulated client population: which trace, phone and bandwidth each FL client has.

The FL task has its own client count (14,477 for OpenImage) and the trace set its own (2,400
for 100 GreenHub devices x 24 time-zone shifts). As in FedScale, FL client ``i`` replays trace
client ``i mod n_trace_clients``; each FL client still has its own phone, energy budget and
policy state. Phones are drawn once per seed from the configured mix, or (``phones.mix:
from_traces``) each FL client plays the phone of its trace's device (see
:mod:`flamingo_sim.devices.phone_models`); bandwidths are log-normal around the configured median.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from flamingo_sim.devices.pricing import transfer_s
from flamingo_sim.numeric import exp
from flamingo_sim.rng import rng


@dataclass(frozen=True)
class Population:
    n_clients: int
    trace_client: np.ndarray  # int64 (n,) index into the loaded ClientTraces' clients
    phone_idx: np.ndarray  # int64 (n,) index into ``phone_names``
    phone_names: tuple[str, ...]
    bandwidth_mbps: np.ndarray  # float64 (n,)
    phone_report: Optional[dict[str, Any]] = None  # from_traces: how many clients each mapping rule matched

    def comm_s(self, model_size_mb: float, client_idx: np.ndarray) -> np.ndarray:
        """Download plus upload time of one model for each of ``client_idx``."""
        return 2.0 * transfer_s(model_size_mb * 8.0, self.bandwidth_mbps[client_idx])


#: Pair keys (trace client x phones) up to this many are mapped through a dense table.
_DENSE_KEYS = 1 << 26


def pair_index(trace_client: np.ndarray, phone_idx: np.ndarray, n_phones: int) -> tuple[np.ndarray, np.ndarray]:
    """Each client's (trace client, phone) pair: the distinct keys ``trace_client * n_phones +
    phone_idx`` (sorted) and each client's position among them, exactly what
    ``np.unique(keys, return_inverse=True)`` gives, in O(clients) instead of a sort."""
    keys = np.asarray(trace_client, dtype=np.int64) * n_phones + np.asarray(phone_idx, dtype=np.int64)
    if not len(keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    span = int(keys.max()) + 1
    if keys.min() < 0 or span > max(_DENSE_KEYS, 4 * len(keys)):
        pairs, inverse = np.unique(keys, return_inverse=True)
        return pairs.astype(np.int64), inverse.reshape(-1).astype(np.int64)
    present = np.bincount(keys, minlength=span) > 0
    table = np.cumsum(present, dtype=np.int64) - 1  # key -> its rank among the present keys
    return np.flatnonzero(present), table[keys]


def draw_bandwidths(n_clients: int, bandwidth_mbps: float, bandwidth_sigma: float, seed: int) -> np.ndarray:
    """Each client's bandwidth (Mbit/s) for ``seed``: log-normal around the median ``bandwidth_mbps``
    with log-sd ``bandwidth_sigma`` (a sigma so wide that some overflow gives 0 or infinity, which
    :func:`~flamingo_sim.fl.compose.checks.check_fit` refuses before a run)."""
    # libm's exp (flamingo_sim.numeric), not np.exp: numpy's AVX-512 exp differs from libm's in the last bit for about 5 %
    # of arguments, so np.exp gave each client a CPU-dependent bandwidth (and every time figure after it)
    with np.errstate(over="ignore", under="ignore"):
        return bandwidth_mbps * exp(bandwidth_sigma * rng(seed, "bandwidth").standard_normal(n_clients))


def build_population(
    n_clients: int,
    n_trace_clients: int,
    phone_mix: dict[str, float] | None,
    bandwidth_mbps: float,
    bandwidth_sigma: float,
    seed: int,
    trace_phones: tuple[np.ndarray, tuple[str, ...], dict[str, Any]] | None = None,
) -> Population:
    """Assign traces (cyclically), phones and bandwidths (log-normal).

    Phones follow the mix's shares, or, with ``trace_phones`` = ``(phone index per trace
    client, phone names, report)`` from :func:`~flamingo_sim.devices.phone_models.map_trace_phones`,
    each client's trace (``phone_mix`` is then ignored).
    """
    trace_client = np.arange(n_clients, dtype=np.int64) % n_trace_clients
    report = None
    if trace_phones is not None:
        per_trace, names, report = trace_phones
        phone_idx = np.asarray(per_trace, dtype=np.int64)[trace_client]
    else:
        assert phone_mix is not None
        names = tuple(phone_mix)
        shares = np.array([phone_mix[name] for name in names], dtype=np.float64)
        shares /= shares.sum()
        # Exact shares (largest remainder), then a seeded shuffle: the mix holds for small n too.
        counts = np.floor(shares * n_clients).astype(np.int64)
        remainder = shares * n_clients - counts
        counts[np.argsort(-remainder, kind="stable")[: n_clients - counts.sum()]] += 1
        phone_idx = np.repeat(np.arange(len(names)), counts)
        rng(seed, "phones").shuffle(phone_idx)
    bandwidth = draw_bandwidths(n_clients, bandwidth_mbps, bandwidth_sigma, seed)
    return Population(
        n_clients=n_clients,
        trace_client=trace_client,
        phone_idx=phone_idx.astype(np.int64),
        phone_names=tuple(names),
        bandwidth_mbps=bandwidth,
        phone_report=report,
    )
