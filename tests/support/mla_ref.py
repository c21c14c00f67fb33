"""The NumPy (float64) references of TileGym's multi-head latent attention (its tests' torch
references, tests/ops/test_mla.py and test_mla_decoding.py, restated in float64): what
tests/test_ops_mla.py and its GPU test compare `fearless.ops.mla`, `mla_decoding` and
`mla_decoding_split_kv` with."""

from __future__ import annotations

import math

import numpy as np


def mla_reference(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    qpe: np.ndarray,
    kpe: np.ndarray,
    is_causal: bool,
    scaling: float | None = None,
) -> np.ndarray:
    """(B, H, L, D), float64: softmax((q k^T + qpe kpe^T) * scaling) v, q (B, H, L, D) over
    k, v (B, H_kv, S, D), kpe (B, H_pe, S, D_PE) (head h reads KV head h // (H / H_kv) and RoPE
    head h // (H / H_pe)); causal top-left (query i sees keys j <= i), as TileGym's reference's
    `triu_indices(L, S, offset=1)`; scaling None: 1 / sqrt(D + D_PE)."""
    q, k, v, qpe, kpe = (x.astype(np.float64) for x in (q, k, v, qpe, kpe))
    h, lq, d = q.shape[1:]
    s = k.shape[2]
    if scaling is None:
        scaling = 1.0 / math.sqrt(d + qpe.shape[-1])
    k, v = np.repeat(k, h // k.shape[1], 1), np.repeat(v, h // v.shape[1], 1)
    kpe = np.repeat(kpe, h // kpe.shape[1], 1)
    scores = (q @ k.swapaxes(2, 3) + qpe @ kpe.swapaxes(2, 3)) * scaling
    if is_causal:
        scores = np.where(np.arange(s)[None, :] > np.arange(lq)[:, None], -np.inf, scores)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v  # type: ignore[no-any-return]


def mla_decoding_reference(
    q: np.ndarray,
    qpe: np.ndarray,
    kv: np.ndarray,
    kpe: np.ndarray,
    sm_scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(o (B, H, D), lse (B, H)), float64: q (B, H, D), qpe (B, H, D_PE) over the latent cache
    kv (B, S, D) (keys and values) and kpe (B, S, D_PE); lse = max / ln 2 + log2(sum), the
    log2-sum-exp of the scaled scores, as TileGym's reference returns it."""
    q, qpe, kv, kpe = (x.astype(np.float64) for x in (q, qpe, kv, kpe))
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(q.shape[-1] + qpe.shape[-1])
    scores = (q @ kv.swapaxes(1, 2) + qpe @ kpe.swapaxes(1, 2)) * sm_scale
    m = scores.max(-1, keepdims=True)
    p = np.exp(scores - m)
    total = p.sum(-1, keepdims=True)
    return (p / total) @ kv, (m / math.log(2) + np.log2(total))[..., 0]
