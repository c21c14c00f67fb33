"""Atomics on `simt.shared.array` (issue 33): numba's per-block shared histogram as written,
every atomic kind on the simulator against NumPy, the phase rule (atomics and plain accesses
of one shared array never share a barrier phase), and the shared-memory PTX."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import simt
from fearless.backends.llvm.ptx import ptxas_check
from fearless.backends.toolchain import find_ptxas

RNG = np.random.default_rng(33)
NBINS = 64  # one thread per bin: blocks of NBINS threads


@simt.kernel
def hist_shared(x: simt.Slice[fl.i32], hist_out: simt.AtomicSlice[fl.i32]):
    """numba's shared-memory histogram, line for line: zero, barrier, atomics, barrier, sum."""
    s = simt.shared.array((NBINS,), fl.i32)
    j = simt.thread.block_index_1d()
    s[j] = 0  # each thread zeroes its own slot
    simt.syncthreads()
    for i in range(simt.grid(1), len(x), simt.gridsize(1)):
        simt.atomic.add(s, x[i], 1)  # any bin, bounds-checked
    simt.syncthreads()
    simt.atomic.add(hist_out, j, s[j])  # each thread reads its own slot


@simt.kernel
def hist_per_block(x: simt.Slice[fl.i32], hist_out: simt.DisjointSlice[fl.i32]):
    """The same, each block writing its own histogram: hist_out[i] is block b's bin j."""
    s = simt.shared.array((NBINS,), fl.i32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    s[j] = 0
    simt.syncthreads()
    if i < len(x):
        simt.atomic.add(s, x[i], 1)
    simt.syncthreads()
    hist_out[i] = s[j]


def test_numba_shared_histogram_matches_bincount() -> None:
    x = RNG.integers(0, NBINS, 10_000).astype(np.int32)
    out = np.zeros(NBINS, np.int32)
    hist_shared[8, NBINS](x, out)
    np.testing.assert_array_equal(out, np.bincount(x, minlength=NBINS))
    ir = hist_shared.inspect(stage="ir")
    assert "atomic.rmw {kind='add'}" in ir and "Shared[i32, 64]" in ir
    assert "unsafe" not in hist_shared.inspect()


def test_per_block_histograms() -> None:
    blocks = 5
    x = RNG.integers(0, NBINS, blocks * NBINS).astype(np.int32)
    out = np.zeros(blocks * NBINS, np.int32)
    hist_per_block[blocks, NBINS](x, out)
    want = [np.bincount(x[b * NBINS : (b + 1) * NBINS], minlength=NBINS) for b in range(blocks)]
    np.testing.assert_array_equal(out, np.concatenate(want))


def test_a_bin_out_of_range_is_a_kernel_index_error() -> None:
    x = np.array([1, 2, NBINS + 3], np.int32)
    with pytest.raises(
        fl.KernelIndexError, match=f"the len is {NBINS} but the index is {NBINS + 3}"
    ):
        hist_shared[1, NBINS](x, np.zeros(NBINS, np.int32))


BLOCK = 128
SLOTS = 4


@simt.kernel
def every_kind(
    v: simt.Slice[fl.i32],
    f: simt.Slice[fl.f32],
    out: simt.DisjointSlice[fl.i32],
    fout: simt.DisjointSlice[fl.f32],
    old: simt.DisjointSlice[fl.i32],
):
    """Each op on its own shared array, SLOTS slots hit by BLOCK / SLOTS threads each."""
    adds = simt.shared.array((SLOTS,), fl.i32)
    subs = simt.shared.array((SLOTS,), fl.i32)
    maxs = simt.shared.array((SLOTS,), fl.i32)
    mins = simt.shared.array((SLOTS,), fl.i32)
    fmaxs = simt.shared.array((SLOTS,), fl.f32)
    exchs = simt.shared.array((SLOTS,), fl.i32)
    cass = simt.shared.array((SLOTS,), fl.i32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    if j < SLOTS:
        adds[j] = 0
        subs[j] = 1000
        maxs[j] = -(1 << 30)
        mins[j] = 1 << 30
        fmaxs[j] = fl.f32(-1e30)
        exchs[j] = -1
        cass[j] = -1
    simt.syncthreads()
    k = int(j) % SLOTS
    simt.atomic.add(adds, k, v[i])
    simt.atomic.sub(subs, k, v[i])
    simt.atomic.max(maxs, k, v[i])
    simt.atomic.min(mins, k, v[i])
    simt.atomic.max(fmaxs, k, f[i])
    simt.atomic.exch(exchs, k, fl.i32(int(j)))
    old[i] = simt.atomic.cas(cass, k, -1, fl.i32(int(j)))  # only the first thread of a slot wins
    simt.syncthreads()
    if j < SLOTS:
        base = simt.blockIdx.x * SLOTS + int(j)
        with simt.unsafe():  # SLOTS results per block, written by the block's first threads
            out[base * 6] = adds[j]
            out[base * 6 + 1] = subs[j]
            out[base * 6 + 2] = maxs[j]
            out[base * 6 + 3] = mins[j]
            out[base * 6 + 4] = exchs[j]
            out[base * 6 + 5] = cass[j]
            fout[base] = fmaxs[j]


def test_every_atomic_kind_on_shared_memory_matches_numpy() -> None:
    blocks = 3
    n = blocks * BLOCK
    v = RNG.integers(-500, 500, n).astype(np.int32)
    f = RNG.standard_normal(n).astype(np.float32)
    out = np.zeros(blocks * SLOTS * 6, np.int32)
    fout = np.zeros(blocks * SLOTS, np.float32)
    old = np.zeros(n, np.int32)
    every_kind[blocks, BLOCK](v, f, out, fout, old)
    got = out.reshape(blocks, SLOTS, 6)
    vb = v.reshape(blocks, BLOCK // SLOTS, SLOTS)  # [block, round, slot]: thread j hits j % SLOTS
    np.testing.assert_array_equal(got[..., 0], vb.sum(1))
    np.testing.assert_array_equal(got[..., 1], 1000 - vb.sum(1))
    np.testing.assert_array_equal(got[..., 2], vb.max(1))
    np.testing.assert_array_equal(got[..., 3], vb.min(1))
    np.testing.assert_array_equal(fout.reshape(blocks, SLOTS), f.reshape(vb.shape).max(1))
    # exch: the slot keeps one thread's position in the block, of a thread that hits it
    assert ((got[..., 4] % SLOTS) == np.arange(SLOTS)).all()
    # cas: exactly one thread per slot saw -1 and stored its position; the others saw that
    olds = old.reshape(blocks, BLOCK // SLOTS, SLOTS)
    assert ((olds == -1).sum(1) == 1).all()
    winners = np.argmax(olds == -1, axis=1) * SLOTS + np.arange(SLOTS)
    np.testing.assert_array_equal(got[..., 5], winners)
    losers = olds != -1
    np.testing.assert_array_equal(
        olds[losers], np.broadcast_to(winners[:, None, :], olds.shape)[losers]
    )


@simt.kernel
def hist2d_shared(r: simt.Slice[fl.i32], c: simt.Slice[fl.i32], out: simt.AtomicSlice[fl.i32, 2]):
    s = simt.shared.array((4, 8), fl.i32)
    t = simt.thread.block_index_2d()  # blocks of 8 x 4 threads: one per slot
    i = simt.blockIdx.x * 32 + t.row * 8 + t.col
    s[t] = 0
    simt.syncthreads()
    if i < len(r):
        simt.atomic.add(s, (r[i], c[i]), 1)
    simt.syncthreads()
    simt.atomic.add(out, (t.row, t.col), s[t])


def test_two_dimensional_shared_atomics() -> None:
    r = RNG.integers(0, 4, 1000).astype(np.int32)
    c = RNG.integers(0, 8, 1000).astype(np.int32)
    out = np.zeros((4, 8), np.int32)
    hist2d_shared[32, (8, 4)](r, c, out)
    want = np.zeros((4, 8), np.int32)
    np.add.at(want, (r, c), 1)
    np.testing.assert_array_equal(out, want)


# ------------------------------------------------------------------------------ the phase rule


def _error(kernel: simt.Kernel) -> fl.FearlessError:
    with pytest.raises(fl.FearlessError) as info:
        kernel.inspect(stage="ir")
    return info.value


def test_an_atomic_after_a_plain_write_in_one_phase_names_both_lines() -> None:
    @simt.kernel
    def k(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.i32]):
        s = simt.shared.array((NBINS,), fl.i32)
        j = simt.thread.block_index_1d()
        i = simt.thread.index_1d()
        s[j] = 0
        simt.atomic.add(s, x[i], 1)
        simt.syncthreads()
        out[i] = s[j]

    err = _error(k)
    assert err.diagnostic.code == "E0632"
    assert "`s` takes an atomic in a phase where it is also written plainly" in err.message
    line = err.loc.line  # type: ignore[union-attr]
    assert f"written without an atomic at line {line - 1}" in str(err)


def test_a_loop_carries_the_atomic_to_the_plain_read_of_the_next_round() -> None:
    @simt.kernel
    def k(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.i32]):
        s = simt.shared.array((NBINS,), fl.i32)
        j = simt.thread.block_index_1d()
        i = simt.thread.index_1d()
        s[j] = 0
        simt.syncthreads()
        acc = fl.i32(0)
        for r in range(4):
            acc += s[j]
            simt.atomic.add(s, (int(x[i]) + r) % NBINS, 1)
        out[i] = acc

    err = _error(k)
    assert err.diagnostic.code == "E0632"
    assert "`s` is read plainly in a phase where it takes atomics" in err.message


def test_unsafe_regions_allow_the_mix_and_still_run() -> None:
    @simt.kernel
    def k(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.i32]):
        s = simt.shared.array((NBINS,), fl.i32)
        j = simt.thread.block_index_1d()
        i = simt.thread.index_1d()
        s[j] = 0
        simt.syncthreads()
        with simt.unsafe():
            simt.atomic.add(s, x[i], 1)
            s[j] = s[j] + 0
        simt.syncthreads()
        out[i] = s[j]

    x = RNG.integers(0, NBINS, NBINS).astype(np.int32)
    out = np.zeros(NBINS, np.int32)
    k[1, NBINS](x, out)
    assert out.sum() == NBINS
    assert "unsafe" in k.inspect()


def test_atomics_on_local_arrays_and_slices_stay_refused() -> None:
    @simt.kernel
    def on_local(out: simt.DisjointSlice[fl.i32]):
        v = simt.local.array((4,), fl.i32)
        simt.atomic.add(v, 0, 1)

    err = _error(on_local)
    assert err.diagnostic.code == "E0611" and "not a local array" in err.message

    @simt.kernel
    def narrow(out: simt.DisjointSlice[fl.i32]):
        s = simt.shared.array((4,), fl.i16)
        simt.atomic.add(s, 0, fl.i16(1))

    assert "on i16 elements is not supported" in _error(narrow).message


# ------------------------------------------------------------------------------------- PTX


def test_the_ptx_has_shared_memory_atomics() -> None:
    llvm = every_kind.inspect(stage="llvm")
    assert "atomicrmw add i32 addrspace(3)" in llvm or "atomicrmw add ptr addrspace(3)" in llvm
    ptx = every_kind.inspect(stage="ptx", arch="sm_90")
    for instruction in (
        "atom.shared.add.u32",
        "atom.shared.max.s32",
        "atom.shared.min.s32",
        "atom.shared.exch.b32",
        "atom.relaxed.gpu.shared.cas.b32",  # cas, and f32 max as a CAS loop
    ):
        assert instruction in ptx, instruction
    assert "atom.shared.add" in hist_shared.inspect(stage="ptx", arch="sm_80")
    if find_ptxas() is not None:
        for arch in ("sm_80", "sm_90"):
            ptxas_check(every_kind.inspect(stage="ptx", arch=arch), arch)
