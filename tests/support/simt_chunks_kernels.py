"""SIMT kernels over chunks of rows: shared by tests/test_simt_chunks.py and
tests/gpu/test_simt_chunks_gpu.py."""

from __future__ import annotations

import fearless as fl
from fearless import simt


@simt.kernel(block=32)
def copy_rows(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    """out = x + 1, a chunk of 4 at a time (rows of at most 256 columns)."""
    v = simt.local.array((2, 4), fl.f32)
    for k in range(2):
        i = simt.thread.block_column(k, 4)
        if i.col < x.shape[1]:
            v[k] = x[i]
            for j in range(4):
                v[k, j] = v[k, j] + 1.0
            out[i] = v[k]


@simt.kernel(block=16)
def copy_u16(x: simt.Slice[fl.u16, 2], w: simt.Slice[fl.u16], out: simt.DisjointSlice[fl.u16, 2]):
    """out = x + w in u16 (wrapping), chunks of 8 (16 bytes); w read as the chunk's columns."""
    v = simt.local.array((1, 8), fl.u16)
    g = simt.local.array((1, 8), fl.u16)
    i = simt.thread.block_column(0, 8)
    if i.col < x.shape[1]:
        v[0] = x[i]
        g[0] = w[i]
        for j in range(8):
            v[0, j] = v[0, j] + g[0, j]
        out[i] = v[0]


@simt.kernel(block=16)
def scale_half(x: simt.Slice[fl.f16, 2], w: simt.Slice[fl.f16], out: simt.DisjointSlice[fl.f16, 2]):
    """out = x * w in f16, chunks of 8 held in f16 local arrays."""
    v = simt.local.array((1, 8), fl.f16)
    g = simt.local.array((1, 8), fl.f16)
    i = simt.thread.block_column(0, 8)
    if i.col < x.shape[1]:
        v[0] = x[i]
        g[0] = w[i]
        for j in range(8):
            v[0, j] = v[0, j] * g[0, j]
        out[i] = v[0]
