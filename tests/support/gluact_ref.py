"""NumPy (float64) reference of TileGym's fused GLU MLP (`linear_gluact_linear`, its
tilegym/ops/ops.py docstring's computation restated), and the inputs of a case: what
tests/test_ops_linear_gluact_linear.py and its GPU test compare `fearless.ops` with."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def activation(x: np.ndarray, act_type: str) -> np.ndarray:
    """TileGym's activations in float64; 'gelu' is the tanh form, as TileGym's kernel maps it."""
    if act_type == "silu":
        return x / (1.0 + np.exp(-x))
    if act_type == "relu":
        return np.maximum(x, 0.0)
    assert act_type in ("gelu", "gelu-tanh"), act_type
    return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3)))


def gluact_reference(
    x: np.ndarray, wa: np.ndarray, wn: np.ndarray, w2: np.ndarray, act_type: str = "silu"
) -> np.ndarray:
    """act(x @ wa^T) * (x @ wn^T) @ w2^T in float64: x (*, K), wa and wn (I, K), w2 (N, I);
    returns (*, N)."""
    x2 = x.reshape(-1, x.shape[-1]).astype(np.float64)
    gate = x2 @ wa.astype(np.float64).T
    up = x2 @ wn.astype(np.float64).T
    out = (activation(gate, act_type) * up) @ w2.astype(np.float64).T
    return out.reshape(*x.shape[:-1], w2.shape[0])


def gluact_inputs(
    lead: tuple[int, ...], k: int, i: int, n: int, seed: int = 0, dtype: Any = np.float32
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x (*lead, K), wa (I, K), wn (I, K), w2 (N, I)) in `dtype`: normals, the weights scaled
    by 1 / sqrt(fan_in) (nn.Linear's scale), so the pre-activations are of order one."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((*lead, k))
    wa = rng.standard_normal((i, k)) / math.sqrt(k)
    wn = rng.standard_normal((i, k)) / math.sqrt(k)
    w2 = rng.standard_normal((n, i)) / math.sqrt(i)
    return x.astype(dtype), wa.astype(dtype), wn.astype(dtype), w2.astype(dtype)
