"""Shared memory, `simt.syncthreads()` and the block index: simulator against NumPy, the
barrier rules of the simulator, the compile-time phase and uniformity checks, and the PTX."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import simt
from fearless.backends.llvm.ptx import ptxas_check
from fearless.backends.toolchain import find_ptxas
from fearless.ir.simt.parser import parse_function
from fearless.sim.simt import run_kernel
from support.shared_kernels import BLOCK, block_sums, reverse_in_block, rotate_2d, transpose_tiles

RNG = np.random.default_rng(77)


@simt.kernel
def tree_sums(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    """The classic tree: writes below k and reads at j + k share a phase (proved disjoint)."""
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
        if j < k:
            s[j] = s[j] + s[int(j) + k]
        simt.syncthreads()
        k = k // 2
    if i < len(out):
        out[i] = s[0]


def launch(kernel, x, out_dtype):  # type: ignore[no-untyped-def]
    out = np.zeros(x.size, out_dtype)
    kernel[(x.size + BLOCK - 1) // BLOCK, BLOCK](x, out)
    return out


@pytest.mark.parametrize("n", [1, 128, 300])
def test_reverse_within_each_block(n: int) -> None:
    x = RNG.standard_normal(n).astype(np.float32)
    out = launch(reverse_in_block, x, np.float32)
    padded = np.zeros(-(-n // BLOCK) * BLOCK, np.float32)  # the kernel zeroes the tail's slots
    padded[:n] = x
    np.testing.assert_array_equal(out, padded.reshape(-1, BLOCK)[:, ::-1].reshape(-1)[:n])


@pytest.mark.parametrize("n", [5, 128, 1000])
def test_block_sum_by_tree_reduction(n: int) -> None:
    x = RNG.integers(-50, 50, n).astype(np.float32)  # exact in f32 in any order
    out = launch(block_sums, x, np.float32)
    padded = np.zeros(-(-n // BLOCK) * BLOCK, np.float32)
    padded[:n] = x
    sums = padded.reshape(-1, BLOCK).sum(axis=1)
    np.testing.assert_array_equal(out, np.repeat(sums, BLOCK)[:n])


def test_tree_reduction_in_one_phase_per_level() -> None:
    x = RNG.integers(-50, 50, 1000).astype(np.float32)
    np.testing.assert_array_equal(
        launch(tree_sums, x, np.float32), launch(block_sums, x, np.float32)
    )
    padded = np.zeros(1024, np.float32)
    padded[:1000] = x
    ref = np.repeat(padded.reshape(-1, BLOCK).sum(axis=1), BLOCK)[:1000]
    np.testing.assert_array_equal(launch(tree_sums, x, np.float32), ref)


def test_two_dimensional_shared_array_in_a_loop() -> None:
    x = np.arange(300, dtype=np.int32)
    out = launch(rotate_2d, x, np.int32)
    padded = np.zeros(384, np.int32)
    padded[:300] = x
    ref = np.roll(padded.reshape(-1, BLOCK), -3, axis=1).reshape(-1)[:300]
    np.testing.assert_array_equal(out, ref)


def test_shared_arrays_are_per_block_even_across_chunks() -> None:
    n = 16 * BLOCK
    x = RNG.standard_normal(n).astype(np.float32)
    fn = reverse_in_block.compiled_ir().fn
    whole, chunked = np.zeros(n, np.float32), np.zeros(n, np.float32)
    assert run_kernel(fn, (16,), (BLOCK,), [x, whole]) is None
    assert run_kernel(fn, (16,), (BLOCK,), [x, chunked], chunk_lanes=3 * BLOCK) is None
    np.testing.assert_array_equal(whole, chunked)
    np.testing.assert_array_equal(whole, x.reshape(16, BLOCK)[:, ::-1].reshape(-1))


def test_block_index_2d_opens_a_2d_shared_array() -> None:
    x = RNG.standard_normal((32, 48)).astype(np.float32)
    out = np.zeros_like(x)
    transpose_tiles[(3, 2), (16, 16)](x, out)
    ref = x.reshape(2, 16, 3, 16).transpose(0, 3, 2, 1).reshape(32, 48)
    np.testing.assert_array_equal(out, ref)


# ----------------------------------------------------------------------- barrier errors


@simt.kernel(unsafe=True)
def early_return_before_barrier(out: simt.DisjointSlice[fl.i32]):
    j = simt.thread.block_index_1d()
    if j < 5:
        return
    simt.syncthreads()
    out[simt.thread.index_1d()] = 1


@simt.kernel(unsafe=True)
def two_barriers(out: simt.DisjointSlice[fl.i32]):
    j = simt.thread.block_index_1d()
    if j < 16:
        simt.syncthreads()
        out[simt.thread.index_1d()] = 1
    else:
        simt.syncthreads()
        out[simt.thread.index_1d()] = 2


def test_a_barrier_some_threads_skip_by_returning_is_an_error() -> None:
    with pytest.raises(fl.SafetyError) as info:
        early_return_before_barrier[2, 32](np.zeros(64, np.int32))
    assert info.value.code == "E0634"
    text = str(info.value)
    assert "returned without reaching it" in text and "thread (0, 0, 0) of block (0, 0, 0)" in text


def test_threads_at_different_barriers_are_an_error_not_a_hang() -> None:
    with pytest.raises(fl.SafetyError, match="not reached by every thread") as info:
        two_barriers[1, 32](np.zeros(32, np.int32))
    assert info.value.code == "E0634"
    assert "while others of its block wait at the one on line" in str(info.value)


def test_lanes_stopped_by_a_failed_check_are_not_waited_for() -> None:
    fn = parse_function(
        """
        func @k(%x: Slice[f32], %out: DisjointSlice[f32]) {
        ^entry:
          %s = shared.alloc : Shared[f32, 32]
          %j = thread.block_index_1d : BlockIndex
          %i = thread.index_1d : ThreadIndex
          %ii = index.int %i : i64
          %n = len %x : i64
          check.bounds {sites=(0,)} %ii, %n
          %v = load %x, %ii : f32
          %jj = index.int %j : i64
          store %s, %jj, %v
          barrier
          %c = constant {value=31} : i64
          %r = binary {kind='sub'} %c, %jj : i64
          %w = load %s, %r : f32
          store %out, %ii, %w
          return
        }
        """
    )
    x = np.arange(20, dtype=np.float32)
    out = np.full(32, -1, np.float32)
    err = run_kernel(fn, (1,), (32,), [x, out])
    assert err is not None and err.thread == (20, 0, 0) and err.index == 20
    np.testing.assert_array_equal(out[:12], np.zeros(12, np.float32))  # slots 31..20: unwritten
    np.testing.assert_array_equal(out[12:20], x[19:11:-1])


# --------------------------------------------------------------------------- compile time


def test_uniform_branches_and_loops_may_hold_barriers() -> None:
    @simt.kernel
    def k(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32], reps: int):
        s = simt.shared.array((32,), fl.f32)
        j = simt.thread.block_index_1d()
        i = simt.thread.index_1d()
        if reps > 0 and len(x) > 3:
            for _ in range(reps):
                s[j] = fl.f32(1.0)
                simt.syncthreads()
                if i < len(out):
                    out[i] = s[31 - int(j)] + out[i]
                simt.syncthreads()

    out = np.zeros(64, np.float32)
    k[2, 32](np.zeros(64, np.float32), out, 3)
    np.testing.assert_array_equal(out, np.full(64, 3, np.float32))


def test_block_coordinates_and_lengths_are_uniform() -> None:
    @simt.kernel
    def k(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.i32]):
        s = simt.shared.array((32,), fl.i32)
        j = simt.thread.block_index_1d()
        i = simt.thread.index_1d()
        s[j] = x[i]
        simt.syncthreads()
        v = s[j]
        if simt.blockIdx.x == 1 and simt.blockDim.x == len(s):
            v = s[31 - int(j)]
            simt.syncthreads()
        out[i] = v

    x = np.arange(64, dtype=np.int32)
    out = np.zeros(64, np.int32)
    k[2, 32](x, out)
    np.testing.assert_array_equal(out, np.concatenate([x[:32], x[63:31:-1]]))


def test_a_phase_race_through_a_loop_back_edge_is_refused() -> None:
    @simt.kernel
    def k(out: simt.DisjointSlice[fl.f32]):
        s = simt.shared.array((32,), fl.f32)
        j = simt.thread.block_index_1d()
        v = fl.f32(0.0)
        for _ in range(4):
            s[j] = v
            simt.syncthreads()
            v = s[(int(j) + 1) % 32]  # the next iteration's write races with this read
        out[simt.thread.index_1d()] = v

    with pytest.raises(fl.SafetyError) as info:
        k[1, 32](np.zeros(32, np.float32))
    assert info.value.code == "E0632"
    assert "written while other threads of the block may still read" in str(info.value)


def test_a_tree_step_is_refused_when_the_bounds_do_not_match() -> None:
    @simt.kernel
    def off_by_one(out: simt.DisjointSlice[fl.f32]):
        s = simt.shared.array((32,), fl.f32)
        j = simt.thread.block_index_1d()
        s[j] = fl.f32(1.0)
        simt.syncthreads()
        k = 16
        if j < k:
            s[j] = s[j] + s[int(j) + k - 1]  # reads slot k - 1, which thread k - 1 writes
        simt.syncthreads()
        out[simt.thread.index_1d()] = s[0]

    @simt.kernel
    def no_barrier_in_the_loop(out: simt.DisjointSlice[fl.f32]):
        s = simt.shared.array((32,), fl.f32)
        j = simt.thread.block_index_1d()
        s[j] = fl.f32(1.0)
        simt.syncthreads()
        k = 16
        while k > 0:  # the next level's writes race with this level's reads
            if j < k:
                s[j] = s[j] + s[int(j) + k]
            k = k // 2
        simt.syncthreads()
        out[simt.thread.index_1d()] = s[0]

    for kernel in (off_by_one, no_barrier_in_the_loop):
        with pytest.raises(fl.SafetyError) as info:
            kernel[1, 32](np.zeros(32, np.float32))
        assert info.value.code == "E0632", kernel.name


def test_unsafe_regions_exempt_shared_accesses_but_count_for_others() -> None:
    @simt.kernel
    def k(out: simt.DisjointSlice[fl.f32]):
        s = simt.shared.array((32,), fl.f32)
        j = simt.thread.block_index_1d()
        with simt.unsafe():
            s[(int(j) + 1) % 32] = fl.f32(2.0)
        out[simt.thread.index_1d()] = s[j]  # another thread may be writing this slot

    with pytest.raises(fl.SafetyError) as info:
        k[1, 32](np.zeros(32, np.float32))
    assert info.value.code == "E0632"


# -------------------------------------------------------------------------------- the PTX

ARCHS = ("sm_80", "sm_90", "sm_90a")


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
@pytest.mark.parametrize(
    "kernel",
    [reverse_in_block, block_sums, tree_sums, rotate_2d, transpose_tiles],
    ids=lambda k: k.name,
)
def test_shared_memory_and_barriers_through_ptxas(kernel) -> None:  # type: ignore[no-untyped-def]
    llvm = kernel.inspect(stage="llvm")
    assert "internal addrspace(3) global" in llvm and 'call void @"llvm.nvvm.barrier0"()' in llvm
    for arch in ARCHS:
        ptx = kernel.inspect(stage="ptx", arch=arch)
        assert ".shared .align 16" in ptx and "bar.sync" in ptx
        assert "st.shared" in ptx and "ld.shared" in ptx
        assert f"for '{arch}'" in ptxas_check(ptx, arch)
