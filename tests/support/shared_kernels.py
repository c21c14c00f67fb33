"""SIMT kernels on shared memory (block sums, reversal, rotation, transposed tiles): shared by
tests/test_simt_shared.py and tests/gpu/test_simt_shared_gpu.py."""

from __future__ import annotations

import fearless as fl
from fearless import simt

BLOCK = 128


@simt.kernel
def reverse_in_block(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    s = simt.shared.array((BLOCK,), fl.f32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    s[j] = x[i] if i < len(x) else fl.f32(0.0)  # every slot: shared memory starts undefined
    simt.syncthreads()
    if i < len(out):
        out[i] = s[BLOCK - 1 - int(j)]


@simt.kernel
def block_sums(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    """A tree reduction in two phases per level: read the pairs, barrier, write, barrier."""
    s = simt.shared.array((BLOCK,), fl.f32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    v = fl.f32(0.0)
    if i < len(x):
        v = x[i]
    s[j] = v
    simt.syncthreads()
    k = BLOCK // 2
    while k > 0:
        t = s[j]
        if j < k:
            t = t + s[int(j) + k]
        simt.syncthreads()
        s[j] = t
        simt.syncthreads()
        k = k // 2
    if i < len(out):
        out[i] = s[0]


@simt.kernel
def rotate_2d(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.i32]):
    """A 2-D shared array; each phase reads the neighbour's slot, in a uniform loop."""
    s = simt.shared.array((4, 32), fl.i32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    jj = int(j)
    mine = fl.i32(0)
    if i < len(x):
        mine = x[i]
    for _ in range(3):
        with simt.unsafe():
            s[jj // 32, jj % 32] = mine
        simt.syncthreads()
        mine = s[(jj + 1) % 128 // 32, (jj + 1) % 32]
        simt.syncthreads()
    if i < len(out):
        out[i] = mine


@simt.kernel
def transpose_tiles(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    """Each 16 x 16 tile transposed in place through a 2-D shared array."""
    s = simt.shared.array((16, 16), fl.f32)
    t = simt.thread.block_index_2d()
    g = simt.thread.index_2d()
    if g.row < x.shape[0] and g.col < x.shape[1]:
        s[t] = x[g.row, g.col]
    simt.syncthreads()
    if g.row < out.shape[0] and g.col < out.shape[1]:
        out[g] = s[t.col, t.row]
