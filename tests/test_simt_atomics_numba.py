"""numba-cuda's forms of the SIMT atomics beyond tests/test_simt_atomics.py: the wrapping
counters `simt.atomic.inc`/`dec` on u64 elements (LLVM expands them to a compare-and-swap loop),
and 2-D `simt.AtomicSlice[T, 2]` updated at a pair `(row, col)`, each axis bounds-checked. The
simulator is checked against a lane-by-lane NumPy model, the LLVM lowering through ptxas."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import dtypes, simt
from fearless.backends.llvm.ptx import ptxas_check
from fearless.backends.toolchain import find_ptxas
from fearless.sim import atomics, numerics
from support.atomics_numba_kernels import counters_u64, hist2d, int_ops_2d, witness_2d

RNG = np.random.default_rng(2026)
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")


def numba_inc(old: int, val: int) -> int:
    """numba's `cuda.atomic.inc`: 0 when the element is >= val, else element + 1."""
    return 0 if old >= val else old + 1


def numba_dec(old: int, val: int) -> int:
    """numba's `cuda.atomic.dec`: val when the element is 0 or > val, else element - 1."""
    return val if old == 0 or old > val else old - 1


def sequential(
    update: Callable[..., Any], memory: np.ndarray, idx: list[Any], *operands: np.ndarray
) -> np.ndarray:
    """Each lane in order (the simulator's order): read the element, update it, return the
    old value. `idx` holds one index array per axis."""
    old = []
    for k in range(len(operands[0])):
        at = tuple(int(a[k]) for a in idx)
        before = memory[at]
        old.append(before)
        memory[at] = update(before, *(o[k] for o in operands))
    return np.array(old, memory.dtype)


# ------------------------------------------------------------------- u64 inc and dec


@simt.kernel
def counters_u32(
    idx: simt.Slice[fl.i64],
    lim: simt.Slice[fl.u32],
    c: simt.AtomicSlice[fl.u32],
    d: simt.AtomicSlice[fl.u32],
    old_inc: simt.DisjointSlice[fl.u32],
    old_dec: simt.DisjointSlice[fl.u32],
):
    i = simt.thread.index_1d()
    if i < len(idx):
        old_inc[i] = simt.atomic.inc(c, idx[i], lim[i])
        old_dec[i] = simt.atomic.dec(d, idx[i], lim[i])


@pytest.mark.parametrize("kernel,dt", [(counters_u64, np.uint64), (counters_u32, np.uint32)])
def test_inc_dec_match_numbas_semantics_under_contention(kernel: Any, dt: Any) -> None:
    n, bins = 1500, 6
    top = np.iinfo(dt).max
    # Most lanes on bin 0 (more than `atomics.RANKS`: the per-element scan); limits that make
    # the counters wrap often, and some near the type's top (no overflow in `old + 1`).
    idx = np.where(RNG.random(n) < 0.6, 0, RNG.integers(0, bins, n)).astype(np.int64)
    lim = RNG.integers(0, 9, n).astype(dt)
    lim[::7] = top
    lim[3::11] = top - 1
    start = np.array([top, top - 1, 0, 5, top - 2, 1], dt)
    c, d = start.copy(), start.copy()
    old_inc, old_dec = np.zeros(n, dt), np.zeros(n, dt)
    kernel[(n + 127) // 128, 128](idx, lim, c, d, old_inc, old_dec)
    want_c, want_d = start.copy(), start.copy()
    want_inc = sequential(lambda o, v: numba_inc(int(o), int(v)), want_c, [idx], lim)
    want_dec = sequential(lambda o, v: numba_dec(int(o), int(v)), want_d, [idx], lim)
    np.testing.assert_array_equal(old_inc, want_inc)
    np.testing.assert_array_equal(old_dec, want_dec)
    np.testing.assert_array_equal(c, want_c)
    np.testing.assert_array_equal(d, want_d)


def test_u64_counters_wrap_at_a_limit_above_32_bits() -> None:
    n, limit = 100, 2**40
    c = np.array([limit - 3, 1], np.uint64)
    d = c.copy()
    old_inc, old_dec = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    lim = np.full(n, limit, np.uint64)
    counters_u64[1, 128](np.zeros(n, np.int64), lim, c, d, old_inc, old_dec)
    # inc counts limit-3 .. limit, then 0, 1, ...: 3 + 1 + 96 steps; dec from limit-3 the same
    # way down, never reaching 0.
    np.testing.assert_array_equal(old_inc[:6], [limit - 3, limit - 2, limit - 1, limit, 0, 1])
    assert c[0] == 96 and d[0] == limit - 3 - n


@needs_ptxas
def test_u64_inc_dec_lower_to_a_cas_loop_through_ptxas() -> None:
    llvm = counters_u64.inspect(stage="llvm")
    assert "atomicrmw uinc_wrap" in llvm and "atomicrmw udec_wrap" in llvm
    assert "i64 %" in llvm.split("atomicrmw uinc_wrap", 1)[1].splitlines()[0]
    for arch in ("sm_80", "sm_90"):
        ptx = counters_u64.inspect(stage="ptx", arch=arch)
        assert "Compiling entry function 'fearless_counters_u64'" in ptxas_check(ptx, arch)
        assert "atom.relaxed.gpu.global.cas.b64" in ptx  # no atom.inc.u64 in PTX
        assert "atom.global.inc" not in ptx and "atom.global.dec" not in ptx
    ptx32 = counters_u32.inspect(stage="ptx", arch="sm_90")
    assert "atom.global.inc.u32" in ptx32 and "atom.global.dec.u32" in ptx32


def test_inc_on_signed_or_float_elements_is_refused() -> None:
    @simt.kernel
    def signed_dec(x: simt.AtomicSlice[fl.i64]):
        simt.atomic.dec(x, 0, 5)

    with pytest.raises(fl.KernelTypeError, match="wrapping counter on u32 or u64") as info:
        signed_dec[1, 1](np.zeros(1, np.int64))
    assert "simt.atomic.sub" in str(info.value)  # the help names the signed alternative


# ------------------------------------------------------------------------ 2-D AtomicSlice


@simt.kernel
def float_ops_2d(
    col: simt.Slice[fl.i64],
    x: simt.Slice[fl.f32],
    a: simt.AtomicSlice[fl.f32, 2],
    old_add: simt.DisjointSlice[fl.f32],
):
    i = simt.thread.index_1d()
    if i < len(x):
        j = col[i]
        v = x[i]
        old_add[i] = simt.atomic.add(a, (0, j), v)
        simt.atomic.sub(a, (1, j), v)
        simt.atomic.max(a, (2, j), v)
        simt.atomic.min(a, (3, j), v)
        simt.atomic.exch(a, (4, j), v)
        simt.atomic.cas(a, (5, j), 0.0, v)


def test_2d_histogram_matches_numpy_and_lane_order() -> None:
    n = 4000
    r = RNG.integers(0, 5, n).astype(np.int32)
    c = np.where(RNG.random(n) < 0.5, 0, RNG.integers(0, 7, n)).astype(np.int32)
    h = np.full((5, 7), 10, np.int32)
    old = np.zeros(n, np.int32)
    hist2d[(n + 127) // 128, 128](r, c, h, old)
    want = np.full((5, 7), 10, np.int64)
    np.add.at(want, (r, c), 1)
    np.testing.assert_array_equal(h, want)
    for b in [(0, 0), (3, 0), (4, 6)]:  # the k-th lane on an element sees k earlier adds
        hits = (r == b[0]) & (c == b[1])
        np.testing.assert_array_equal(old[hits], 10 + np.arange(hits.sum()))


def test_every_integer_atomic_on_a_2d_slice() -> None:
    n, cols = 900, 4
    col = np.where(RNG.random(n) < 0.5, 1, RNG.integers(0, cols, n)).astype(np.int64)
    x = RNG.integers(0, 2**64, n, dtype=np.uint64)
    x[::3] %= np.uint64(16)  # small values, so that inc, dec and cas do not always reset
    a = RNG.integers(0, 2**64, (11, cols), dtype=np.uint64)
    a[8:] %= np.uint64(4)
    want = a.copy()
    old_inc, old_cas = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    int_ops_2d[(n + 127) // 128, 128](col, x, a, old_inc, old_cas)
    rows = [
        lambda o, v: o + v,
        lambda o, v: o - v,
        max,
        min,
        lambda o, v: v,
        lambda o, v: o & v,
        lambda o, v: o | v,
        lambda o, v: o ^ v,
        lambda o, v: numba_inc(o, v % 7),
        lambda o, v: numba_dec(o, v % 5),
        lambda o, v: v % 4 if o == v % 3 else o,
    ]
    big = want.astype(object)  # Python ints: wrap explicitly, as u64 does
    olds = []
    for k, step in enumerate(rows):
        row = np.zeros(n, np.int64) + k
        wrapped = lambda o, v, step=step: step(o, v) % 2**64  # noqa: E731
        olds.append(sequential(wrapped, big, [row, col], x.astype(object)))
    np.testing.assert_array_equal(a, big.astype(np.uint64))
    np.testing.assert_array_equal(old_inc, olds[8].astype(np.uint64))
    np.testing.assert_array_equal(old_cas, olds[10].astype(np.uint64))


def test_every_float_atomic_on_a_2d_slice() -> None:
    n, cols = 700, 3
    col = np.where(RNG.random(n) < 0.5, 2, RNG.integers(0, cols, n)).astype(np.int64)
    x = (RNG.standard_normal(n) * 10).astype(np.float32)
    x[::5] = 0.0
    a = np.zeros((6, cols), np.float32)
    a[2], a[3] = -np.inf, np.inf
    want = a.copy()
    old_add = np.zeros(n, np.float32)
    float_ops_2d[(n + 127) // 128, 128](col, x, a, old_add)
    f32 = dtypes.f32
    steps = [
        numerics.binary_fn("add", f32),
        numerics.binary_fn("sub", f32),
        numerics.math_fn("fmax", f32),
        numerics.math_fn("fmin", f32),
        lambda o, v: v,
        lambda o, v: v if o.tobytes() == np.float32(0.0).tobytes() else o,
    ]
    olds = [sequential(s, want, [np.full(n, k), col], x) for k, s in enumerate(steps)]
    assert a.tobytes() == want.tobytes()
    assert old_add.tobytes() == olds[0].tobytes()


def test_2d_thread_index_and_grid_pair_as_indices() -> None:
    h = np.zeros((5, 6), np.int64)
    g = np.full((6, 5), -1, np.int64)
    witness_2d[(2, 2), (4, 4)](h, g)  # an 8 x 8 grid of threads: some past each extent
    rows, cols = np.indices((5, 6))
    np.testing.assert_array_equal(h, rows * 100 + cols)
    xs, ys = np.indices((6, 5))
    np.testing.assert_array_equal(g, xs * 10 + ys)


@pytest.mark.parametrize("kind", ["add", "exch", "min", "inc", "cas"])
def test_2d_atomic_function_matches_lane_by_lane_updates(kind: str) -> None:
    n, shape = 600, (3, 4)
    r = np.where(RNG.random(n) < 0.5, 2, RNG.integers(0, 3, n)).astype(np.int64)
    c = np.where(RNG.random(n) < 0.5, 3, RNG.integers(0, 4, n)).astype(np.int64)
    vals = RNG.integers(0, 6, n).astype(np.uint32)
    memory = RNG.integers(0, 6, shape).astype(np.uint32)[:, ::-1]  # not C-contiguous
    want = memory.copy()
    if kind == "cas":
        expected = RNG.integers(0, 6, n).astype(np.uint32)
        operands = [expected, vals]
        old = atomics.cas_fn(dtypes.u32)(memory, [r, c], operands, n)
        model = sequential(lambda o, e, v: v if o == e else o, want, [r, c], *operands)
    else:
        step: Callable[..., Any] = {
            "add": lambda o, v: (int(o) + int(v)) % 2**32,
            "exch": lambda o, v: v,
            "min": min,
            "inc": lambda o, v: numba_inc(int(o), int(v)),
        }[kind]
        old = atomics.rmw_fn(kind, dtypes.u32)(memory, [r, c], [vals], n)
        model = sequential(step, want, [r, c], vals)
    np.testing.assert_array_equal(old, model)
    np.testing.assert_array_equal(memory, want)


@pytest.mark.parametrize("axis", [0, 1])
def test_2d_atomic_out_of_range_names_the_axis(axis: int) -> None:
    r = np.array([0, 1, 2, 3], np.int32)
    c = np.array([0, 1, 2, 3], np.int32)
    (r if axis == 0 else c)[2] = 9 if axis == 0 else -1
    h = np.zeros((4, 4), np.int32)
    with pytest.raises(fl.KernelIndexError) as info:
        hist2d[1, 32](r, c, h, np.zeros(4, np.int32))
    text = str(info.value)
    bad = 9 if axis == 0 else -1
    assert f"the len is 4 but the index is {bad}" in info.value.message
    assert f"on axis {axis} of `h`" in text and "thread (2, 0, 0)" in text
    assert f"h.shape[{axis}]" in text
    np.testing.assert_array_equal(np.diag(h), [1, 1, 0, 1])  # the failing thread skipped it


def test_2d_atomic_slice_argument_rank_is_checked() -> None:
    with pytest.raises(fl.KernelTypeError, match="`h` has 1 dimension, but kernels take 2-D"):
        hist2d[1, 32](np.zeros(2, np.int32), np.zeros(2, np.int32), np.zeros(4, np.int32),
                      np.zeros(2, np.int32))  # fmt: skip


def test_index_rank_mismatches_are_type_errors() -> None:
    @simt.kernel
    def one_index(h: simt.AtomicSlice[fl.i32, 2]):
        simt.atomic.add(h, 0, 1)

    with pytest.raises(fl.KernelTypeError, match=r"2-D AtomicSlice, takes a pair `\(row, col\)`"):
        one_index[1, 1](np.zeros((2, 2), np.int32))

    @simt.kernel
    def pair_on_1d(h: simt.AtomicSlice[fl.i32]):
        simt.atomic.cas(h, (0, 1), 0, 1)

    with pytest.raises(fl.KernelTypeError, match="1-D AtomicSlice, takes `i`"):
        pair_on_1d[1, 1](np.zeros(2, np.int32))

    @simt.kernel
    def one_tuple(h: simt.AtomicSlice[fl.i32]):
        simt.atomic.add(h, (1,), 5)  # numba's 1-tuple on a 1-D array

    h = np.zeros(2, np.int32)
    one_tuple[1, 4](h)
    np.testing.assert_array_equal(h, [0, 20])


def test_plain_read_of_a_2d_atomic_slice_suggests_a_pair() -> None:
    @simt.kernel
    def plain(h: simt.AtomicSlice[fl.i32, 2], out: simt.DisjointSlice[fl.i32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = h[0, 1]

    with pytest.raises(fl.SafetyError, match=r"error\[E0610\]") as info:
        plain[1, 1](np.zeros((2, 2), np.int32), np.zeros(1, np.int32))
    assert "`simt.atomic.add(h, (r, c), v)`" in str(info.value)
    assert "`simt.Slice[fl.i32, 2]`" in str(info.value)


@needs_ptxas
@pytest.mark.parametrize("kernel", [hist2d, int_ops_2d, float_ops_2d, witness_2d])
def test_2d_atomics_through_ptxas(kernel: Any) -> None:
    ir = kernel.inspect(stage="ir")
    assert "AtomicSlice[" in ir and ", 2]" in ir and "len {axis=1}" in ir
    for arch in ("sm_80", "sm_90"):
        ptx = kernel.inspect(stage="ptx", arch=arch)
        assert f"Compiling entry function 'fearless_{kernel.name}'" in ptxas_check(ptx, arch)
        assert "atom.global." in ptx or "atom.relaxed.gpu.global.cas" in ptx
