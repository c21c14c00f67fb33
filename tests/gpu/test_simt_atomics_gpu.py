"""SIMT atomics on the GPU agree with the simulator and NumPy: exactly where the result does not
depend on the order the threads' updates land in, within a tolerance for float sums."""

from __future__ import annotations

import numpy as np
import pytest
import simt_kernels as K

import fearless as fl
from fearless import simt
from support.atomics_kernels import (  # the CPU tests' kernels
    add_old,
    bit_ops,
    cas_max,
    exch_chain,
    int_ops,
)
from support.atomics_numba_kernels import counters_u64, hist2d, int_ops_2d, witness_2d

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]
RNG = np.random.default_rng(7)


@simt.kernel
def min_max(x: simt.Slice[fl.f32], m: simt.AtomicSlice[fl.f32], d: simt.AtomicSlice[fl.f64]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.max(m, 0, x[i])
        simt.atomic.min(m, 1, x[i])
        simt.atomic.max(d, 0, fl.f64(x[i]))
        simt.atomic.min(d, 1, fl.f64(x[i]))


@simt.kernel
def half_add(x: simt.Slice[fl.f32], h: simt.AtomicSlice[fl.f16]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.add(h, 0, fl.f16(x[i]))


def on_sim(kernel: object, grid: int, block: int, *args: object) -> list[object]:
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    fl.set_target("sim")
    try:
        kernel[grid, block](*copies)  # type: ignore[index]
    finally:
        fl.set_target("cuda")
    return copies


def on_gpu(kernel: object, grid: int, block: int, *args: object) -> list[object]:
    dev = [fl.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    kernel[grid, block](*dev)  # type: ignore[index]
    fl.synchronize()
    return [d.numpy() if isinstance(d, fl.Tensor) else d for d in dev]


def test_histogram() -> None:
    x = RNG.integers(0, 1000, 1 << 20).astype(np.int32)
    counts = np.zeros(1000, np.int32)
    grid = (len(x) + 255) // 256
    sim = on_sim(K.histogram, grid, 256, x, counts)[1]
    gpu = on_gpu(K.histogram, grid, 256, x, counts)[1]
    np.testing.assert_array_equal(gpu, np.bincount(x, minlength=1000))
    np.testing.assert_array_equal(gpu, sim)


def test_old_values_of_one_counter_are_a_permutation() -> None:
    n = 1 << 16
    gpu = on_gpu(add_old, n // 256, 256, np.zeros(n, np.int32), np.zeros(1, np.int32),
                 np.zeros(n, np.int32))  # fmt: skip
    assert gpu[1][0] == n
    np.testing.assert_array_equal(np.sort(gpu[2]), np.arange(n))


def test_dot_product_within_tolerance() -> None:
    n, per = 1_000_003, 64
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    grid = ((n + per - 1) // per + 127) // 128
    out = np.zeros(1, np.float32)
    sim = on_sim(K.dot, grid, 128, a, b, out, per)[2]
    gpu = on_gpu(K.dot, grid, 128, a, b, out, per)[2]
    exact = float(np.dot(a.astype(np.float64), b))
    # The partial sums are the same on both; only the order they are added in differs.
    tol = 1e-6 * float(np.abs(a.astype(np.float64) * b).sum()) + 1e-3
    assert abs(float(gpu[0]) - exact) < tol  # type: ignore[index]
    assert abs(float(gpu[0]) - float(sim[0])) < tol  # type: ignore[index]


def test_float_max_min() -> None:
    x = (RNG.standard_normal(300_000) * 1e3).astype(np.float32)
    m = np.array([-np.inf, np.inf], np.float32)
    d = np.array([-np.inf, np.inf], np.float64)
    grid = (len(x) + 255) // 256
    sim = on_sim(min_max, grid, 256, x, m, d)
    gpu = on_gpu(min_max, grid, 256, x, m, d)
    np.testing.assert_array_equal(gpu[1], [x.max(), x.min()])
    np.testing.assert_array_equal(gpu[2], [x.max(), x.min()])
    np.testing.assert_array_equal(gpu[1], sim[1])
    np.testing.assert_array_equal(gpu[2], sim[2])


def test_integer_atomics_and_wraparound() -> None:
    x = RNG.integers(-(10**12), 10**12, 100_000, dtype=np.int64)
    a = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 5], np.int64)
    u = np.array([2**32 - 10, 2], np.uint32)
    grid = (len(x) + 255) // 256
    sim = on_sim(int_ops, grid, 256, x, a, u)
    gpu = on_gpu(int_ops, grid, 256, x, a, u)
    np.testing.assert_array_equal(gpu[1], sim[1])
    np.testing.assert_array_equal(gpu[2], sim[2])


def test_bitwise_and_wrapping_atomics() -> None:
    """and_, or_, xor and the wrapping inc/dec: the final values do not depend on the order,
    so the GPU's equal the simulator's; inc's old values are the same multiset."""
    x = RNG.integers(0, 2**32, 100_000, dtype=np.uint64).astype(np.uint32)
    b = np.array([0xFFFFFFFF, 0, 0x12345678, 0, 3], np.uint32)
    old = np.zeros(len(x), np.uint32)
    grid = (len(x) + 255) // 256
    sim = on_sim(bit_ops, grid, 256, x, b, old)
    gpu = on_gpu(bit_ops, grid, 256, x, b, old)
    np.testing.assert_array_equal(gpu[1], sim[1])
    np.testing.assert_array_equal(np.sort(gpu[2]), np.sort(sim[2]))


def test_cas_lock_free_max() -> None:
    x = RNG.integers(1, 2**31 - 1, 50_000).astype(np.int32)
    m = np.zeros(1, np.int32)
    gpu = on_gpu(cas_max, (len(x) + 255) // 256, 256, x, m)
    assert gpu[1][0] == x.max()  # type: ignore[index]


def test_exch_values_form_a_chain() -> None:
    n = 4096
    gpu = on_gpu(exch_chain, n // 256, 256, np.array([-1], np.int64), np.zeros(n, np.int64))
    seen = np.sort(np.concatenate([gpu[1], gpu[0]]))  # type: ignore[list-item]
    np.testing.assert_array_equal(seen, np.arange(-1, n))  # every value handed on once


def test_f16_add_of_exact_values() -> None:
    # Multiples of 0.5 whose sum stays below 512 are exact in f16 at every step, in any order.
    x = RNG.integers(1, 5, 256).astype(np.float32) / 2
    h = np.zeros(1, np.float16)
    sim = on_sim(half_add, 1, 256, x, h)[1]
    gpu = on_gpu(half_add, 1, 256, x, h)[1]
    assert float(gpu[0]) == float(x.sum()) == float(sim[0])  # type: ignore[index]


def test_out_of_range_atomic_is_reported_at_synchronize() -> None:
    x = fl.asarray(np.array([0, 3, 7, 1], np.int32))
    counts = fl.asarray(np.zeros(4, np.int32))
    K.histogram[1, 32](x, counts)
    with pytest.raises(fl.KernelIndexError) as info:
        fl.synchronize()
    assert "the len is 4 but the index is 7" in info.value.message
    assert "thread (2, 0, 0)" in str(info.value)
    assert info.value.loc is not None
    assert "simt.atomic.add(counts, x[i], 1)" in info.value.loc.source_line()
    np.testing.assert_array_equal(counts.numpy(), [1, 1, 0, 1])


def test_u64_wrapping_counters() -> None:
    """inc/dec on u64 (a compare-and-swap loop on the GPU): with one limit per counter each
    update is +1 / -1 modulo limit + 1, so the final values do not depend on the order."""
    n = 1 << 16
    limits = np.array([2**40, 2**64 - 1, 5, 2**33 + 7], np.uint64)
    start = np.array([2**40 - 100, 2**64 - 2, 3, 0], np.uint64)
    idx = RNG.integers(0, 4, n).astype(np.int64)
    lim = limits[idx]
    args = (idx, lim, start.copy(), start.copy(), np.zeros(n, np.uint64), np.zeros(n, np.uint64))
    sim = on_sim(counters_u64, n // 256, 256, *args)
    gpu = on_gpu(counters_u64, n // 256, 256, *args)
    hits = np.bincount(idx, minlength=4)
    mod = [int(v) + 1 for v in limits]
    want_c = [(int(s) + int(h)) % m for s, h, m in zip(start, hits, mod, strict=True)]
    want_d = [(int(s) - int(h)) % m for s, h, m in zip(start, hits, mod, strict=True)]
    np.testing.assert_array_equal(gpu[2], np.array(want_c, np.uint64))
    np.testing.assert_array_equal(gpu[3], np.array(want_d, np.uint64))
    np.testing.assert_array_equal(gpu[2], sim[2])
    np.testing.assert_array_equal(gpu[3], sim[3])
    for k in (4, 5):  # the old values the threads saw: the same multiset, in another order
        np.testing.assert_array_equal(np.sort(gpu[k]), np.sort(sim[k]))  # type: ignore[arg-type]


def test_2d_histogram_and_integer_atomics() -> None:
    n = 1 << 18
    r = RNG.integers(0, 33, n).astype(np.int32)
    c = RNG.integers(0, 65, n).astype(np.int32)
    h = np.zeros((33, 65), np.int32)
    grid = n // 256
    sim = on_sim(hist2d, grid, 256, r, c, h, np.zeros(n, np.int32))
    gpu = on_gpu(hist2d, grid, 256, r, c, h, np.zeros(n, np.int32))
    want = np.zeros((33, 65), np.int64)
    np.add.at(want, (r, c), 1)
    np.testing.assert_array_equal(gpu[2], want)
    np.testing.assert_array_equal(gpu[2], sim[2])
    n = 1 << 14  # the simulator runs inc, dec and cas one lane at a time per element
    col = RNG.integers(0, 8, n).astype(np.int64)
    x = RNG.integers(0, 2**64, n, dtype=np.uint64)
    a = RNG.integers(0, 2**64, (11, 8), dtype=np.uint64)
    args = (col, x, a, np.zeros(n, np.uint64), np.zeros(n, np.uint64))
    sim = on_sim(int_ops_2d, n // 256, 256, *args)
    gpu = on_gpu(int_ops_2d, n // 256, 256, *args)
    order_free = [0, 1, 2, 3, 5, 6, 7]  # add, sub, max, min, and, or, xor
    np.testing.assert_array_equal(gpu[2][order_free], sim[2][order_free])  # type: ignore[index]


def test_2d_thread_index_and_grid_pair() -> None:
    h = np.zeros((50, 70), np.int64)
    g = np.full((70, 50), -1, np.int64)
    sim = on_sim(witness_2d, (5, 4), (16, 16), h, g)
    gpu = on_gpu(witness_2d, (5, 4), (16, 16), h, g)
    np.testing.assert_array_equal(gpu[0], sim[0])
    np.testing.assert_array_equal(gpu[1], sim[1])


def test_2d_out_of_range_atomic_names_the_axis() -> None:
    r = fl.asarray(np.array([0, 1, 2, 3], np.int32))
    c = fl.asarray(np.array([0, 1, 9, 3], np.int32))
    h = fl.asarray(np.zeros((4, 4), np.int32))
    hist2d[1, 32](r, c, h, fl.asarray(np.zeros(4, np.int32)))
    with pytest.raises(fl.KernelIndexError) as info:
        fl.synchronize()
    assert "the len is 4 but the index is 9" in info.value.message
    assert "on axis 1 of `h`" in str(info.value) and "thread (2, 0, 0)" in str(info.value)
    np.testing.assert_array_equal(np.diag(h.numpy()), [1, 1, 0, 1])
