"""The NumPy (float64) reference of flash-attn's `flash_attn_with_kvcache` (its docstring's
semantics, restated), and the paging of a contiguous cache into shuffled blocks: what
tests/test_ops_kvcache.py and its GPU test compare `fearless.ops.flash_attn_with_kvcache` with."""

from __future__ import annotations

import numpy as np


def kvcache_reference(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    seqlens: np.ndarray,
    scale: float | None = None,
    causal: bool = False,
    window: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
) -> np.ndarray:
    """(B, L, H, D) float64: q (B, L, H, D) over the contiguous cache k, v (>= B, S, H_kv, D),
    sequence b's first seqlens[b] entries; query i at seqlens[b] - L + i (bottom-right); a row
    with no key is 0."""
    b, lq, h, d = q.shape
    hk = k.shape[2]
    scale = d**-0.5 if scale is None else scale
    left, right = window[0], 0 if causal else window[1]
    out = np.zeros((b, lq, h, d))
    for s in range(b):
        n = int(seqlens[s])
        kk = np.repeat(k[s, :n].astype(np.float64), h // hk, axis=1)  # (n, H, D)
        vv = np.repeat(v[s, :n].astype(np.float64), h // hk, axis=1)
        sc = np.einsum("lhd,nhd->hln", q[s].astype(np.float64), kk) * scale
        if softcap > 0:
            sc = softcap * np.tanh(sc / softcap)
        pos = n - lq + np.arange(lq)[:, None]
        keys = np.arange(n)[None, :]
        keep = np.ones((lq, n), bool)
        if left >= 0:
            keep &= keys >= pos - left
        if right >= 0:
            keep &= keys <= pos + right
        sc = np.where(keep, sc, -np.inf)
        top = sc.max(-1, keepdims=True, initial=-np.inf)
        e = np.exp(sc - np.where(np.isinf(top), 0.0, top))
        z = e.sum(-1, keepdims=True)
        p = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
        out[s] = np.einsum("hln,nhd->lhd", p, vv)
    return out


def paged(
    k: np.ndarray, v: np.ndarray, page: int, rng: np.random.Generator, spare: int = 3
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The contiguous cache k, v (B, S, H_kv, D) cut into pages of `page` rows placed in
    shuffled blocks (with `spare` unused blocks of noise): (k_blocks, v_blocks, block_table)."""
    b, s, hk, d = k.shape
    mb = -(-s // page)
    nb = b * mb + spare
    order = rng.permutation(nb)
    kb = rng.standard_normal((nb, page, hk, d)).astype(k.dtype) * 100
    vb = rng.standard_normal((nb, page, hk, d)).astype(v.dtype) * 100
    table = order[: b * mb].reshape(b, mb).astype(np.int32)
    for x, xb in ((k, kb), (v, vb)):
        pad = np.zeros((b, mb * page, hk, d), x.dtype)
        pad[:, :s] = x
        xb[table.reshape(-1)] = pad.reshape(b * mb, page, hk, d)
    return kb, vb, table
