"""An example of your own network for ``data.model: byo_models:CharBag`` (imported from beside the experiment).

A factory is called as ``Factory(input_shape, n_classes)`` and returns an ``nn.Module`` mapping
float32 ``(n, *input_shape)`` inputs to ``(n, n_classes)`` logits. ``CharBag`` reads LEAF
Shakespeare's 80 letter indices: embeds them, mean-pools the last 16 and the whole window, and
classifies the next character. No buffers and no dropout, so cohorts train batched with vmap.
"""

from __future__ import annotations

import torch
from torch import nn


class CharBag(nn.Module):
    def __init__(self, input_shape: tuple[int, ...], n_classes: int, dim: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(n_classes, dim)
        self.head = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.embed(x.long())
        return self.head(torch.cat([e[:, -16:].mean(dim=1), e.mean(dim=1)], dim=1))
