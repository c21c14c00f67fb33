"""The Tile IR lowering keeps the simulator's numerics where Tile IR rounds otherwise or leaves
a case open (found by a red-team helper, 2026-12-07; docs/design.md: the simulator fixes the
answer): a sum or product of f16/bf16 tiles accumulates in f32 and rounds once (a 16-bit
`reduce` rounded every partial sum), integer `x // 0 == x % 0 == 0` (the remainder was
`x - (x // 0) * 0 = x`, after a division by zero Tile IR leaves undefined), an int of more than
16 bits converts to f16/bf16 through f32 (Tile IR's `itof` rounded once), and an integer
load's `padding=-0.0` is its 0 (Tile IR refused `neg_zero` on integers). The simulator's
values, the IR that carries them, its compile through tileiras, and on the GPU (`-m gpu`) the
same values as the simulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import tile

ml_dtypes = pytest.importorskip("ml_dtypes")


@tile.kernel
def total(z: tile.Part[fl.bf16], x: tile.Tensor[fl.bf16]):
    z.store(tile.zeros(z.shape, fl.bf16) + tile.sum(tile.load_like(x, z)))


@tile.kernel
def divmod_by(q: tile.Part[fl.i32], r: tile.Part[fl.i32], x: tile.Tensor[fl.i32],
              y: tile.Tensor[fl.i32]):  # fmt: skip
    a, b = tile.load_like(x, q), tile.load_like(y, q)
    q.store(a // b)
    r.store(a % b)


@tile.kernel
def to_bf16(z: tile.Part[fl.bf16], x: tile.Tensor[fl.i32]):
    z.store(tile.load_like(x, z).astype(fl.bf16))


@tile.kernel
def int_minus_zero_padded(z: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
    z.store(tile.load(x, (0,), (8,), padding=-0.0))


@tile.kernel
def mod_four(r: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
    r.store(tile.load_like(x, r) % 4)


@tile.kernel
def signed_zero(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    a, b = tile.load_like(x, z), tile.load_like(y, z)
    z.store(tile.where(tile.arange(8, fl.i32) < 4, tile.maximum(a, b), tile.minimum(a, b)))


@tile.kernel
def signed_zero_reduce(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load(x, (0, 0), (4, 8))
    z.store(tile.where(tile.arange(8, fl.i32) < 4, tile.max(v, axis=0), tile.min(v, axis=0)))


@tile.kernel
def tf32_product(z: tile.Part[fl.f32], a: tile.Tensor[fl.f32], b: tile.Tensor[fl.f32]):
    acc = tile.zeros((16, 16), fl.f32)
    at = tile.load(a, (0, 0), (16, 16)).astype(fl.tf32)
    bt = tile.load(b, (0, 0), (16, 16)).astype(fl.tf32)
    z.store(tile.mma(at, bt, acc))


# 1 and fourteen 2^-8: in f32 1.0546875, which bf16 holds; a bf16 accumulator keeps 1.0
SMALL = np.array([1.0] + [2.0**-8] * 14 + [0.0], np.float32).astype(ml_dtypes.bfloat16)
X = np.array([7, -7, 5, 9, -1, 2, 3, 4], np.int32)
Y = np.array([0, 0, 2, -2, 3, 0, -3, 1], np.int32)


def _total() -> Any:
    z = fl.empty(16, dtype=fl.bf16)
    with z.partition((16,)) as zp:
        total(zp, fl.asarray(SMALL))
    return z.numpy().astype(np.float32)


def _divmod() -> tuple[Any, Any]:
    q, r = fl.empty(8, dtype=fl.i32), fl.empty(8, dtype=fl.i32)
    with q.partition((8,)) as qp, r.partition((8,)) as rp:
        divmod_by(qp, rp, fl.asarray(X), fl.asarray(Y))
    return q.numpy(), r.numpy()


def _numpy_divmod() -> tuple[Any, Any]:
    safe = np.where(Y == 0, 1, Y)
    return np.where(Y == 0, 0, X // safe), np.where(Y == 0, 0, X % safe)


ZX = np.array([0.0, -0.0, 0.0, -0.0] * 2, np.float32)
ZY = np.array([-0.0, 0.0, 0.0, -0.0] * 2, np.float32)
# columns 0-3 take the max, 4-7 the min, of a column of zeros of these signs
ZCOLUMNS = np.array(
    [[0, -0.0, -0.0, -0.0, 0, -0.0, 0, -0.0], [-0.0, 0, -0.0, -0.0, -0.0, 0, 0, -0.0]] * 2,
    np.float32,
)


def _signed_zeros() -> Any:
    z = fl.empty(8, dtype=fl.f32)
    with z.partition((8,)) as zp:
        signed_zero(zp, fl.asarray(ZX), fl.asarray(ZY))
    w = fl.empty(8, dtype=fl.f32)
    with w.partition((8,)) as wp:
        signed_zero_reduce(wp, fl.asarray(ZCOLUMNS))
    return np.signbit(z.numpy()), np.signbit(w.numpy())


def _tf32_ties() -> Any:
    """1 + 2^-11 ties between 1 and 1 + 2^-10 in tf32: to even, 1; 1 + 3 * 2^-11 ties between
    1 + 2^-10 and 1 + 2^-9: to even, 1 + 2^-9. Returned in units of 2^-11 above 1."""
    a = np.zeros((16, 16), np.float32)
    a[0, 0], a[1, 0] = 1 + 2.0**-11, 1 + 3 * 2.0**-11
    b = np.zeros((16, 16), np.float32)
    b[0, 0] = 1.0
    z = fl.empty((16, 16), dtype=fl.f32)
    with z.partition((16, 16)) as zp:
        tf32_product(zp, fl.asarray(a), fl.asarray(b))
    return (z.numpy()[:2, 0] - 1) * 2.0**11


def test_the_simulators_meaning() -> None:
    assert (_total() == 1.0546875).all()
    q, r = _divmod()
    want_q, want_r = _numpy_divmod()
    assert np.array_equal(q, want_q) and np.array_equal(r, want_r)


def test_minus_zero_is_below_plus_zero_and_tf32_ties_go_to_even() -> None:
    """The H100's answers to the questions the simulator had left open (session 33's
    bench/experiments/tileir_open_numerics.py, run 2026-12-07): Tile IR's maxf/minf order
    -0.0 below +0.0 (elementwise and in a reduction), and its f32 -> tf32 rounds ties to even."""
    elementwise, reduced = _signed_zeros()
    # max of (+0,-0), (-0,+0), (+0,+0), (-0,-0); then min of the same pairs
    assert elementwise.tolist() == [False, False, False, True, True, True, False, True]
    # max of each of the first four columns, min of each of the last four
    assert reduced.tolist() == [False, False, True, True, True, True, False, True]
    assert _tf32_ties().tolist() == [0.0, 4.0]


def test_a_16_bit_sum_reduces_in_f32_and_rounds_once() -> None:
    z = fl.empty(16, dtype=fl.bf16)
    with z.partition((16,)) as zp:
        ir = total.inspect(zp, fl.asarray(SMALL), stage="tileir")
    reduce = next(line for line in ir.splitlines() if "reduce" in line and "identities" in line)
    assert "tile<16xf32> -> tile<f32>" in reduce
    assert "ftof %reduce  : tile<f32> -> tile<bf16>" in ir


def test_an_integer_division_guards_a_zero_divisor_but_not_a_constant_one() -> None:
    q, r = fl.empty(8, dtype=fl.i32), fl.empty(8, dtype=fl.i32)
    with q.partition((8,)) as qp, r.partition((8,)) as rp:
        ir = divmod_by.inspect(qp, rp, fl.asarray(X), fl.asarray(Y), stage="tileir")
    assert ir.count("cmpi equal") == 2 and ir.count("select") == 4  # a guard each, in and out
    with r.partition((8,)) as rp:
        ir = mod_four.inspect(rp, fl.asarray(X), stage="tileir")
    assert "divi" in ir and "select" not in ir and "cmpi" not in ir


def test_an_int_converts_to_bf16_through_f32() -> None:
    big = np.array([2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 3, 2**31 - 1], np.int32)
    z = fl.empty(4, dtype=fl.bf16)
    with z.partition((4,)) as zp:
        to_bf16(zp, fl.asarray(big))
        ir = to_bf16.inspect(zp, fl.asarray(big), stage="tileir")
    # rounded to f32 first (2**24 + 2**16 + 1 is not an f32), then to bf16
    want = big.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(z.numpy().astype(np.float32), want)
    assert "-> tile<4xf32>" in ir and "ftof" in ir and "-> tile<4xbf16>" in ir


def test_an_integer_loads_minus_zero_padding_as_its_zero() -> None:
    x = fl.asarray(np.arange(1, 6, dtype=np.int32))
    z = fl.empty(8, dtype=fl.i32)
    with z.partition((8,)) as zp:
        int_minus_zero_padded(zp, x)
        ir = int_minus_zero_padded.inspect(zp, x, stage="tileir")
    assert list(z.numpy()) == [1, 2, 3, 4, 5, 0, 0, 0]
    assert "padding_value = zero" in ir and "padding_value = neg_zero" not in ir


def test_both_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    z, q, r = fl.empty(16, dtype=fl.bf16), fl.empty(8, dtype=fl.i32), fl.empty(8, dtype=fl.i32)
    with z.partition((16,)) as zp, q.partition((8,)) as qp, r.partition((8,)) as rp:
        assert cubin(total, zp, fl.asarray(SMALL))
        assert cubin(divmod_by, qp, rp, fl.asarray(X), fl.asarray(Y))
    x, b = fl.asarray(X[:4].copy()), fl.empty(4, dtype=fl.bf16)
    with b.partition((4,)) as bp:
        assert cubin(to_bf16, bp, x)
    with q.partition((8,)) as qp:
        assert cubin(int_minus_zero_padded, qp, fl.asarray(X))


@pytest.mark.gpu
def test_the_gpu_agrees_with_the_simulator(sim_and_gpu: Callable[..., Any]) -> None:
    sim, gpu = sim_and_gpu(_total)
    assert np.array_equal(sim, gpu)
    (sq, sr), (gq, gr) = sim_and_gpu(_divmod)
    assert np.array_equal(sq, gq) and np.array_equal(sr, gr)
    (se, sr_), (ge, gr_) = sim_and_gpu(_signed_zeros)
    assert np.array_equal(se, ge) and np.array_equal(sr_, gr_)
    st, gt = sim_and_gpu(_tf32_ties)
    assert np.array_equal(st, gt)
