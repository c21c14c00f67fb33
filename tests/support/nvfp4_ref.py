"""A NumPy reference of NVFP4 quantization (TileGym's `nvfp4_quantize`), written from its
semantics for the tests of `fearless.ops.nvfp4_quantize`: the scales rounded to f8e4m3fn by
ml_dtypes after saturating at 448 (as the GPU converts), the fp4 e2m1 values by a nearest-value
search over the eight magnitudes."""

from __future__ import annotations

import ml_dtypes
import numpy as np

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])  # magnitude codes 0..7
E4M3_EPS = np.float32(1.5258789e-05)


def e2m1_codes(v: np.ndarray) -> np.ndarray:
    """The 4-bit e2m1 codes of f32 `v` (sign << 3 | magnitude code): the nearest of the eight
    magnitudes, a tie to the even code, beyond 6 (infinity too) saturated to 6; NaN gives 0."""
    a = np.abs(v.astype(np.float64))
    with np.errstate(invalid="ignore"):
        dist = np.abs(a[..., None] - E2M1)
        nearest = dist == dist.min(axis=-1, keepdims=True)
    even = nearest & (np.arange(8) % 2 == 0)
    code = np.where(even.any(-1), np.argmax(even, -1), np.argmax(nearest, -1))
    code = np.where(a > 6.0, 7, code)
    nan = np.isnan(v)
    code = np.where(nan, 0, code)
    sign = np.signbit(v) & ~nan
    return (code | sign.astype(np.int64) << 3).astype(np.uint8)


def nvfp4_reference(x: np.ndarray, s_enc: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(packed (rows, cols // 2) uint8, scales (blocks * 512,) uint8) of x (rows, cols)."""
    x32 = np.asarray(x).astype(np.float32)
    rows, cols = x32.shape
    bm, bn = -(-rows // 128), -(-cols // 64)
    xp = np.zeros((bm * 128, bn * 64), np.float32)
    xp[:rows, :cols] = x32
    groups = xp.reshape(bm * 128, bn * 4, 16)
    s = np.float32(s_enc)
    with np.errstate(invalid="ignore", over="ignore"):
        pre = np.maximum(np.abs(groups).max(-1) / np.float32(6.0) * s, E4M3_EPS)
    inside = (np.arange(bm * 128)[:, None] < rows) & (np.arange(bn * 4)[None, :] * 16 < cols)
    # rounded as the GPU converts to f8 (satfinite): past 448 it is 448, not ml_dtypes' NaN
    scale = np.minimum(np.where(inside, pre, np.float32(0)), np.float32(448.0))  # NaN stays
    scale = scale.astype(ml_dtypes.float8_e4m3fn)

    grid = scale.view(np.uint8).reshape(bm, 128, bn, 4).transpose(0, 2, 1, 3)
    r, c = np.arange(128)[:, None], np.arange(4)[None, :]
    scales = np.zeros((bm, bn, 512), np.uint8)
    scales[:, :, (r % 32) * 16 + (r // 32) * 4 + c] = grid

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = groups * (s / scale.astype(np.float32))[..., None]
    codes = e2m1_codes(q).reshape(bm * 128, bn * 64)[:rows, :cols]
    packed = (codes[:, 0::2] | codes[:, 1::2] << 4).astype(np.uint8)
    return packed, scales.reshape(-1)
