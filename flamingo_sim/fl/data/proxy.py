"""The embedded proxy task: synthetic client-partitioned data after FedProx/LEAF, generated lazily per client."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from flamingo_sim.fl.data.base import FederatedDataset, LRUCache, check_client_id
from flamingo_sim.rng import rng

__all__ = ["SyntheticFederated", "MAX_CLIENT_SAMPLES", "labels", "labels_fixed_order"]

#: The most samples a generated client may hold: every count exact as a float64 (2**53).
MAX_CLIENT_SAMPLES = 2**53


def labels_fixed_order(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``argmax(x @ w.T + b)`` of each row, the logits summed in a fixed order (numpy's pairwise sum over the features),
    not by a BLAS matrix product, whose kernel (and last bits) depend on the CPU: the labels' definition."""
    return np.argmax((x[:, None, :] * w[None, :, :]).sum(axis=2) + b, axis=1).astype(np.int64)


def labels(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`labels_fixed_order`, exactly, at a BLAS product's cost (issue 52: the labels were half of a client's
    generation).

    The logits are taken from a matrix product, whose rounding depends on the CPU's kernel, and each row's largest kept
    where it leads every other logit by more than both logits' rounding could move them. Any order of summing ``n``
    products and then adding ``b_c`` lands within ``gamma_(n+2) * (sum_j |x_j w_cj| + |b_c|)`` of the exact logit
    (``gamma_k = k u / (1 - k u)``, ``u = 2**-53``: Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
    section 3.1), the fixed order and the BLAS kernel alike; so two logits can swap places between the two only where
    they lie within twice the sum of their bounds. That margin is doubled again here (the bound is itself computed in
    floating point) and every row where the lead is not larger is computed again in the fixed order: its label is
    then the fixed order's by construction, ties included (a tie has no lead)."""
    n = x.shape[1]
    u = 2.0**-53
    gamma = (n + 2) * u / (1.0 - (n + 2) * u)
    logits = x @ w.T + b
    bound = 4.0 * gamma * (np.abs(x) @ np.abs(w).T + np.abs(b))  # 2 x (either order's distance from the exact logit), doubled
    top = np.argmax(logits, axis=1)
    rows = np.arange(len(x))
    lead = logits[rows, top][:, None] - logits
    clear = lead > bound[rows, top][:, None] + bound
    clear[rows, top] = True
    out = top.astype(np.int64)
    unsure = np.flatnonzero(~clear.all(axis=1))
    if len(unsure):
        out[unsure] = labels_fixed_order(x[unsure], w, b)
    return out


class SyntheticFederated(FederatedDataset):
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
        cache_clients: int = 1_000_000,
        cache_bytes: int = 512 << 20,
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
        with np.errstate(over="ignore"):
            draw = rng(self.seed, "synthetic", "sizes").lognormal(mu, size_sigma, size=self.n_clients)
        largest = min_samples + float(np.max(draw))
        if not largest <= MAX_CLIENT_SAMPLES:  # also infinity: floor() and the int64 cast would make it a negative count
            raise ValueError(f"mean_samples {mean_samples:g}: the largest client would hold {largest:.3g} samples, more than the "
                             f"{MAX_CLIENT_SAMPLES:.3g} (2**53) a client's samples are counted to")
        self.samples_per_client = (min_samples + np.floor(draw)).astype(np.int64)
        self.test_samples = int(test_samples)
        n_test_clients = min(self.n_clients, int(test_clients))
        chosen = rng(self.seed, "synthetic", "test-clients").choice(self.n_clients, size=n_test_clients, replace=False)
        self.test_client_ids = np.sort(chosen).astype(np.int64)
        self._cache = LRUCache(cache_clients, max_bytes=cache_bytes)
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
        x = gen.standard_normal((n, self.n_features))
        x *= self._sigma_sd
        x += v  # v + z * sigma, in place: the same bits (a sum's operands commute exactly)
        return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(labels(x, w, b))

    def _generate(self, cid: int) -> tuple[Tensor, Tensor]:
        self.n_generated += 1
        gen = rng(self.seed, "synthetic", "client", cid)
        teacher = self._teacher(gen)
        return self._samples(gen, teacher, int(self.samples_per_client[cid]))

    def client_data(self, client_id: int) -> tuple[Tensor, Tensor]:
        """Client ``client_id``'s training data, generated on first use (LRU-cached)."""
        cid = check_client_id(client_id, self.n_clients)
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
