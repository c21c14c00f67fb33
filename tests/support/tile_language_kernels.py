"""Tile kernels of the language tests that tests/gpu/test_tile_persistent_gpu.py runs on the GPU."""

from __future__ import annotations

import fearless as fl
from fearless import tile


@tile.kernel
def bits(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32], s: tile.Tensor[fl.i32]):
    v = tile.load_like(x, out)
    k = tile.load_like(s, out)
    out.store(tile.bitwise_xor((v << k) | (v >> 1), tile.bitwise_and(v, 7)) + (v >> k))


@tile.kernel
def outer(out: tile.Part[fl.f32], a: tile.Tensor[fl.f32], b: tile.Tensor[fl.f32]):
    BM, BN = out.shape
    col = tile.load(a, (0,), (BM,))[:, None]  # (BM, 1)
    row = tile.expand_dims(tile.load(b, (0,), (BN,)), 0)  # (1, BN)
    t = tile.permute(col * row, (1, 0))  # (BN, BM)
    out.store(tile.permute(t, (1, 0)) + tile.load(b, (0,), (BN,))[None, :] * 0.0)
