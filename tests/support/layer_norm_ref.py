"""The NumPy (float64) reference of TileGym's `persistent_layer_norm` (its test's reference,
torch.nn.functional.layer_norm, and the rows' mean and rstd it checks, restated in float64):
what tests/test_ops_persistent_layer_norm.py compares `fearless.ops.persistent_layer_norm`
with."""

from __future__ import annotations

import numpy as np


def layer_norm_reference(
    x: np.ndarray,
    weight: np.ndarray | None,
    bias: np.ndarray | None,
    eps: float,
    mean: np.ndarray | None = None,
    rstd: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, mean, rstd) in float64 over x's last axis: y = (x - mean) * rstd * weight + bias
    (weight None: 1, bias None: 0), rstd = 1 / sqrt(var + eps) with the biased variance; a
    given mean and rstd (one per row) are used instead."""
    x2 = x.astype(np.float64).reshape(-1, x.shape[-1])
    if mean is None or rstd is None:
        mean = x2.mean(1)
        rstd = 1.0 / np.sqrt(x2.var(1) + eps)
    mean, rstd = mean.astype(np.float64), rstd.astype(np.float64)
    y = (x2 - mean[:, None]) * rstd[:, None]
    if weight is not None:
        y = y * weight.astype(np.float64)
    if bias is not None:
        y = y + bias.astype(np.float64)
    return y.reshape(x.shape), mean, rstd
