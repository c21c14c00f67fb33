"""One value per block (issue 33): `simt.thread.block_id()` opens its block's element of a
DisjointSlice under a leader guard. A two-stage reduction on the simulator against NumPy, the
guards that count, the 1-D block a `threadIdx.x == 0` guard needs, the lowering; the unsound
variants are in tests/compile_fail/block_id_*.py and block_idx_opens_disjoint.py."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import simt
from fearless.backends.llvm.ptx import ptxas_check
from fearless.backends.toolchain import find_ptxas

RNG = np.random.default_rng(34)
BLOCK = 128


@simt.kernel
def partial_sums(x: simt.Slice[fl.f32], partial: simt.DisjointSlice[fl.f32]):
    """Stage 1: each block sums its grid-stride share; its first thread writes the total."""
    acc = fl.f32(0.0)
    for i in simt.thread.grid_stride(len(x)):
        acc += x[i]
    total = simt.block.reduce(acc, "sum")
    if simt.threadIdx.x == 0:  # numba's leader: one thread per block (a 1-D block)
        partial[simt.thread.block_id()] = total


@simt.kernel
def final_sum(partial: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    """Stage 2: one block folds the partials."""
    acc = fl.f32(0.0)
    j = simt.thread.block_index_1d()
    for k in range(int(j), len(partial), BLOCK):
        acc += partial[k]
    total = simt.block.reduce(acc, "sum")
    if j == 0:
        out[simt.thread.block_id()] = total


def test_two_stage_reduction_writes_one_partial_per_block() -> None:
    x = RNG.standard_normal(100_003).astype(np.float32)
    blocks = 40
    partial = np.full(blocks, np.nan, np.float32)
    partial_sums[blocks, BLOCK](x, partial)
    g = blocks * BLOCK  # thread t of block b adds x[b * BLOCK + t + k * g]
    idx = np.arange(len(x))
    want = np.array([x[(idx % g) // BLOCK == b].astype(np.float64).sum() for b in range(blocks)])
    np.testing.assert_allclose(partial, want, rtol=1e-4, atol=1e-3)
    out = np.zeros(1, np.float32)
    final_sum[1, BLOCK](partial, out)
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)


@simt.kernel
def per_block_max(x: simt.Slice[fl.f32], top: simt.DisjointSlice[fl.f32]):
    """Any grid and block shape: the linear block id, the guard on block_index_1d, and an
    early return for the other threads; the leader reads its element too."""
    t = simt.thread.block_index_1d()
    b = simt.thread.block_id()
    n = simt.blockDim.x * simt.blockDim.y
    k = b * n + int(t)
    m = simt.block.reduce(x[k] if k < len(x) else fl.f32(-1e30), "max")
    if t != 0:
        return
    top[b] = top[b] + m


def test_block_id_is_the_linear_block_in_a_2d_grid_of_2d_blocks() -> None:
    grid, block = (3, 2), (8, 4)
    x = RNG.standard_normal(6 * 32).astype(np.float32)
    top = np.ones(6, np.float32)
    per_block_max[grid, block](x, top)
    np.testing.assert_array_equal(top, 1.0 + x.reshape(6, 32).max(1))


def test_a_thread_idx_guard_needs_a_1d_block() -> None:
    x = np.ones(BLOCK * 4, np.float32)
    with pytest.raises(fl.LaunchContractError, match="only in a 1-D block"):
        partial_sums[4, (BLOCK // 2, 2)](x, np.zeros(4, np.float32))
    assert partial_sums.compile().contract.block_1d
    assert not final_sum.compile().contract.block_1d  # block_index_1d() == 0: any block


def test_the_unsafe_regions_skip_the_leader_rule() -> None:
    @simt.kernel
    def k(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        total = simt.block.reduce(x[simt.grid(1)], "sum")
        with simt.unsafe():
            out[simt.thread.block_id()] = total  # every thread writes the same total

    out = np.zeros(2, np.float32)
    k[2, 32](np.ones(64, np.float32), out)
    np.testing.assert_array_equal(out, [32.0, 32.0])


def test_the_lowering_reads_the_block_registers() -> None:
    ir = partial_sums.inspect(stage="ir")
    assert "thread.block_id : i64" in ir
    llvm = partial_sums.inspect(stage="llvm")
    assert "_x4" not in llvm  # a kernel with a block id is never coarsened
    ptx = per_block_max.inspect(stage="ptx", arch="sm_90")
    for reg in ("%ctaid.x", "%ctaid.y", "%nctaid.x"):
        assert reg in ptx, reg
    if find_ptxas() is not None:
        ptxas_check(ptx, "sm_90")
