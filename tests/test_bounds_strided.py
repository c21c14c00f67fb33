"""bounds_elim with strided guards: `k + 3 * stride < n` proves the checks of x[k],
x[k + stride] and x[k + 2 * stride] when `stride` is a small non-negative quantity (special
registers, constants, their sums and products: `gridDim.x * blockDim.x`), and a loop counter
stepped by such a quantity stays non-negative. The bench's `block_sum` (four strided sums per
thread) keeps no check in its loops this way; each rule's boundary keeps its check.
"""

from __future__ import annotations

import numpy as np

import fearless as fl
from fearless import simt
from fearless_bench import kernels_simt as K


def _remaining(kernel: simt.Kernel) -> str:
    return kernel.inspect(stage="ir").splitlines()[0]


@simt.kernel
def four_sums(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    """out[t] = the sum of thread t's strided share of x (four independent sums)."""
    t = simt.thread.index_1d()
    n = len(x)
    stride = simt.gridDim.x * simt.blockDim.x
    k = int(t)
    s0 = fl.f32(0.0)
    s1 = fl.f32(0.0)
    s2 = fl.f32(0.0)
    s3 = fl.f32(0.0)
    while k + 3 * stride < n:
        s0 += x[k]
        s1 += x[k + stride]
        s2 += x[k + 2 * stride]
        s3 += x[k + 3 * stride]
        k += 4 * stride
    while k < n:
        s0 += x[k]
        k += stride
    if t < len(out):
        out[t] = (s0 + s1) + (s2 + s3)


def test_the_strided_loads_are_proven_and_the_sums_match_numpy() -> None:
    assert "0 bounds check(s) remain on the device, 6 proven" in _remaining(four_sums)
    x = np.arange(1000, dtype=np.float32)
    out = np.zeros(64, np.float32)
    four_sums[2, 32](x, out)
    want = [x[t::64].sum() for t in range(64)]
    np.testing.assert_array_equal(out, np.array(want, np.float32))


def test_block_sum_keeps_only_its_atomic_check() -> None:
    assert "1 bounds check(s) remain on the device, 5 proven" in _remaining(K.block_sum)


@simt.kernel
def past_the_guard(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    """The guard covers 2 * stride; the load at 3 * stride stays checked."""
    t = simt.thread.index_1d()
    stride = simt.gridDim.x * simt.blockDim.x
    k = int(t)
    if k + 2 * stride < len(x) and t < len(out):
        out[t] = x[k + stride] + x[k + 3 * stride]


@simt.kernel
def by_a_parameter(x: simt.Slice[fl.f32], step: int, out: simt.DisjointSlice[fl.f32]):
    """A step from a parameter may be negative: nothing is proven from it."""
    t = simt.thread.index_1d()
    k = int(t)
    if k + 2 * step < len(x) and t < len(out):
        out[t] = x[k + step]


@simt.kernel
def wrapping_i32(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    """gridDim.x * blockDim.x in i32 may wrap: it is no small term."""
    t = simt.thread.index_1d()
    stride = fl.i32(simt.gridDim.x) * fl.i32(simt.blockDim.x)
    k = int(t)
    if k + 2 * int(stride) < len(x) and t < len(out):
        out[t] = x[k + int(stride)]


def test_what_the_guard_does_not_cover_stays_checked() -> None:
    # out[t]'s check is proven in each; the other read keeps its check.
    assert "1 bounds check(s) remain on the device, 2 proven" in _remaining(past_the_guard)
    assert "1 bounds check(s) remain on the device, 1 proven" in _remaining(by_a_parameter)
    assert "1 bounds check(s) remain on the device, 1 proven" in _remaining(wrapping_i32)
