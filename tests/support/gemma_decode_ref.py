"""The NumPy (float64) reference of TileGym's Gemma decode (its test's torch reference,
tests/ops/test_gemma_attention_decode.py's einsum_reference_decode, restated): what
tests/test_ops_gemma_attention_decode.py compares `fearless.ops.gemma_attention_decode` with."""

from __future__ import annotations

import numpy as np


def gemma_decode_reference(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scaling: float,
    window_size: int = 0,
    soft_cap: float | None = None,
) -> np.ndarray:
    """(B, H, 1, D), float64: q (B, H, 1, D) over k, v (B, H_kv, S, D), query head h on KV head
    h // (H / H_kv); scores q k^T * scaling, then soft_cap * tanh(scores / soft_cap), then the
    keys j < S - 1 - window_size dropped (window_size > 0), softmax, times v."""
    h, hk, s = q.shape[1], k.shape[1], k.shape[2]
    q64 = q.astype(np.float64)
    k64 = np.repeat(k.astype(np.float64), h // hk, axis=1)
    v64 = np.repeat(v.astype(np.float64), h // hk, axis=1)
    scores = np.einsum("bhid,bhjd->bhij", q64, k64) * scaling
    if soft_cap is not None:
        scores = soft_cap * np.tanh(scores / soft_cap)
    if window_size > 0:
        scores = np.where(np.arange(s) < s - 1 - window_size, -np.inf, scores)
    scores = scores - scores.max(-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhij,bhjd->bhid", p, v64)  # type: ignore[no-any-return]
