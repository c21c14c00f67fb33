"""SIMT kernels that synchronise the whole grid (block then total, histogram then normalise,
Jacobi): run on the simulator by tests/test_simt_grid_sync.py and on the GPU by
tests/gpu/test_simt_grid_sync_gpu.py."""

from __future__ import annotations

import fearless as fl
from fearless import simt

BLOCK = 128


@simt.kernel
def block_then_total(
    x: simt.Slice[fl.f32], partial: simt.DisjointSlice[fl.f32], out: simt.DisjointSlice[fl.f32]
):
    """Phase 1: each block's sum into its own element of `partial`; phase 2: every thread adds
    the blocks' sums, which other threads wrote before the grid sync."""
    i = simt.thread.index_1d()
    v = x[i] if i < len(x) else fl.f32(0.0)
    s = simt.block.reduce(v, "sum")
    if i < len(partial):
        partial[i] = s  # the block's total, at each of its threads' own elements
    g = simt.cg.this_grid()
    g.sync()
    total = fl.f32(0.0)
    for b in range(simt.gridDim.x):
        total += partial[b * simt.blockDim.x]
    if i < len(out):
        out[i] = total


@simt.kernel
def histogram_then_normalise(
    x: simt.Slice[fl.i32], counts: simt.AtomicSlice[fl.i32], out: simt.DisjointSlice[fl.f32]
):
    """Phase 1: atomics; phase 2: plain reads of the AtomicSlice (no atomic in that phase)."""
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.add(counts, x[i], 1)
    simt.cg.this_grid().sync()
    if i < len(out):
        out[i] = fl.f32(counts[i % len(counts)]) / fl.f32(len(x))


@simt.kernel
def jacobi(steps: int, a: simt.DisjointSlice[fl.f32], b: simt.DisjointSlice[fl.f32]):
    """Several syncs in one launch (the counter's generation bit): each step reads the
    neighbours of the other buffer, written in the previous phase."""
    g = simt.cg.this_grid()
    i = simt.thread.index_1d()
    n = len(a)
    for _ in range(steps):
        g.sync()  # reads of other threads' elements follow a sync in the source
        if i < n:
            b[i] = (a[(int(i) + n - 1) % n] + a[i] + a[(int(i) + 1) % n]) / fl.f32(3.0)
        g.sync()
        if i < n:
            a[i] = (b[(int(i) + n - 1) % n] + b[i] + b[(int(i) + 1) % n]) / fl.f32(3.0)
