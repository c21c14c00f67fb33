"""SIMT atomics (`simt.AtomicSlice`, `simt.atomic.*`): the simulator against NumPy and a
sequential reference, the borrow check, the device checks, and the LLVM lowering through
ptxas for sm_80 and sm_90. Compile-time refusals are in tests/compile_fail/atomic_*.py."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import simt_kernels as K

import fearless as fl
import support.fake_driver as RL
from fearless import dtypes, simt
from fearless.abi import ParamSpec
from fearless.backends.llvm.ptx import ptxas_check
from fearless.backends.toolchain import find_ptxas
from fearless.sim import atomics, numerics
from support.atomics_kernels import add_old, bit_ops, cas_max, exch_chain, int_ops

RNG = np.random.default_rng(2024)
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")


def blocks(n: int, block: int = 128) -> int:
    return max(1, (n + block - 1) // block)


@simt.kernel
def sum_f32(x: simt.Slice[fl.f32], total: simt.AtomicSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.add(total, 0, x[i])


@simt.kernel
def min_max_f32(x: simt.Slice[fl.f32], m: simt.AtomicSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.max(m, 0, x[i])
        simt.atomic.min(m, 1, x[i])


@simt.kernel
def half_sums(x: simt.Slice[fl.f32], h: simt.AtomicSlice[fl.f16], b: simt.AtomicSlice[fl.bf16]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.add(h, 0, fl.f16(x[i]))
        simt.atomic.sub(b, 0, fl.bf16(x[i]))


@simt.kernel
def float_cas(x: simt.AtomicSlice[fl.f64], old: simt.DisjointSlice[fl.f64]):
    i = simt.thread.index_1d()
    if i < len(old):
        old[i] = simt.atomic.cas(x, 0, -0.0, 1.0)


@simt.kernel(unsafe=True)
def unchecked_add(idx: simt.Slice[fl.i32], counts: simt.AtomicSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(idx):
        simt.atomic.add(counts, idx[i], 1)


@simt.kernel(unsafe=True)
def unsafe_plain(counts: simt.AtomicSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i == 0:
        counts[1] = counts[0] + 1  # plain access: allowed only where the kernel is unsafe


@simt.device
def bump(counts: simt.AtomicSlice[fl.i32], k: fl.i64) -> fl.i32:
    return simt.atomic.add(counts, k, 1)


@simt.kernel
def guarded_bins(x: simt.Slice[fl.i64], counts: simt.AtomicSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(x):
        k = x[i]
        if k < len(counts):  # proves the atomic's index below the length (k >= 0 stays checked)
            bump(counts, k)


# ---------------------------------------------------------------------------- simulator


def test_histogram_example_matches_bincount() -> None:
    x = RNG.integers(0, 37, 5000).astype(np.int32)
    counts = np.zeros(37, np.int32)
    K.histogram[blocks(len(x)), 128](x, counts)
    np.testing.assert_array_equal(counts, np.bincount(x, minlength=37))


def test_old_values_are_the_lane_order_of_each_bin() -> None:
    # Lanes act in lane order: the k-th thread to hit a bin sees k earlier adds.
    x = RNG.integers(0, 5, 3000).astype(np.int32)
    counts = np.full(5, 100, np.int32)
    old = np.zeros_like(x)
    add_old[blocks(len(x)), 128](x, counts, old)
    for b in range(5):
        np.testing.assert_array_equal(old[x == b], 100 + np.arange((x == b).sum()))
    np.testing.assert_array_equal(counts, 100 + np.bincount(x, minlength=5))


def test_add_one_to_one_counter_returns_a_permutation() -> None:
    n = 4000
    counts = np.zeros(1, np.int32)
    old = np.zeros(n, np.int32)
    add_old[blocks(n), 128](np.zeros(n, np.int32), counts, old)
    assert counts[0] == n
    np.testing.assert_array_equal(np.sort(old), np.arange(n))


def test_f32_sum_is_the_sequential_sum_in_lane_order() -> None:
    x = RNG.standard_normal(20000).astype(np.float32)
    init = np.array([1.5], np.float32)
    total = init.copy()
    sum_f32[blocks(len(x)), 128](x, total)
    expected = np.add.accumulate(np.concatenate([init, x]), dtype=np.float32)[-1]
    assert total[0].tobytes() == expected.tobytes()
    assert abs(float(total[0]) - (1.5 + x.astype(np.float64).sum())) < 1e-2


def test_float_max_min_with_negative_values_and_nan_values_losing() -> None:
    x = -np.abs(RNG.standard_normal(999)).astype(np.float32) - 1.0
    m = np.array([-np.inf, np.inf], np.float32)
    min_max_f32[blocks(len(x)), 128](x, m)
    np.testing.assert_array_equal(m, [x.max(), x.min()])
    y = np.array([np.nan, 3.0, np.nan, -2.0], np.float32)  # math.fmax/fmin: a NaN loses
    m = np.array([np.nan, np.nan], np.float32)
    min_max_f32[1, 32](y, m)
    np.testing.assert_array_equal(m, [3.0, -2.0])


def test_integer_max_min_sub_and_wraparound() -> None:
    x = RNG.integers(-(10**12), 10**12, 777, dtype=np.int64)
    a = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 5], np.int64)
    u = np.array([np.iinfo(np.uint32).max - 10, 2], np.uint32)
    int_ops[blocks(len(x)), 128](x, a, u)
    assert a[0] == x.max() and a[1] == x.min()
    assert a[2] == np.int64(5) - x.sum()
    wrapped = int(np.iinfo(np.uint32).max) - 10 + int(x.astype(np.uint32).astype(np.uint64).sum())
    assert u[0] == wrapped % 2**32  # unsigned adds wrap
    assert u[1] == (2 - 3 * 777) % 2**32  # and so do subtractions below zero


def test_bitwise_and_wrapping_counters() -> None:
    x = RNG.integers(0, 2**32, 300, dtype=np.uint64).astype(np.uint32)
    b = np.array([0xFFFFFFFF, 0, 0x12345678, 0, 3], np.uint32)
    old = np.zeros(300, np.uint32)
    bit_ops[blocks(len(x)), 128](x, b, old)
    assert b[0] == np.bitwise_and.reduce(x) and b[1] == np.bitwise_or.reduce(x)
    assert b[2] == np.bitwise_xor.reduce(x) ^ 0x12345678
    # inc with limit 4 counts 0, 1, 2, 3, 4, 0, ... in lane order; dec with limit 6 from 3
    # counts 3, 2, 1, 0, 6, 5, ...
    assert np.array_equal(old, np.arange(300) % 5)
    assert b[3] == 300 % 5
    assert b[4] == (3 - 300) % 7


def test_bitwise_and_wrapping_atomics_refuse_other_dtypes() -> None:
    @simt.kernel
    def float_and(x: simt.AtomicSlice[fl.f32]):
        simt.atomic.and_(x, 0, 1.0)

    with pytest.raises(fl.KernelTypeError, match="is a bitwise operation"):
        float_and[1, 1](np.zeros(1, np.float32))

    @simt.kernel
    def signed_inc(x: simt.AtomicSlice[fl.i32]):
        simt.atomic.inc(x, 0, 5)

    with pytest.raises(fl.KernelTypeError, match=r"wrapping counter on u32 or u64 elements"):
        signed_inc[1, 1](np.zeros(1, np.int32))


def test_cas_lock_free_max() -> None:
    x = RNG.integers(1, 10**6, 600).astype(np.int32)
    m = np.zeros(1, np.int32)
    cas_max[blocks(len(x), 64), 64](x, m)
    assert m[0] == x.max()


def test_exch_hands_each_value_to_the_next_lane() -> None:
    n = 300
    last = np.array([-1], np.int64)
    old = np.zeros(n, np.int64)
    exch_chain[blocks(n), 128](last, old)
    np.testing.assert_array_equal(old, np.arange(-1, n - 1))
    assert last[0] == n - 1


def test_f16_add_and_bf16_sub_round_once_per_update() -> None:
    x = (RNG.standard_normal(200) * 4).astype(np.float32)
    h = np.zeros(1, np.float16)
    b = fl.zeros(1, dtype=fl.bf16)
    half_sums[blocks(len(x)), 128](x, h, b)
    want_h = np.float16(0)
    want_b = np.float32(0)
    for v in x:
        want_h = np.float16(want_h + np.float16(v))
        want_b = numerics.round_bf16(want_b - numerics.round_bf16(v))[()]
    assert h[0] == want_h
    assert b.numpy()[0] == want_b  # ml_dtypes' bfloat16


def test_float_cas_compares_bits() -> None:
    x = np.array([0.0], np.float64)  # +0.0 is not -0.0 bit for bit: no swap
    old = np.zeros(4, np.float64)
    float_cas[1, 32](x, old)
    assert x[0] == 0.0 and not np.signbit(x[0])
    x = np.array([-0.0], np.float64)  # the first lane swaps, the others see 1.0
    float_cas[1, 32](x, old)
    assert x[0] == 1.0 and np.signbit(old[0]) and list(old[1:]) == [1.0, 1.0, 1.0]


def test_dot_product_example() -> None:
    n, per = 10_001, 16
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    out = np.zeros(1, np.float32)
    K.dot[blocks(blocks(n, per)), 128](a, b, out, per)
    assert abs(float(out[0]) - float(np.dot(a.astype(np.float64), b))) < 1e-3 * np.sqrt(n)


def test_out_of_range_index_is_a_kernel_index_error_at_the_line() -> None:
    x = np.array([0, 3, -1, 9, 2], np.int32)
    counts = np.zeros(4, np.int32)
    with pytest.raises(fl.KernelIndexError) as info:
        K.histogram[1, 32](x, counts)
        fl.synchronize()
    err = info.value
    assert "the len is 4 but the index is -1" in err.message  # the lowest failing thread
    assert "thread (2, 0, 0)" in str(err)
    assert err.loc is not None and "simt.atomic.add(counts, x[i], 1)" in err.loc.source_line()
    np.testing.assert_array_equal(counts, [1, 0, 1, 1])  # failing threads skipped the add


def test_unchecked_atomic_out_of_range_raises_on_the_simulator() -> None:
    with pytest.raises(fl.KernelIndexError, match="the len is 2 but the index is 2") as info:
        unchecked_add[1, 32](np.array([0, 2], np.int32), np.zeros(2, np.int32))
    assert "unchecked write" in str(info.value)


def test_plain_access_of_an_atomic_slice_in_an_unsafe_kernel() -> None:
    counts = np.array([41, 0], np.int32)
    unsafe_plain[1, 32](counts)
    np.testing.assert_array_equal(counts, [41, 42])
    for arch in ("sm_80", "sm_90") if find_ptxas() else ():
        ptxas_check(unsafe_plain.inspect(stage="ptx", arch=arch), arch)


def test_atomic_slice_aliasing_an_input_is_a_borrow_error() -> None:
    buf = np.zeros(64, np.int32)
    with pytest.raises(fl.BorrowError, match="cannot borrow `counts` as mutable"):
        K.histogram[1, 32](buf[:32], buf[16:48])


fake_gpu = RL.fake_gpu  # the GPU launch plan over a fake driver (tests/support/fake_driver.py)


def test_gpu_plan_packs_and_borrow_checks_an_atomic_slice(fake_gpu: RL.FakeDriver) -> None:
    i32 = fl.i32
    params = (ParamSpec("x", "slice", i32), ParamSpec("counts", "atomic", i32))
    plan, _ = RL._plan(fake_gpu, RL._kernel("histogram", params))
    _dev = RL._dev
    x, counts = _dev(0x10000, 1000, i32), _dev(0x20000, 16, i32)
    plan.launch(4, 256, (x, counts))
    assert fake_gpu.calls[-1]["bytes"][:32] == struct.pack("<QqQq", 0x10000, 1000, 0x20000, 16)
    with pytest.raises(fl.BorrowError, match="cannot borrow `counts` as mutable"):
        plan.launch(4, 256, (x, _dev(0x10000 + 64, 16, i32)))  # counts inside x
    assert len(fake_gpu.calls) == 1


def test_read_only_array_for_an_atomic_slice_is_refused() -> None:
    counts = np.zeros(4, np.int32)
    counts.flags.writeable = False
    with pytest.raises(fl.KernelTypeError, match="the kernel writes it"):
        K.histogram[1, 32](np.zeros(4, np.int32), counts)


def test_annotation_rejects_other_dtypes_and_ranks() -> None:
    with pytest.raises(TypeError, match="AtomicSlice"):
        simt.AtomicSlice[fl.i8]
    with pytest.raises(TypeError, match="takes ndim 1 or 2, not 3"):
        simt.AtomicSlice[fl.f32, 3]
    assert repr(simt.AtomicSlice[fl.u64]) == "simt.AtomicSlice[fl.u64]"
    assert repr(simt.AtomicSlice[fl.f32, 2]) == "simt.AtomicSlice[fl.f32, 2]"


# -------------------------------------------------- the vectorised semantics, lane by lane


def _sequential(
    update: Callable[..., Any], memory: np.ndarray, idx: np.ndarray, *operands: np.ndarray
) -> np.ndarray:
    """Each lane in order: read the element, update it, return the old value."""
    old = []
    for k, i in enumerate(idx):
        before = memory[i]
        old.append(before)
        memory[i] = update(before, *(o[k] for o in operands))
    return np.array(old, memory.dtype)


CASES = [
    ("add", dtypes.i32),
    ("add", dtypes.u64),
    ("sub", dtypes.i64),
    ("max", dtypes.i32),
    ("min", dtypes.u32),
    ("exch", dtypes.i64),
    ("add", dtypes.f32),
    ("sub", dtypes.f64),
    ("add", dtypes.f16),
    ("max", dtypes.f32),
    ("min", dtypes.f64),
    ("exch", dtypes.f32),
]


@pytest.mark.parametrize("kind,dt", CASES, ids=[f"{k}-{d.name}" for k, d in CASES])
def test_rmw_matches_lane_by_lane_updates(kind: str, dt: dtypes.DType) -> None:
    n = 700
    # Few elements, so that some have more lanes than `atomics.RANKS` (the per-element scans).
    idx = np.where(RNG.random(n) < 0.5, 0, RNG.integers(0, 40, n)).astype(np.int64)
    if dt.is_int:
        info = np.iinfo(dt.np)
        vals = RNG.integers(info.min, info.max, n, dtype=dt.np, endpoint=True)
    else:
        vals = (RNG.standard_normal(n) * 100).astype(dt.np)
    memory = np.zeros(40, dt.np)
    if kind in ("max", "min") and dt.is_float:
        vals[::50] = np.nan  # a NaN value loses to the element
        vals[1::9] = 0.0  # ties of +0.0 and -0.0: fmax returns the value, not the element
        vals[2::9] = -0.0
        memory[0] = np.nan  # a NaN element yields to the first number
    expected_memory = memory.copy()
    if kind == "exch":
        step: Callable[..., Any] = lambda old, v: v  # noqa: E731
    elif kind in ("max", "min") and dt.is_float:
        step = numerics.math_fn("f" + kind, dt)
    else:
        step = numerics.binary_fn(kind, dt)
    with np.errstate(all="ignore"):
        expected = _sequential(step, expected_memory, idx, vals)
        old = atomics.rmw_fn(kind, dt)(memory, [idx], [vals], n)
    assert old.tobytes() == expected.tobytes()
    assert memory.tobytes() == expected_memory.tobytes()


@pytest.mark.parametrize("kind", ["max", "min"])
def test_float_max_min_ties_of_signed_zeros_and_nans(kind: str) -> None:
    # One element, many lanes (the vectorised scan), the extreme a zero: on a tie of +0.0 and
    # -0.0 fmax/fmin take the value; NaN values change nothing; a NaN element takes a number.
    other = -1.0 if kind == "max" else 1.0
    vals = RNG.choice(np.array([0.0, -0.0, np.nan, other], np.float32), 300)
    vals[:20] = np.nan
    memory = np.array([np.nan], np.float32)
    want = memory.copy()
    step = numerics.math_fn("f" + kind, dtypes.f32)
    expected = _sequential(step, want, np.zeros(300, np.int64), vals)
    old = atomics.rmw_fn(kind, dtypes.f32)(memory, [np.int64(0)], [vals], 300)
    assert old.tobytes() == expected.tobytes()
    assert memory.tobytes() == want.tobytes()


def test_cas_matches_lane_by_lane_updates() -> None:
    n = 500
    idx = RNG.integers(0, 3, n).astype(np.int64)
    expected_vals = RNG.integers(0, 4, n).astype(np.int32)
    vals = RNG.integers(0, 4, n).astype(np.int32)
    memory = np.zeros(3, np.int32)
    want = memory.copy()
    expected = _sequential(lambda o, e, v: v if o == e else o, want, idx, expected_vals, vals)
    old = atomics.cas_fn(dtypes.i32)(memory, [idx], [expected_vals, vals], n)
    np.testing.assert_array_equal(old, expected)
    np.testing.assert_array_equal(memory, want)


def test_uniform_index_and_value_act_once_per_lane() -> None:
    memory = np.zeros(2, np.int32)
    old = atomics.rmw_fn("add", dtypes.i32)(memory, [np.int64(1)], [np.int32(2)], 5)
    np.testing.assert_array_equal(old, [0, 2, 4, 6, 8])
    assert memory[1] == 10


# ------------------------------------------------------------------------- LLVM and PTX


PTX_EXPECT = {
    "add_old": ["atom.global.add.u32"],
    "sum_f32": ["atom.global.add.f32"],
    "min_max_f32": ["atom.relaxed.gpu.global.cas.b32"],  # fmax/fmin as a CAS loop
    "int_ops": ["atom.global.max.s64", "atom.global.min.s64", "atom.global.add.u32"],
    "cas_max": ["atom.relaxed.gpu.global.cas.b32"],
    "exch_chain": ["atom.global.exch.b64"],
    "half_sums": ["atom.global.add.noftz.f16", "atom.global.add.noftz.bf16"],
    "float_cas": ["atom.relaxed.gpu.global.cas.b64"],
    "bit_ops": [
        "atom.global.and.b32",
        "atom.global.or.b32",
        "atom.global.xor.b32",
        "atom.global.inc.u32",
        "atom.global.dec.u32",
    ],
}


@needs_ptxas
@pytest.mark.parametrize("name", sorted(PTX_EXPECT))
def test_atomics_through_ptxas(name: str) -> None:
    kernel = globals()[name]
    for arch in ("sm_80", "sm_90"):
        ptx = kernel.inspect(stage="ptx", arch=arch)
        assert f"Compiling entry function 'fearless_{name}' for '{arch}'" in ptxas_check(ptx, arch)
        if arch == "sm_90":
            for instruction in PTX_EXPECT[name]:
                assert instruction in ptx, instruction
    llvm = kernel.inspect(stage="llvm")
    assert 'syncscope("device") monotonic' in llvm
    assert "_x4" in llvm  # the coarsened entry performs each logical thread's atomics too


def test_atomic_through_a_device_function_and_a_guard() -> None:
    x = np.array([0, 5, 2, 2, 99, 1], np.int64)
    counts = np.zeros(6, np.int32)
    guarded_bins[1, 32](x, counts)
    np.testing.assert_array_equal(counts, [1, 1, 2, 0, 0, 1])
    with pytest.raises(fl.KernelIndexError, match="the len is 6 but the index is -3"):
        guarded_bins[1, 32](np.array([-3], np.int64), counts)


def test_histogram_ir_has_a_checked_atomic() -> None:
    ir = K.histogram.inspect(stage="ir")
    assert "atomic.rmw {kind='add'}" in ir and "AtomicSlice[i32]" in ir
    assert "check.bounds" in ir  # the atomic's index is checked on the device
