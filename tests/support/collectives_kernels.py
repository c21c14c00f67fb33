"""SIMT warp and block collectives over f32, i32 (votes) and i64: shared by
tests/test_simt_collectives.py and tests/gpu/test_simt_shared_gpu.py."""

from __future__ import annotations

import fearless as fl
from fearless import simt

BLOCK = 100  # 3 full warps and one of 4 threads


N = 3 * BLOCK


@simt.kernel
def coll_f32(
    x: simt.Slice[fl.f32],
    r0: simt.DisjointSlice[fl.f32],
    r1: simt.DisjointSlice[fl.f32],
    r2: simt.DisjointSlice[fl.f32],
    sc: simt.DisjointSlice[fl.f32],
    wr: simt.DisjointSlice[fl.f32],
    s0: simt.DisjointSlice[fl.f32],
    s1: simt.DisjointSlice[fl.f32],
    s2: simt.DisjointSlice[fl.f32],
):
    i = simt.thread.index_1d()
    v = x[i]
    r0[i] = simt.block.reduce(v, "sum")
    r1[i] = simt.block.reduce(v, "max")
    r2[i] = simt.block.reduce(v, "min")
    sc[i] = simt.block.scan(v, "sum")
    wr[i] = simt.warp.reduce(v, "max")
    s0[i] = simt.warp.shfl_down(v, 3)
    s1[i] = simt.warp.shfl_xor(v, 5)
    s2[i] = simt.warp.shfl(v, 7)


@simt.kernel
def coll_i64(
    x: simt.Slice[fl.i64],
    r0: simt.DisjointSlice[fl.i64],
    r1: simt.DisjointSlice[fl.i64],
    r2: simt.DisjointSlice[fl.i64],
    sc: simt.DisjointSlice[fl.i64],
    wr: simt.DisjointSlice[fl.i64],
    s0: simt.DisjointSlice[fl.i64],
    s1: simt.DisjointSlice[fl.i64],
    s2: simt.DisjointSlice[fl.i64],
):
    i = simt.thread.index_1d()
    v = x[i]
    r0[i] = simt.block.reduce(v, "sum")
    r1[i] = simt.block.reduce(v, "max")
    r2[i] = simt.block.reduce(v, "min")
    sc[i] = simt.block.scan(v, "max")
    wr[i] = simt.warp.reduce(v, "sum")
    s0[i] = simt.warp.shfl_down(v, 1)
    s1[i] = simt.warp.shfl_xor(v, 16)
    s2[i] = simt.warp.shfl(v, 33)


@simt.kernel
def coll_i32_votes(
    x: simt.Slice[fl.i32],
    w0: simt.DisjointSlice[fl.i32],
    w1: simt.DisjointSlice[fl.i32],
    v0: simt.DisjointSlice[fl.u32],
    v1: simt.DisjointSlice[fl.u32],
    v2: simt.DisjointSlice[fl.u32],
):
    i = simt.thread.index_1d()
    v = x[i]
    w0[i] = simt.warp.reduce(v, "sum")
    w1[i] = simt.warp.reduce(v, "min")
    v0[i] = fl.u32(simt.warp.all(v > -40))
    v1[i] = fl.u32(simt.warp.any(v > 45))
    v2[i] = simt.warp.ballot(v > 0)
