"""The float64 NumPy reference of `fearless.ops.fmha_variant` (TileGym's fmha_variant), and
Triton's `tl.rand` (Philox4x32-10, `uint_to_uniform_float`) in NumPy for its dropout mask:
written from the algorithm's definition, independently of fearless's tile/random.py."""

from __future__ import annotations

from typing import Any

import numpy as np

ROUND_A, ROUND_B = 0xD2511F53, 0xCD9E8D57
KEY_A, KEY_B = 0x9E3779B9, 0xBB67AE85
M32 = np.uint64(0xFFFFFFFF)


def philox4x32(c: list[np.ndarray], k0: int, k1: int, rounds: int = 10) -> list[np.ndarray]:
    """Random123's Philox4x32 of counters c (four u32 arrays) under key (k0, k1)."""
    c0, c1, c2, c3 = (np.asarray(x, dtype=np.uint64) & M32 for x in c)
    ka, kb = np.uint64(k0 & 0xFFFFFFFF), np.uint64(k1 & 0xFFFFFFFF)
    for _ in range(rounds):
        p0 = np.uint64(ROUND_A) * c0
        p2 = np.uint64(ROUND_B) * c2
        c0, c1, c2, c3 = (
            ((p2 >> np.uint64(32)) ^ c1 ^ ka) & M32,
            p2 & M32,
            ((p0 >> np.uint64(32)) ^ c3 ^ kb) & M32,
            p0 & M32,
        )
        ka = (ka + np.uint64(KEY_A)) & M32
        kb = (kb + np.uint64(KEY_B)) & M32
    return [x.astype(np.uint32) for x in (c0, c1, c2, c3)]


def triton_rand(seed: int, offsets: np.ndarray) -> np.ndarray:
    """Triton's `tl.rand(seed, offsets)` for int64 offsets: Philox4x32-10 at counter
    (offset low, offset high, 0, 0) keyed by the seed's (low, high) words, word 0 as f32."""
    s = seed & (2**64 - 1)
    off = np.asarray(offsets, dtype=np.int64).view(np.uint64)
    zero = np.zeros_like(off)
    r0 = philox4x32([off & M32, off >> np.uint64(32), zero, zero], s & 0xFFFFFFFF, s >> 32)[0]
    x = r0.view(np.int32).astype(np.int64)
    x = np.where(x < 0, -x - 1, x).astype(np.int32)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


def fmha_variant_ref(
    q: Any,
    k: Any,
    v: Any,
    scaling: float | None = None,
    is_causal: bool = True,
    q_lens: Any = None,
    kv_lens: Any = None,
    bias_type: str | None = None,
    bias: Any = None,
    dropout: float = 0.0,
    seed: int = 0,
    window_size: int = 0,
    random_mask: Any = None,
    layout: str = "bnsd",
) -> np.ndarray:
    """fmha_variant in float64 (NumPy arrays in, NumPy out, in q's layout): 0 in padded rows
    and rows that see no key."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    if layout == "nsbd":
        q, k, v = (x.transpose(2, 0, 1, 3) for x in (q, k, v))
    b, n, s_q, d = q.shape
    n_kv, s_kv, dv = k.shape[1], k.shape[2], v.shape[3]
    scale = 1.0 / np.sqrt(d) if scaling is None else scaling
    ql = [s_q] * b if q_lens is None else [int(x) for x in np.asarray(q_lens)]
    kl = [s_kv] * b if kv_lens is None else [int(x) for x in np.asarray(kv_lens)]
    out = np.zeros((b, n, s_q, dv))
    i = np.arange(s_q)[:, None]
    j = np.arange(s_kv)[None, :]
    for bi in range(b):
        pos = i + kl[bi] - ql[bi]
        seen = (j < kl[bi]) & (i < ql[bi])
        if is_causal:
            seen &= j <= pos
        if window_size:
            seen &= np.abs(j - pos) <= window_size
        for h in range(n):
            hk = h // (n // n_kv)
            s = q[bi, h] @ k[bi, hk].T * scale
            if bias_type in ("vector", "matrix"):
                bb = np.asarray(bias, dtype=np.float64)
                s = s + bb[min(bi, bb.shape[0] - 1), min(h, bb.shape[1] - 1)]
            elif bias_type == "alibi":
                s = s - float(np.asarray(bias, dtype=np.float64)[h]) * np.abs(pos - j)
            ok = seen
            if random_mask is not None:
                m = np.asarray(random_mask)
                ok = ok & ~m[min(bi, m.shape[0] - 1), min(h, m.shape[1] - 1)].astype(bool)
            s = np.where(ok, s, -np.inf)
            top = s.max(axis=-1, keepdims=True)
            e = np.where(ok, np.exp(s - np.where(np.isfinite(top), top, 0.0)), 0.0)
            tot = e.sum(axis=-1, keepdims=True)
            p = np.where(tot > 0, e / np.where(tot > 0, tot, 1.0), 0.0)
            if dropout:
                offs = ((bi * n + h) * s_q + i) * s_kv + j
                kept = triton_rand(seed, offs) > np.float32(dropout)
                p = np.where(kept, p / (1.0 - dropout), 0.0)
            out[bi, h] = p @ v[bi, hk]
    return out.transpose(1, 2, 0, 3) if layout == "nsbd" else out
