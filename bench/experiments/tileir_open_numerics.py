"""Four cases where Tile IR's meaning and the simulator's may part, run on both and printed side
by side (session 32's audit, left open for want of a GPU; docs/design.md: the simulator fixes
the answer, so a difference is a lowering to fix or a documented exception):

  mma_f16_acc   tile.mma of f16 into an f16 accumulator over K = 64: the simulator sums in f32
                and rounds once; the tensor cores may keep f16 partial sums
  max_zero      tile.maximum / minimum of +0.0 and -0.0 (and the reductions): the simulator
                returns NumPy's answer; Tile IR's maxf may take +0.0 as the larger
  tf32_ties     f32 -> tf32 at a tie of the dropped mantissa bits: the simulator rounds ties
                away from zero (cvt.rna); Tile IR's ftof may round to nearest even
  int_min_div   i32 MIN // -1 and MIN % -1: the simulator wraps (MIN, 0); Tile IR leaves it
                undefined

    python bench/experiments/tileir_open_numerics.py      (prints one block per case)

Run on an H100 (2026-12-07, `EXP=tileir_open_numerics.py bash bench/h200_run.sh OUT exp`):
mma_f16_acc and int_min_div agree with the simulator (2112; MIN and 0). max_zero: Tile IR
orders -0.0 below +0.0 in maxf/minf, in either order of the operands, where the simulator
returned the second: the simulator now does the same (sim/numerics.py `zero_ordered`, the
reductions in sim/tile/interpreter.py). tf32_ties: Tile IR rounds ties to even (0 and 4),
the simulator rounded them away (2 and 4): sim/narrow.py's `round_tf32` now rounds to even.
The reduce row here adds its results to +0.0, which hides a -0.0 (it printed +0.0 on both):
tests/test_tileir_numerics.py's `signed_zero_reduce` stores the reductions themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import fearless as fl
from fearless import tile


@tile.kernel
def mma_f16(z: tile.Part[fl.f16], a: tile.Tensor[fl.f16], b: tile.Tensor[fl.f16]):
    acc = tile.zeros((16, 16), fl.f16)
    acc = tile.mma(tile.load(a, (0, 0), (16, 64)), tile.load(b, (0, 0), (64, 16)), acc)
    z.store(acc)


@tile.kernel
def signed_zero(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    a, b = tile.load_like(x, z), tile.load_like(y, z)
    z.store(tile.where(tile.arange(8, fl.i32) < 4, tile.maximum(a, b), tile.minimum(a, b)))


@tile.kernel
def signed_zero_reduce(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load(x, (0,), (8,))
    z.store(tile.zeros((2,), fl.f32) + tile.where(tile.arange(2, fl.i32) == 0,
                                                   tile.max(v), tile.min(v)))  # fmt: skip


@tile.kernel
def tf32_mma(z: tile.Part[fl.f32], a: tile.Tensor[fl.f32], b: tile.Tensor[fl.f32]):
    acc = tile.zeros((16, 16), fl.f32)
    at = tile.load(a, (0, 0), (16, 16)).astype(fl.tf32)
    bt = tile.load(b, (0, 0), (16, 16)).astype(fl.tf32)
    z.store(tile.mma(at, bt, acc))


@tile.kernel
def int_min_div(q: tile.Part[fl.i32], r: tile.Part[fl.i32], x: tile.Tensor[fl.i32],
                y: tile.Tensor[fl.i32]):  # fmt: skip
    a, b = tile.load_like(x, q), tile.load_like(y, q)
    q.store(a // b)
    r.store(a % b)


def _mma_f16() -> Any:
    # row 0 of a: 1.0 at k = 0 (times 2048 in b), then 1.0 at k >= 1 times 1.0: the f32 sum is
    # 2048 + 63 = 2111 (rounded to f16: 2112); f16 partial sums stay at 2048 (ulp 2)
    a = np.zeros((16, 64), np.float16)
    a[0, :] = 1.0
    b = np.zeros((64, 16), np.float16)
    b[0, :] = 2048.0
    b[1:, :] = 1.0
    z = fl.empty((16, 16), dtype=fl.f16)
    with z.partition((16, 16)) as zp:
        mma_f16(zp, fl.asarray(a), fl.asarray(b))
    return z.numpy()[0, :4]


def _signed_zero() -> Any:
    x = np.array([0.0, -0.0, 0.0, -0.0] * 2, np.float32)
    y = np.array([-0.0, 0.0, 0.0, -0.0] * 2, np.float32)
    z = fl.empty(8, dtype=fl.f32)
    with z.partition((8,)) as zp:
        signed_zero(zp, fl.asarray(x), fl.asarray(y))
    return np.signbit(z.numpy())  # first 4: maximum, last 4: minimum


def _signed_zero_reduce() -> Any:
    x = np.array([-0.0, 0.0, -0.0, 0.0, 0.0, -0.0, 0.0, -0.0], np.float32)
    z = fl.empty(2, dtype=fl.f32)
    with z.partition((2,)) as zp:
        signed_zero_reduce(zp, fl.asarray(x))
    return np.signbit(z.numpy())  # max, min


def _tf32() -> Any:
    # 1 + 2^-11 is a tie between 1 and 1 + 2^-10 in tf32 (10 mantissa bits): away gives
    # 1 + 2^-10, nearest even gives 1; 1 + 3 * 2^-11 ties between 1 + 2^-10 and 1 + 2^-9,
    # where both give 1 + 2^-9 (a control)
    a = np.zeros((16, 16), np.float32)
    a[0, 0] = 1 + 2.0**-11
    a[1, 0] = 1 + 3 * 2.0**-11
    b = np.zeros((16, 16), np.float32)
    b[0, 0] = 1.0
    z = fl.empty((16, 16), dtype=fl.f32)
    with z.partition((16, 16)) as zp:
        tf32_mma(zp, fl.asarray(a), fl.asarray(b))
    return (z.numpy()[:2, 0] - 1) * 2**11  # in units of 2^-11


def _int_min_div() -> Any:
    x = np.array([-(2**31), -(2**31), 7, -7, -(2**31), 5, -5, 0], np.int32)
    y = np.array([-1, 1, -1, 2, 2, -3, 3, -1], np.int32)
    q, r = fl.empty(8, dtype=fl.i32), fl.empty(8, dtype=fl.i32)
    with q.partition((8,)) as qp, r.partition((8,)) as rp:
        int_min_div(qp, rp, fl.asarray(x), fl.asarray(y))
    return q.numpy(), r.numpy()


CASES: dict[str, Callable[[], Any]] = {
    "mma_f16_acc (f32 sum 2111 -> f16 2112; f16 partials: 2048)": _mma_f16,
    "max_zero elementwise (signbit: max of (+0,-0),(-0,+0),(+0,+0),(-0,-0); then min)": _signed_zero,
    "max_zero reduce (signbit of max, min)": _signed_zero_reduce,
    "tf32_ties (units of 2^-11; rna: 2, 4; rn: 0, 4)": _tf32,
    "int_min_div (q, r)": _int_min_div,
}


def main() -> None:
    targets = ["sim"] + (["cuda"] if fl.cuda_status()[0] else [])
    for name, body in CASES.items():
        print(f"== {name}")
        for target in targets:
            fl.set_target(target)
            try:
                got = body()
                fl.synchronize()
                print(f"  {target:5s} {got}")
            except Exception as e:  # a case that fails to compile says so and the rest go on
                print(f"  {target:5s} {type(e).__name__}: {str(e).splitlines()[0]}")
            finally:
                fl.set_target(None)


if __name__ == "__main__":
    main()
