"""What an array holds before it is written, the same on the simulator and the GPU: a
`simt.local.array` starts zeroed on both (an `alloca` stored with zeroinitializer, which
costs nothing once SROA keeps the array in registers); a `simt.shared.array` is uninitialised
on the GPU, so the simulator raises E0632 at a read of a slot no thread of the block wrote."""

from __future__ import annotations

import re

import numpy as np
import pytest

import fearless as fl
from fearless import simt
from fearless.sim.simt import run_kernel
from fearless_bench.kernels_simt import REGISTER_KERNELS

BLOCK = 64

# ---------------------------------------------------------------------------- local arrays


@simt.kernel
def local_unwritten(out: simt.DisjointSlice[fl.f32]):
    v = simt.local.array(4, fl.f32)
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = v[2] + 1.0


@simt.kernel
def local_partly_written(k: fl.i32, out: simt.DisjointSlice[fl.f32]):
    v = simt.local.array(4, fl.f32)
    v[k] = 3.0
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = v[0] + v[1]


@simt.kernel
def local_at_run_time(n: fl.i32, k: fl.i32, out: simt.DisjointSlice[fl.f32]):
    v = simt.local.array(16, fl.f32)
    for j in range(n):
        v[j] = fl.f32(j + 1)
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = v[k]


def test_an_unwritten_local_element_reads_zero() -> None:
    out = np.full(8, -5.0, np.float32)
    local_unwritten[1, 8](out)
    np.testing.assert_array_equal(out, 1.0)
    out = np.full(8, -5.0, np.float32)
    local_partly_written[1, 8](1, out)
    np.testing.assert_array_equal(out, 3.0)  # v[0] is 0, v[1] was written
    out = np.full(8, -5.0, np.float32)
    local_at_run_time[1, 8](4, 9, out)
    np.testing.assert_array_equal(out, 0.0)


def test_the_gpu_zeroes_local_arrays_too() -> None:
    llvm = local_unwritten.inspect(stage="llvm")
    assert "store [4 x float] zeroinitializer" in llvm
    ptx = local_unwritten.inspect(stage="ptx")
    assert re.search(r"st\.global\.b32\s+\[%rd\d+\], 1065353216;", ptx)  # 0 + 1.0 folded
    assert ".local" not in ptx


def test_zeroing_costs_nothing_where_the_array_lives_in_registers() -> None:
    """The row kernels write every element before reading it: no local memory, no stores but
    the output's."""
    for kernel in REGISTER_KERNELS.values():
        ptx = kernel.inspect(stage="ptx")
        assert ".local" not in ptx and "st.local" not in ptx, kernel.name


def test_an_array_in_local_memory_is_zeroed_once_at_the_start() -> None:
    ptx = local_at_run_time.inspect(stage="ptx")
    zeroes = [
        line for line in ptx.splitlines() if "st.local.v4.b32" in line and "0f00000000" in line
    ]
    assert len(zeroes) == 4  # 64 bytes, 16 a store


# --------------------------------------------------------------------------- shared arrays


@simt.kernel
def shared_unwritten(out: simt.DisjointSlice[fl.f32]):
    s = simt.shared.array(BLOCK, fl.f32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = s[j] + 1.0


@simt.kernel
def shift_left(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    """Each thread reads its right neighbour's slot; the tail's threads write none."""
    s = simt.shared.array(BLOCK, fl.f32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    if i < len(x):
        s[j] = x[i]
    simt.syncthreads()
    if i < len(out):
        out[i] = s[(int(j) + 1) % BLOCK]


@simt.kernel
def shift_left_zeroed(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    s = simt.shared.array(BLOCK, fl.f32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    s[j] = x[i] if i < len(x) else fl.f32(0.0)
    simt.syncthreads()
    if i < len(out):
        out[i] = s[(int(j) + 1) % BLOCK]


@simt.kernel
def count_unzeroed(x: simt.Slice[fl.i32], hist: simt.AtomicSlice[fl.i32]):
    s = simt.shared.array(BLOCK, fl.i32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.add(s, x[i], 1)
    simt.syncthreads()
    simt.atomic.add(hist, j, s[j])


@simt.kernel
def exchange_first(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.i32]):
    s = simt.shared.array(BLOCK, fl.i32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    simt.atomic.exch(s, j, 7)  # writes the slot: the old value is not used
    simt.syncthreads()
    if i < len(out):
        out[i] = s[j]


def test_reading_an_unwritten_shared_slot_is_an_error_at_its_line() -> None:
    with pytest.raises(fl.SafetyError) as info:
        shared_unwritten[1, BLOCK](np.zeros(BLOCK, np.float32))
    err = info.value
    assert err.diagnostic.code == "E0632"
    assert err.message == "`s[0]` is read before any thread of its block wrote it"
    assert err.loc is not None and err.loc.file == __file__
    assert "out[i] = s[j] + 1.0" in str(err)
    rendered = str(err)
    assert "block (0, 0, 0), thread (0, 0, 0) (CPU simulator)" in rendered
    assert "shared memory is not initialised on the GPU" in rendered
    assert "help: write every slot of `s` the block reads before a `simt.syncthreads()`" in rendered


def test_a_slot_the_tail_left_unwritten_is_found() -> None:
    x = np.arange(100, dtype=np.float32)
    with pytest.raises(fl.SafetyError) as info:
        shift_left[2, BLOCK](x, np.zeros(100, np.float32))
    # block 1 holds elements 64..99: slots 36.. are unwritten, and thread 35 reads slot 36
    assert info.value.message == "`s[36]` is read before any thread of its block wrote it"
    assert "block (1, 0, 0), thread (35, 0, 0)" in str(info.value)
    out = np.zeros(100, np.float32)
    shift_left[1, BLOCK](x[:64], out[:64])  # every slot written: no error
    np.testing.assert_array_equal(out[:64], np.roll(x[:64], -1))


def test_zeroing_the_tail_makes_every_read_defined() -> None:
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(100, np.float32)
    shift_left_zeroed[2, BLOCK](x, out)
    padded = np.zeros(128, np.float32)
    padded[:100] = x
    np.testing.assert_array_equal(out, np.roll(padded.reshape(2, BLOCK), -1, axis=1).ravel()[:100])


def test_each_block_and_each_chunk_tracks_its_own_slots() -> None:
    """A block's writes do not count for the next block, in one chunk or across chunks."""
    fn = shift_left.compiled_ir().fn
    x = np.arange(130, dtype=np.float32)
    for chunk_lanes in (1 << 20, BLOCK):
        with pytest.raises(fl.SafetyError, match=r"`s\[2\]` is read"):
            run_kernel(fn, (3,), (BLOCK,), [x, np.zeros(130, np.float32)], chunk_lanes=chunk_lanes)


def test_an_atomic_on_an_unwritten_shared_slot_is_an_error() -> None:
    with pytest.raises(fl.SafetyError, match=r"`s\[3\]` is read before") as info:
        count_unzeroed[1, BLOCK](np.full(8, 3, np.int32), np.zeros(BLOCK, np.int32))
    assert "an atomic reads an uninitialised shared slot" in str(info.value)


def test_an_exchange_writes_a_slot_without_reading_it() -> None:
    out = np.zeros(BLOCK, np.int32)
    exchange_first[1, BLOCK](np.zeros(BLOCK, np.int32), out)
    np.testing.assert_array_equal(out, 7)


def test_a_failed_bounds_check_is_reported_before_the_slots_it_left_unwritten() -> None:
    """The thread that failed stops, so its slot stays unwritten: the launch's error is the
    bounds check, not the read of that slot."""

    @simt.kernel
    def gather(x: simt.Slice[fl.f32], idx: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.f32]):
        s = simt.shared.array(BLOCK, fl.f32)
        j = simt.thread.block_index_1d()
        i = simt.thread.index_1d()
        s[j] = x[idx[i]]
        simt.syncthreads()
        if i < len(out):
            out[i] = s[(int(j) + 1) % BLOCK]

    idx = np.zeros(BLOCK, np.int32)
    idx[5] = 1000
    with pytest.raises(fl.KernelIndexError, match="the len is 64 but the index is 1000"):
        gather[1, BLOCK](np.ones(BLOCK, np.float32), idx, np.zeros(BLOCK, np.float32))
