"""`simt.warp.*` and `simt.block.*` on the simulator against a NumPy emulation of the GPU's
semantics (blocks of 100 threads: the last warp of each block is partial), and through ptxas."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import simt
from fearless.backends.llvm.ptx import ptxas_check
from fearless.backends.toolchain import find_ptxas
from support.collectives_kernels import BLOCK, N, coll_f32, coll_i32_votes, coll_i64

RNG = np.random.default_rng(5)


def warps(v: np.ndarray) -> list[np.ndarray]:  # type: ignore[type-arg]
    """The warps of each block of `v`, in order (each a view)."""
    return [blk[k : k + 32] for blk in v.reshape(-1, BLOCK) for k in range(0, BLOCK, 32)]


def emulate_shuffle(v: np.ndarray, src_of) -> np.ndarray:  # type: ignore[no-untyped-def,type-arg]
    out = v.copy()
    for w_in, w_out in zip(warps(v), warps(out), strict=True):
        for lane in range(w_in.size):
            src = src_of(lane)
            if src < w_in.size:
                w_out[lane] = w_in[src]
    return out


def per_block(v: np.ndarray, fn) -> np.ndarray:  # type: ignore[no-untyped-def,type-arg]
    return np.repeat(fn(v.reshape(-1, BLOCK), axis=1), BLOCK)


def per_warp(v: np.ndarray, fn, dtype=None) -> np.ndarray:  # type: ignore[no-untyped-def,type-arg]
    return np.concatenate([np.full(w.size, fn(w), dtype or v.dtype) for w in warps(v)])


def run(kernel, x, dtypes):  # type: ignore[no-untyped-def]
    outs = [np.zeros(N, d) for d in dtypes]
    kernel[N // BLOCK, BLOCK](x, *outs)
    return outs


@pytest.mark.parametrize("kernel,dtype", [(coll_f32, np.float32), (coll_i64, np.int64)])
def test_block_and_warp_collectives_match_numpy(kernel, dtype) -> None:  # type: ignore[no-untyped-def]
    x = RNG.integers(-1000, 1000, N).astype(dtype)  # integral floats: every order is exact
    r0, r1, r2, sc, wr, *sh = run(kernel, x, [dtype] * 8)
    np.testing.assert_array_equal(r0, per_block(x, np.sum))
    np.testing.assert_array_equal(r1, per_block(x, np.max))
    np.testing.assert_array_equal(r2, per_block(x, np.min))
    blocks = x.reshape(-1, BLOCK)
    if kernel is coll_f32:
        np.testing.assert_array_equal(sc, np.cumsum(blocks, axis=1).reshape(-1))
        np.testing.assert_array_equal(wr, per_warp(x, np.max))
        shifts = [lambda lane: lane + 3, lambda lane: lane ^ 5, lambda lane: 7]
    else:
        np.testing.assert_array_equal(sc, np.maximum.accumulate(blocks, axis=1).reshape(-1))
        np.testing.assert_array_equal(wr, per_warp(x, np.sum))
        shifts = [lambda lane: lane + 1, lambda lane: lane ^ 16, lambda lane: 33 & 31]
    for k, src_of in enumerate(shifts):
        np.testing.assert_array_equal(sh[k], emulate_shuffle(x, src_of), err_msg=f"shuffle {k}")


def test_warp_reduce_and_votes_on_i32() -> None:
    x = RNG.integers(-50, 50, N).astype(np.int32)
    w0, w1, v0, v1, v2 = run(coll_i32_votes, x, [np.int32] * 2 + [np.uint32] * 3)
    np.testing.assert_array_equal(w0, per_warp(x, np.sum))
    np.testing.assert_array_equal(w1, per_warp(x, np.min))
    np.testing.assert_array_equal(v0, per_warp(x, lambda w: np.all(w > -40)))
    np.testing.assert_array_equal(v1, per_warp(x, lambda w: np.any(w > 45)))
    ballot = per_warp(x, lambda w: sum(1 << k for k in range(w.size) if w[k] > 0), np.uint32)
    np.testing.assert_array_equal(v2, ballot)


def test_float_block_sum_follows_the_gpu_tree_order() -> None:
    """Rounding depends on the order; the simulator adds as the GPU lowering's tree does."""
    x = (RNG.standard_normal(N) * 1e4).astype(np.float32)
    r0 = run(coll_f32, x, [np.float32] * 8)[0]
    for blk in range(N // BLOCK):
        w = x[blk * BLOCK : (blk + 1) * BLOCK]
        totals = []
        for k in range(0, BLOCK, 32):
            lanes = np.full(32, np.float32(-0.0))
            lanes[: w[k : k + 32].size] = w[k : k + 32]
            totals.append(tree(lanes))
        second = np.full(32, np.float32(-0.0))
        second[: len(totals)] = totals
        assert r0[blk * BLOCK] == tree(second)


def tree(lanes: np.ndarray) -> np.float32:  # type: ignore[type-arg]
    lanes = lanes.copy()
    for off in (16, 8, 4, 2, 1):
        lanes = lanes + np.concatenate([lanes[off:], np.full(off, np.float32(-0.0))])
    return lanes[0]  # type: ignore[no-any-return]


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
@pytest.mark.parametrize("kernel", [coll_f32, coll_i64, coll_i32_votes], ids=lambda k: k.name)
def test_collectives_through_ptxas(kernel) -> None:  # type: ignore[no-untyped-def]
    for arch in ("sm_80", "sm_90a"):
        ptx = kernel.inspect(stage="ptx", arch=arch)
        assert "shfl.sync" in ptx or "redux.sync" in ptx
        assert f"for '{arch}'" in ptxas_check(ptx, arch)
    if kernel is coll_i32_votes:
        assert "redux.sync.add.s32" in ptx and "vote.sync.ballot.b32" in ptx
    else:
        assert "bar.sync" in ptx and ".shared" in ptx


def test_collective_under_a_uniform_loop_is_allowed() -> None:
    @simt.kernel
    def k(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32], reps: int):
        i = simt.thread.index_1d()
        v = fl.f32(0.0)
        if i < len(x):
            v = x[i]
        for _ in range(reps):
            v = simt.block.reduce(v, "sum")
        if i < len(out):
            out[i] = v

    x = np.ones(64, np.float32)
    out = np.zeros(64, np.float32)
    k[2, 32](x, out, 2)
    np.testing.assert_array_equal(out, np.full(64, 32.0 * 32.0, np.float32))


def test_a_block_reduction_is_uniform_so_it_may_guard_a_barrier() -> None:
    @simt.kernel
    def k(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.i32]):
        i = simt.thread.index_1d()
        total = simt.block.reduce(x[i], "sum")
        v = x[i]
        if total > 0:
            v = simt.block.scan(v, "sum")
        out[i] = v

    x = np.ones(64, np.int32)
    x[32:] = -1
    out = np.zeros(64, np.int32)
    k[2, 32](x, out)
    np.testing.assert_array_equal(out, np.concatenate([np.arange(1, 33), -np.ones(32)]))
