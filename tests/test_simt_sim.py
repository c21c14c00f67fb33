"""SIMT kernels end to end on the simulator, against NumPy, on random and irregular sizes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import fearless as fl

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import simt_kernels as K

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
    sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
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
