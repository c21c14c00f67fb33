"""SIMT kernels end to end on the simulator, against NumPy, on random and irregular sizes."""

from __future__ import annotations

import numpy as np
import pytest
import simt_kernels as K

import fearless as fl
from fearless import simt

RNG = np.random.default_rng(1234)


def grid_for(n: int, block: int = 256) -> int:
    return (n + block - 1) // block


@pytest.mark.parametrize("n", [1, 255, 257, 1000, 4099])
def test_vecadd(n: int) -> None:
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    c = np.full(n, np.nan, np.float32)
    K.vecadd[grid_for(n), 256](a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_vecadd_prepared_launch() -> None:
    n = 777
    a, b = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    c = np.zeros(n, np.float32)
    prep = K.vecadd.prepare(grid=grid_for(n))  # block comes from the kernel's contract
    K.vecadd(prep, a, b, c)
    np.testing.assert_array_equal(c, a + 1)


def test_saxpy_scalar_param() -> None:
    n = 1003
    x = RNG.standard_normal(n).astype(np.float32)
    y = RNG.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    K.saxpy[grid_for(n, 128), 128](2.5, x, y, out)
    np.testing.assert_array_equal(out, np.float32(2.5) * x + y)


def test_stencil_with_device_function_and_early_returns() -> None:
    n = 531
    x = RNG.uniform(-3, 3, n).astype(np.float32)
    out = np.zeros(n, np.float32)
    K.stencil3[grid_for(n), 256](x, out)
    ref = x.copy()
    mid = (x[:-2] + x[1:-1] + x[2:]) / np.float32(3.0)
    ref[1:-1] = np.clip(mid, -1, 1)
    np.testing.assert_array_equal(out, ref)


def test_row_sum_loop_with_weak_literal_accumulator() -> None:
    rows, cols = 37, 19
    m = RNG.standard_normal((rows, cols))
    out = np.zeros(rows, np.float64)
    K.row_sum[1, 64](m.ravel(), cols, out)
    ref = np.zeros(rows)
    for k in range(cols):  # the same order of additions as the kernel
        ref += m[:, k]
    np.testing.assert_array_equal(out, ref)


def test_int_ops_python_semantics() -> None:
    n = 999
    a = RNG.integers(-(10**6), 10**6, n).astype(np.int32)
    b = RNG.integers(-1000, 1000, n).astype(np.int32)
    b[b == 0] = 7
    out = np.zeros(n, np.int32)
    K.int_ops[grid_for(n), 256](a, b, out)
    ref = []
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        v = (x // y) * 7 + (x % y) + ((x ^ y) & 0xFF) - (x >> 2) + (y << 1) + x * y
        ref.append((v + 2**31) % 2**32 - 2**31)  # i32 wraps
    np.testing.assert_array_equal(out, np.array(ref, np.int32))


def test_collatz_divergent_loops() -> None:
    n = 300
    start = RNG.integers(1, 10**5, n).astype(np.int64)
    out = np.zeros(n, np.int64)
    K.collatz_steps[grid_for(n, 64), 64](start, out)

    def steps(v: int) -> int:
        s = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            s += 1
        return s

    np.testing.assert_array_equal(out, [steps(int(v)) for v in start])


def test_softplus_math() -> None:
    n = 2000
    x = RNG.uniform(-20, 20, n).astype(np.float32)
    out = np.zeros(n, np.float32)
    K.softplus[grid_for(n), 256](x, out)
    ref = np.log1p(np.exp(-np.abs(x.astype(np.float64)))) + np.maximum(x, 0)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_casts_truncate_toward_zero() -> None:
    x = np.array([-2.7, -0.5, 0.5, 2.7, 100.9, -100.9], np.float32)
    oi = np.zeros(6, np.int32)
    ou = np.zeros(6, np.uint32)
    K.casts[1, 32](x, oi, ou)
    np.testing.assert_array_equal(oi, [-2, 0, 0, 2, 100, -100])
    np.testing.assert_array_equal(ou, np.array([-2, 0, 0, 2, 100, -100]).astype(np.uint32))


def test_out_of_bounds_read_raises_kernel_index_error() -> None:
    src = np.arange(10, dtype=np.float32)
    idx = np.array([0, 3, 9, 10, 2], np.int32)
    out = np.full(5, -1.0, np.float32)
    with pytest.raises(fl.KernelIndexError) as info:
        K.gather[1, 32](src, idx, out)
        fl.synchronize()
    err = info.value
    assert "the len is 10 but the index is 10" in err.message
    assert err.loc is not None and err.loc.file.endswith("simt_kernels.py")
    assert "src[idx[i]]" in err.loc.source_line()
    assert "thread (3, 0, 0)" in str(err)
    assert out[3] == -1.0  # the failing thread stopped before its write
    np.testing.assert_array_equal(out[[0, 1, 2, 4]], [0, 3, 9, 2])


def test_borrow_error_on_aliasing_output() -> None:
    a = np.ones(64, np.float32)
    b = np.ones(64, np.float32)
    with pytest.raises(fl.BorrowError) as info:
        K.vecadd[1, 256](a, b, a)
    assert "cannot borrow `c` as mutable" in str(info.value)
    assert "test_simt_sim.py" in str(info.value)
    np.testing.assert_array_equal(a, 1.0)  # nothing ran


def test_wrong_dtype_argument() -> None:
    a = np.ones(64, np.float64)
    with pytest.raises(fl.KernelTypeError) as info:
        K.vecadd[1, 256](a, a.astype(np.float32), np.zeros(64, np.float32))
    assert "`a`" in str(info.value) and "f32" in str(info.value) and "f64" in str(info.value)


def test_block_contract_is_checked() -> None:
    a = np.ones(64, np.float32)
    with pytest.raises(fl.LaunchContractError) as info:
        K.vecadd[1, 128](a, a.copy(), np.zeros(64, np.float32))
    assert "block=(256, 1, 1)" in str(info.value)


def test_two_dimensional_launch_rejected_for_index_1d() -> None:
    a = np.ones(64, np.float32)
    with pytest.raises(fl.LaunchContractError):
        K.saxpy[(1, 2), 64](1.0, a, a.copy(), np.zeros(64, np.float32))


def test_million_element_vecadd() -> None:
    # Its speed is measured in bench/sim_speed.py, not here.
    n = 1 << 20
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    K.vecadd[grid_for(n), 256](a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_grouped_checks_report_the_first_failing_access() -> None:
    import simt_cases as C

    x = np.arange(8, dtype=np.float32)
    out = np.zeros(10, np.float32)  # longer than x: x[j + 1] fails first at j = 7
    with pytest.raises(fl.KernelIndexError) as info:
        C.stencil[1, 256](x, out)
    err = info.value
    assert "the len is 8 but the index is 8" in err.message
    assert err.loc is not None and "x[j + 1]" in err.loc.source_line()
    assert err.loc.col == err.loc.source_line().index("x[j + 1]")
    assert "thread (7, 0, 0)" in str(err)


# ------------------------------------------------------------------------------ 2-D kernels


def grid_2d(rows: int, cols: int, block: tuple[int, int]) -> tuple[int, int]:
    """(x, y) blocks covering cols along x and rows along y."""
    return (cols + block[0] - 1) // block[0], (rows + block[1] - 1) // block[1]


@pytest.mark.parametrize(
    ("rows", "cols", "block"),
    [(1, 1, (16, 16)), (37, 53, (16, 16)), (70, 5, (8, 32)), (3, 300, (32, 4))],
)
def test_matadd_2d(rows: int, cols: int, block: tuple[int, int]) -> None:
    a = RNG.standard_normal((rows, cols)).astype(np.float32)
    b = RNG.standard_normal((rows, cols)).astype(np.float32)
    c = np.full((rows, cols), np.nan, np.float32)
    K.matadd[grid_2d(rows, cols, block), block](a, b, c)
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize(("rows", "cols"), [(1, 7), (33, 17), (64, 100)])
def test_transpose_2d(rows: int, cols: int) -> None:
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    out = np.full((cols, rows), np.nan, np.float32)
    K.transpose[grid_2d(cols, rows, (16, 16)), (16, 16)](x, out)
    np.testing.assert_array_equal(out, x.T)


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (19, 23, 29), (40, 7, 65)])
def test_matmul_2d(m: int, k: int, n: int) -> None:
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    K.matmul[grid_2d(m, n, (8, 8)), (8, 8)](a, b, c)
    ref = np.zeros((m, n), np.float32)
    for kk in range(k):  # the kernel's order of additions, in f32
        ref += a[:, kk : kk + 1] * b[kk : kk + 1, :]
    np.testing.assert_array_equal(c, ref)


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (19, 23, 29), (40, 70, 65)])
def test_shared_matmul_stages_tiles_and_sums_in_k_order(m: int, k: int, n: int) -> None:
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    K.shared_matmul[grid_2d(m, n, (K.TPB, K.TPB)), (K.TPB, K.TPB)](a, b, c)
    ref = np.zeros((m, n), np.float32)
    for kk in range(k):  # matmul's order of additions, in f32 (the padded terms add 0)
        ref += a[:, kk : kk + 1] * b[kk : kk + 1, :]
    np.testing.assert_array_equal(c, ref)


def test_2d_out_of_bounds_names_the_axis() -> None:
    # b has fewer columns than c: the column check of b[t.row, t.col] fails, although the flat
    # offset row * 5 + col would still be inside b for most rows.
    @fl.simt.kernel
    def add_cols(
        a: fl.simt.Slice[fl.f32, 2],
        b: fl.simt.Slice[fl.f32, 2],
        c: fl.simt.DisjointSlice[fl.f32, 2],
    ):
        t = fl.simt.thread.index_2d()
        if t.row < c.shape[0] and t.col < c.shape[1]:
            c[t] = a[t] + b[t.row, t.col]

    a = np.ones((4, 6), np.float32)
    b = np.ones((4, 5), np.float32)
    c = np.zeros((4, 6), np.float32)
    with pytest.raises(fl.KernelIndexError) as info:
        add_cols[(1, 1), (8, 8)](a, b, c)
    err = info.value
    assert "index out of bounds: the len is 5 but the index is 5" in err.message
    assert "on axis 1 of `b`" in str(err)
    assert "thread (5, 0, 0)" in str(err)  # the lowest failing thread: row 0, col 5
    assert err.loc is not None and "b[t.row, t.col]" in err.loc.source_line()
    np.testing.assert_array_equal(c[:, :5], 2.0)
    np.testing.assert_array_equal(c[:, 5], 0.0)  # failing threads stopped before the write


def test_2d_row_check_reports_axis_0() -> None:
    x = np.ones((3, 4), np.float32)  # out should be 4 x 3: its column 3 reads row 3 of x
    out = np.zeros((4, 4), np.float32)
    with pytest.raises(fl.KernelIndexError) as info:
        K.transpose[(1, 1), (8, 8)](x, out)
    assert "the len is 3 but the index is 3" in info.value.message
    assert "on axis 0 of `x`" in str(info.value)
    assert "thread (3, 0, 0)" in str(info.value)


def test_2d_parameters_check_rank_and_dtype() -> None:
    a = np.ones((4, 4), np.float32)
    with pytest.raises(
        fl.KernelTypeError, match="`b` has 1 dimension, but kernels take 2-D"
    ) as info:
        K.matadd[(1, 1), (8, 8)](a, np.ones(16, np.float32), np.zeros((4, 4), np.float32))
    assert "reshape" in (info.value.help or "")
    with pytest.raises(fl.KernelTypeError, match="`c` has element type f64"):
        K.matadd[(1, 1), (8, 8)](a, a.copy(), np.zeros((4, 4), np.float64))
    with pytest.raises(fl.KernelTypeError, match="`a` has 2 dimensions, but kernels take 1-D"):
        K.vecadd[1, 256](a, a.copy(), np.zeros((4, 4), np.float32))


def test_2d_borrow_check_and_launch_contract() -> None:
    a = np.ones((8, 8), np.float32)
    with pytest.raises(fl.BorrowError, match="cannot borrow `c` as mutable"):
        K.matadd[(1, 1), (8, 8)](a, a[:4].copy(), a)
    c = np.zeros((8, 8), np.float32)
    K.matadd[(1, 1), (8, 8)](a[:4], a[4:], c[:4])  # disjoint halves of one buffer are fine
    np.testing.assert_array_equal(c[:4], 2.0)
    with pytest.raises(fl.LaunchContractError, match=r"index_2d\(\), which needs a 2-D launch"):
        K.matadd[(1, 1, 2), (8, 8)](a, a.copy(), c)


def test_2d_witness_passes_through_device_functions_and_augmented_stores() -> None:
    @fl.simt.device
    def put(c: fl.simt.DisjointSlice[fl.f32, 2], t, v: fl.f32) -> None:
        c[t] = v

    @fl.simt.kernel
    def twice_plus_one(a: fl.simt.Slice[fl.f32, 2], c: fl.simt.DisjointSlice[fl.f32, 2]):
        t = fl.simt.thread.index_2d()
        if t.row < c.shape[0] and t.col < c.shape[1]:
            put(c, t, a[t] * 2.0)
            c[t] += 1.0

    a = RNG.standard_normal((9, 13)).astype(np.float32)
    c = np.zeros_like(a)
    twice_plus_one[(1, 2), (16, 8)](a, c)
    np.testing.assert_array_equal(c, a * np.float32(2.0) + np.float32(1.0))


def test_2d_unsafe_write_out_of_range_names_the_axis() -> None:
    @fl.simt.kernel(unsafe=True)
    def shifted(c: fl.simt.DisjointSlice[fl.f32, 2], n: int):
        t = fl.simt.thread.index_2d()
        c[t.row, t.col + n] = 1.0  # raw indexed write: unsafe kernels only, no device check

    assert "check.bounds" not in shifted.inspect(stage="ir")
    with pytest.raises(fl.KernelIndexError, match="the len is 3 but the index is 3") as info:
        shifted[(1, 1), (3, 2)](np.zeros((2, 3), np.float32), 1)
    assert "on axis 1 of `c`" in str(info.value) and "unchecked write" in str(info.value)


def test_fast_variant_assumes_only_what_removes_checks() -> None:
    text = K.gather.inspect(stage="ir")
    # idx[i] is proven when len(idx) >= len(out); src[idx[i]] can never be: it stays checked.
    assert "a second variant runs when len(idx) >= len(out)" in text
    assert "1 bounds check(s) remain in it" in text
    assert "len(src)" not in text.splitlines()[1]


@pytest.mark.parametrize("x_len", [300, 299])
def test_stencil_fast_and_checked_variants_agree(x_len: int) -> None:
    import simt_cases as C

    n = 300
    x = RNG.standard_normal(x_len).astype(np.float32)
    out = np.zeros(n, np.float32)
    if x_len >= n:  # the fast variant (no device checks) runs, and is right
        C.stencil[(n + 255) // 256, 256](x, out)
        np.testing.assert_array_equal(out[1:-1], x[:-2] + x[1:-1] + x[2:])
    else:  # x is shorter than out: the checked variant runs and stops the thread reading x[299]
        with pytest.raises(fl.KernelIndexError, match="the len is 299 but the index is 299"):
            C.stencil[(n + 255) // 256, 256](x, out)


def test_guards_with_offsets_prove_neighbour_reads() -> None:
    @simt.kernel(requires=("len(x) == len(out)",))
    def diff(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if 1 <= i and i < len(out) - 1:  # noqa: SIM300 - the constant-first form is tested
            j = int(i)
            out[i] = x[j + 1] - x[j - 1]

    assert "0 bounds check(s) remain" in diff.inspect(stage="ir")
    x = RNG.standard_normal(77).astype(np.float32)
    out = np.zeros(77, np.float32)
    diff[1, 128](x, out)
    np.testing.assert_array_equal(out[1:-1], x[2:] - x[:-2])
