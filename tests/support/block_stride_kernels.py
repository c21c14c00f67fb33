"""SIMT kernels that stride over a block's threads (rows, columns, rms_norm, softmax): shared by
tests/test_simt_block_stride.py and tests/gpu/test_simt_block_stride_gpu.py."""

from __future__ import annotations

import math

import fearless as fl
from fearless import simt


@simt.kernel
def owners(out: simt.DisjointSlice[fl.i64, 2]):
    """out[r, c] = 1 + (the writer's linear thread position in its block); r is the block."""
    t = simt.threadIdx.x + simt.blockDim.x * (simt.threadIdx.y + simt.blockDim.y * simt.threadIdx.z)
    for i in simt.thread.block_stride(out.shape[1]):
        out[i] = 1 + t + 0 * i.row


@simt.kernel
def coordinates(out: simt.DisjointSlice[fl.i64, 2]):
    """out[r, c] = r * 100000 + c, from the pair's own `row` and `col`."""
    for i in simt.thread.block_stride(out.shape[1]):
        out[i] = i.row * 100000 + i.col


@simt.kernel(block=128)
def rms_norm(
    x: simt.Slice[fl.f32, 2], w: simt.Slice[fl.f32], eps: float, out: simt.DisjointSlice[fl.f32, 2]
):
    """A row per block: the sum of squares over the thread's columns, the block's total, then
    each column scaled (x is read twice; the second read is the row again)."""
    q = fl.f32(0.0)
    for i in simt.thread.block_stride(x.shape[1]):
        v = x[i]
        q += v * v
    rstd = fl.math.rsqrt(simt.block.reduce(q, "sum") / fl.f32(x.shape[1]) + eps)
    for i in simt.thread.block_stride(out.shape[1]):
        out[i] = x[i] * rstd * w[i.col]


@simt.kernel(launch_bounds=256)
def softmax(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    m = fl.f32(-math.inf)
    for i in simt.thread.block_stride(x.shape[1]):
        m = max(m, x[i])
    m = simt.block.reduce(m, "max")
    s = fl.f32(0.0)
    for i in simt.thread.block_stride(x.shape[1]):
        s += math.exp(x[i] - m)
    s = simt.block.reduce(s, "sum")
    for i in simt.thread.block_stride(out.shape[1]):
        out[i] = math.exp(x[i] - m) / s


PER = 4


@simt.kernel(block=64)
def rms_norm_registers(
    x: simt.Slice[fl.f32, 2], w: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32, 2]
):
    """Each thread keeps its PER columns in a local array: x is read once."""
    v = simt.local.array(PER, fl.f32)
    q = fl.f32(0.0)
    for k in range(PER):
        i = simt.thread.block_column(k)
        v[k] = x[i] if i.col < x.shape[1] else fl.f32(0.0)
        q += v[k] * v[k]
    r = fl.math.rsqrt(simt.block.reduce(q, "sum") / fl.f32(x.shape[1]))
    for k in range(PER):
        i = simt.thread.block_column(k)
        if i.col < out.shape[1]:
            out[i] = v[k] * r * w[i.col]


@simt.kernel
def column_of(k: int, out: simt.DisjointSlice[fl.i64, 2]):
    i = simt.thread.block_column(k)
    out[i] = i.col


@simt.kernel
def local_2d(n: int, out: simt.DisjointSlice[fl.i64]):
    """A 2-D local array filled and summed; `n` past its extent fails its bounds check."""
    t = simt.thread.index_1d()
    a = simt.local.array((2, 3), fl.i64)
    for r in range(2):
        for c in range(3):
            a[r, c] = int(t) * 10 + r * 3 + c
    s = 0
    for j in range(n):
        s += a[1, j]
    if t < len(out):
        out[t] = s
