"""A float64 NumPy reference of TileGym's `moe_actgrad_bwd` (the MoE down-projection's
activation-gradient backward, tilegym/ops/ops.py's docstring restated row by row): what
tests/test_ops_moe_actgrad.py and its GPU test compare `fearless.ops.moe_actgrad_bwd` with."""

from __future__ import annotations

import math

import numpy as np

GLU = ("swiglu", "geglu", "reglu")
_erf = np.vectorize(math.erf)


def _act(x: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(act(x), act'(x)) in float64; the GLU forms' gate activation."""
    if kind in ("swiglu", "silu"):
        s = 1.0 / (1.0 + np.exp(-x))
        return x * s, s * (1.0 + x * (1.0 - s))
    if kind in ("geglu", "gelu"):
        cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))
        return x * cdf, cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    r = np.maximum(x, 0.0)
    if kind == "relu_sq":
        return r * r, 2.0 * r
    return r, (x > 0.0).astype(np.float64)  # relu, reglu


def moe_actgrad_reference(
    dout: np.ndarray,
    h: np.ndarray,
    w2: np.ndarray,
    topk_scores: np.ndarray,
    offsets: np.ndarray,
    x_gather_idx: np.ndarray,
    s_scatter_idx: np.ndarray,
    kind: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dh (TK, N), a_prime (TK, I), ds (TK,)) in float64: row r of expert e (offsets[e] <= r <
    offsets[e + 1]) has dy1 = dout[x_gather_idx[r]] @ w2[e]^T and s = topk_scores.flat[
    s_scatter_idx[r]]; dh = act'(h) dy1 s (GLU: [dy1 up act'(gate) s | dy1 act(gate) s]),
    a_prime = act(h) s (GLU: act(gate) up s), ds = sum(dy1 act(h)) (GLU: act(gate) up)."""
    d, x, w = (a.astype(np.float64) for a in (dout, h, w2))
    scores = topk_scores.astype(np.float64).reshape(-1)
    tk, inter = x.shape[0], w.shape[1]
    dy = np.zeros((tk, inter))
    for e in range(w.shape[0]):
        rows = slice(int(offsets[e]), int(offsets[e + 1]))
        dy[rows] = d[x_gather_idx[rows]] @ w[e].T
    s = scores[s_scatter_idx][:, None]
    if kind in GLU:
        gate, up = x[:, :inter], x[:, inter:]
        act, grad = _act(gate, kind)
        fwd = act * up
        dh = np.concatenate([dy * up * grad * s, dy * act * s], axis=1)
    else:
        fwd, grad = _act(x, kind)
        dh = dy * grad * s
    return dh, fwd * s, (dy * fwd).sum(axis=1)
