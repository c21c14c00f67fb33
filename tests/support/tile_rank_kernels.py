"""Tile kernels of rank 3 to 5: shared by tests/test_tile_rank.py and tests/gpu/test_tile_rank_gpu.py."""

from __future__ import annotations

import numpy as np

import fearless as fl
from fearless import tile


@tile.kernel
def mark4(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    """x + 2 y + the tile's index written in decimal digits: checks every axis of the index."""
    i0, i1, i2, i3 = out.index
    v = tile.load_like(x, out) + tile.load(y, out.index, out.shape) * 2.0
    digits = i0 * 1000 + i1 * 100 + i2 * 10 + i3
    out.store(v + digits.astype(fl.f32))


@tile.kernel
def scale5(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out) * 3.0)


@tile.kernel
def rms_heads(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """(batch, heads, seq, dim) rows normalised over dim: a reduction on a 4-D tile."""
    v = tile.load_like(x, out)
    ms = tile.sum(v * v, axis=3, keepdims=True) / v.shape[3]
    out.store(v * tile.rsqrt(ms + 1e-6))


@tile.kernel
def double4(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    for t in out.tiles():
        t.store(tile.load_like(x, t) * 2.0)


def _digits(shape: tuple[int, ...], tile_shape: tuple[int, ...]) -> np.ndarray:
    idx = np.indices(shape)
    weights = (1000, 100, 10, 1)
    return sum(w * (i // t) for w, i, t in zip(weights, idx, tile_shape, strict=True))
