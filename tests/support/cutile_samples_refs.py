"""NumPy references and loaders for the cuTile sample ports (examples/cutile_samples.py), shared
by the simulator tests and tests/gpu/test_cutile_samples_gpu.py."""

from __future__ import annotations

import math

import numpy as np

import fearless as fl
from fearless import tile


def attention_reference(q, k, v, scale, causal, input_pos=0):
    """softmax(q k^T * scale) v in f64, KV heads repeated for grouped-query attention; with
    `causal`, query i (at position input_pos + i) sees keys 0..input_pos + i."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) * scale
    if causal:
        rows = input_pos + np.arange(q.shape[2])[:, None]
        s = np.where(rows >= np.arange(k.shape[2])[None, :], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def layer_norm_reference(x, w, b, eps):
    x = np.asarray(x, np.float64)
    mean, var = x.mean(1), x.var(1)
    return (x - mean[:, None]) / np.sqrt(var[:, None] + eps) * w + b, mean, 1 / np.sqrt(var + eps)


def layer_norm_bwd_reference(dy, x, w, eps):
    """(dx, dw, db) of LayerNorm in float64."""
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    mu = x.mean(1, keepdims=True)
    r = 1 / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + eps)
    xhat, wdy = (x - mu) * r, w * dy
    dx = (wdy - (xhat * (xhat * wdy).mean(1, keepdims=True) + wdy.mean(1, keepdims=True))) * r
    return dx, (dy * xhat).sum(0), dy.sum(0)


@tile.kernel
def load_t(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """out = x.T through a transposed load: out's (BM, BN) tile (i, j) is x's (BN, BM) tile
    (j, i), read with order=(1, 0)."""
    i, j = out.index
    out.store(tile.load(x, (i, j), out.shape, order=(1, 0)))


@tile.kernel
def load_3d(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], P0: tile.Const[int]):
    """out = x.transpose(order) for order (2, 0, 1): out's tile index and shape, taken along x's
    axes 2, 0 and 1."""
    a, b, c = out.index
    out.store(tile.load(x, (a, b, c), out.shape, padding=math.nan, order=(2, 0, P0)))
