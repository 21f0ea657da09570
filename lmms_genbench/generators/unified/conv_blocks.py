"""The taming-transformers (VQGAN) convolution blocks that Show-o's MAGVIT-v2 and VILA-U's RQ-VAE
decoder both use, written to the authors' state-dict keys (``norm1``, ``conv1``, ``norm2``,
``conv2``, ``nin_shortcut``).

Requires ``torch``; import this module only where torch is wanted.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


def group_norm(channels: int) -> nn.GroupNorm:
    """GroupNorm over 32 groups, eps 1e-6, as both authors' ``Normalize``."""
    return nn.GroupNorm(32, channels, eps=1e-6, affine=True)


class ResnetBlock(nn.Module):
    """norm, SiLU, 3x3 conv, twice, plus the input (through a 1x1 conv where the width changes)."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.norm1, self.conv1 = group_norm(cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2, self.conv2 = group_norm(cout), nn.Conv2d(cout, cout, 3, padding=1)
        # the authors' key for the 1x1 projection when the width changes
        self.nin_shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return (x if self.nin_shortcut is None else self.nin_shortcut(x)) + h


class AttentionWeights(nn.Module):
    """The weights of a one-head attention over the latent positions: ``norm`` and 1x1 convs
    ``q``, ``k``, ``v``, ``proj_out``. Each model's subclass computes with them as its authors do
    (the sums run in different orders, so float results differ in the last bits)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = group_norm(channels)
        self.q, self.k, self.v, self.proj_out = (nn.Conv2d(channels, channels, 1) for _ in range(4))
