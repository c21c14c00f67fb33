"""The NumPy (float64) references of TileGym's experimental mHC operators (its
tests/ops/experimental/test_mhc.py torch references restated): what tests/test_ops_mhc.py
compares `fearless.ops.mhc_gemm_rms_scale`, `mhc_apply_residual` and `mhc_sinkhorn` with."""

from __future__ import annotations

import numpy as np


def tf32(a: np.ndarray) -> np.ndarray:
    """f32 values rounded to tf32's 10-bit mantissa, ties away from zero (PTX's cvt.rna)."""
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def gemm_rms_scale_reference(
    x: np.ndarray,
    w: np.ndarray,
    n: int,
    alphas: tuple[float, float, float],
    bias: np.ndarray,
    tf32_product: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(y (M, N), r (M, 1)) in float64: r = sqrt(mean(x^2)), y = x @ w * alpha / r + bias with
    sigmoid on columns [0, n), 2 sigmoid on [n, 2n); `tf32_product`: x and w rounded to tf32
    in the product only (TileGym's where x or w is f32), r from x as given."""
    xd = x.astype(np.float64)
    r = np.sqrt((xd * xd).mean(1, keepdims=True))
    if tf32_product:
        x, w = tf32(x), tf32(w)
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    scale = np.full(wd.shape[1], alphas[2])
    scale[:n], scale[n : 2 * n] = alphas[0], alphas[1]
    lin = xd @ wd * scale / r + bias.astype(np.float64)
    sig = 1.0 / (1.0 + np.exp(-lin))
    y = lin.copy()
    y[:, :n], y[:, n : 2 * n] = sig[:, :n], 2.0 * sig[:, n : 2 * n]
    return y, r


def apply_residual_reference(x: np.ndarray, f_out: np.ndarray, y: np.ndarray, n: int) -> np.ndarray:
    """(B, n C) float64: H_res @ x.view(B, n, C) + H_post[..., None] * f_out[:, None]."""
    b, c = f_out.shape
    h_res = y[:, 2 * n : 2 * n + n * n].astype(np.float64).reshape(b, n, n)
    h_post = y[:, n : 2 * n].astype(np.float64)
    out = h_res @ x.astype(np.float64).reshape(b, n, c) + h_post[..., None] * f_out[:, None]
    return out.reshape(b, n * c)  # type: ignore[no-any-return]


def sinkhorn_reference(y: np.ndarray, n: int, iters: int = 20) -> np.ndarray:
    """y in float64 with each row's n x n block from column 2n replaced by exp of it normalised
    by rows then columns, `iters` times."""
    out = y.astype(np.float64).copy()
    mat = np.exp(out[:, 2 * n : 2 * n + n * n].reshape(-1, n, n))
    for _ in range(iters):
        mat = mat / mat.sum(2, keepdims=True)
        mat = mat / mat.sum(1, keepdims=True)
    out[:, 2 * n : 2 * n + n * n] = mat.reshape(-1, n * n)
    return out
