"""Coordinate-wise trimmed mean: a server aggregator in one file (docs/plugins.md).

For every entry of the model, the clients' values are sorted, the lowest and highest share
``trim`` (a parameter read from the experiment's ``aggregation`` section) are dropped and the
rest averaged, unweighted (Yin et al., ICML 2018): a few clients' outlying updates cannot drag
the global model. Stateless, and without a proximal term: the contract's defaults apply.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from flamingo_sim.config import check_ranges
from flamingo_sim.fl.strategy.base import Aggregator


@dataclass(frozen=True)
class TrimmedMeanParams:
    """Trimmed mean (``aggregation`` with ``name: trimmed_mean:TrimmedMean``)."""

    #: Share of the clients dropped at each end of every coordinate's sorted values.
    trim: float = 0.1

    def __post_init__(self) -> None:
        check_ranges(self, trim="[0, 0.5)")


class TrimmedMean(Aggregator):
    """The mean of each coordinate's values with the ``trim`` lowest and highest shares dropped."""

    Params = TrimmedMeanParams

    def __init__(self, trim: float = 0.1) -> None:
        self.trim = trim

    def aggregate(self, global_state: dict[str, Tensor], stacked: dict[str, Tensor], n_samples: Tensor) -> dict[str, Tensor]:
        out = {}
        for name, values in stacked.items():
            if not values.dtype.is_floating_point:  # counters (BatchNorm's batches seen): keep the global one
                out[name] = global_state[name]
                continue
            k = values.shape[0]
            cut = int(self.trim * k)
            kept = torch.sort(values, dim=0).values[cut: k - cut]
            out[name] = kept.mean(dim=0).to(global_state[name].dtype)
        return out
