"""The kernels `fearless demo` compiles and runs, written as a user writes them (DESIGN section 2).

They live in a module of their own so that they have a real source file: the compiler reads
it, and a compile diagnostic points at a line of it.
No `from __future__ import annotations` here: kernel annotations are evaluated as written.
"""

import math

import fearless as fl
from fearless import simt, tile

# ---------------------------------------------------------------------------- SIMT track


@simt.kernel
def vecadd(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()  # ThreadIndex: the only key that opens a DisjointSlice
    if i < len(c):
        c[i] = a[i] + b[i]


@simt.kernel
def saxpy(alpha: fl.f32, x: simt.Slice[fl.f32], y: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(y):
        y[i] = alpha * x[i] + y[i]  # a thread may read the element it owns, then write it


@simt.kernel(block=256)
def softmax_rows(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    # A block per row; each thread takes the columns t, t + 256, ...: the row's max and sum
    # are the block's reductions of the threads' shares.
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


# ---------------------------------------------------------------------------- Tile track


@tile.kernel
def add(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    # One block per tile of the partitioned output `z`: it loads the same tile of x and y.
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


@tile.kernel
def softmax(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    # Each block owns whole rows of `out` (its tile's width covers a row).
    rows = tile.load_like(x, out, padding=-math.inf)
    e = tile.exp(rows - tile.max(rows, axis=1, keepdims=True), approx=True)
    out.store(e * (1.0 / tile.sum(e, axis=1, keepdims=True)))
