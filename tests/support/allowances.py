"""Allowances for bfloat16 results compared across CPUs (issue 53).

bfloat16 arithmetic rounds by CPU: oneDNN's convolution kernels (AVX2 against AVX-512) and ATen's
(default against vectorised) move a tiny decoder's pixels by up to a few levels of 255, where the
CPU that recorded them reproduces them to 5e-4. So a recorded bfloat16 result is compared within a
bound derived from bfloat16's own rounding on that network: the authors' bfloat16 against their
float32 (``d``). Each bfloat16 run lies within about ``d`` of the float32 result, so two bfloat16
runs lie within ``2 d`` of each other (the triangle inequality): that is the allowance, for the
largest and, where recorded, the mean difference. Integers (token ids, image codes) stay exact.

Also here, for the tests that share them: BAGEL's float32 parity allowances (its parity and
preset tests compare with the authors' float32 records).
"""

from __future__ import annotations

import numpy as np


def assert_within_bf16_rounding(ours, theirs, rounding_max: float, rounding_mean: float | None = None) -> None:
    """``ours`` within twice bfloat16's rounding (``rounding_max``, ``rounding_mean``: the authors'
    bfloat16 against their float32 on the same network) of ``theirs``."""
    diff = np.abs(np.asarray(ours, dtype=np.float64).reshape(-1) - np.asarray(theirs, dtype=np.float64).reshape(-1))
    assert diff.max() <= 2 * rounding_max, f"largest difference {diff.max():.4g} > 2 x {rounding_max:.4g}"
    if rounding_mean is not None:
        assert diff.mean() <= 2 * rounding_mean, f"mean difference {diff.mean():.4g} > 2 x {rounding_mean:.4g}"


#: BAGEL in float32 against the authors' float32 records (parity/bagel): logits reached 2.6e-6 at a
#: magnitude of 3.3, latents 5.6e-6 after 3 to 5 guided flow steps; uint8 pixels after the authors'
#: truncation may fall either side of a boundary
BAGEL_LOGITS_ATOL, BAGEL_LATENT_ATOL, BAGEL_PIXEL_ATOL = 2e-5, 5e-5, 1
