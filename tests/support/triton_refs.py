"""NumPy references for the Triton tutorial ports (examples/triton_tutorials.py)."""

from __future__ import annotations

import numpy as np


def layer_norm_reference(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, dy: np.ndarray
) -> tuple[np.ndarray, ...]:
    """(y, mean, dx, dw, db) of layer_norm over x's rows (eps 1e-5), in NumPy."""
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + 1e-5)
    wdy = w * dy
    dx = wdy - (xhat * (xhat * wdy).mean(1, keepdims=True) + wdy.mean(1, keepdims=True))
    return xhat * w + b, mu[:, 0], dx / np.sqrt(var + 1e-5), (dy * xhat).sum(0), dy.sum(0)
