"""cuTile Python's `ct.ones`, `ct.extract`, `ct.bitcast` and `ct.static_assert` (TileGym's
mamba2, splitk_reduce and moe kernels call them), and its tan, sinh, cosh, atan2, isnan,
negative, bitwise_not, matmul, bid and comparison functions: the simulator against NumPy, the
bytecode through tileiras, the mistakes at their lines, and the GPU against the simulator."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import tile


def _line(fn, marker: str) -> int:  # type: ignore[no-untyped-def]
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


@tile.kernel
def last_column_plus_one(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """Each row's last element (mamba2's `ct.extract(d, (CH - 1,), (1,))`, per row) plus a
    tile of ones; also the middle (16, 16) block of the (16, 64) tile, summed per row."""
    v = tile.load(x, (0, 0), (16, 64))
    last = tile.extract(v, (0, 63), (16, 1)).reshape((16,))
    middle = tile.sum(tile.extract(v, (0, 1), (16, 16)), axis=1)
    out.store(last + middle + tile.ones((16,), fl.f32))


@tile.kernel
def float_bits(out: tile.Part[fl.i32], back: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """f32 -> i32 bits (sign, exponent and mantissa fields) and back."""
    v = tile.load_like(x, out)
    bits = tile.bitcast(v, fl.i32)
    out.store(bits)
    back.store(tile.bitcast(bits, fl.f32))


@tile.kernel
def checked_tile(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], BM: tile.Const[int]):
    tile.static_assert(BM % 16 == 0, "BM must be a multiple of 16")  # here: assert
    tile.static_assert(x.dtype == fl.f32)
    out.store(tile.load_like(x, out))


@tile.kernel
def halves(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """Static slices of a tile: a column window, a row (its axis dropped), negative indices."""
    v = tile.load(x, (0, 0), (16, 64))
    out.store(v[:, 32:64] + v[3, 0:32] + v[-1][-32:] * 0.5)


@tile.kernel
def function_forms(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
    """cuTile's function forms of the operators, `ct.cat` and the `.extract` method."""
    v = tile.load(x, (0,), (16,))
    a = tile.add(tile.mul(v, 3), tile.sub(v, 1))  # 4v - 1
    b = tile.floordiv(a, 5) + tile.mod(a, 5) + tile.pow(v, 2)
    c = tile.bitwise_rshift(tile.bitwise_lshift(v, 4), 2)  # 4v
    both = tile.cat((b, c), 0)  # (32,)
    out.store(both.extract((1,), (16,)) + both.extract((0,), (16,)))


@tile.kernel
def more_math(
    out: tile.Part[fl.f32], flags: tile.Part[fl.i32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]
):
    """cuTile's tan, sinh, cosh, atan2, negative and isnan, and the comparison function forms
    (as bits of an i32), on 16 elements."""
    a, b = tile.load_like(x, out), tile.load_like(y, out)
    out.store(tile.tan(a) + tile.sinh(a) * tile.cosh(b) + tile.atan2(a, b) + tile.negative(b))
    bits = tile.where(tile.isnan(a / b), 1, 0)
    bits = bits + tile.where(tile.equal(a, b), 2, 0) + tile.where(tile.not_equal(a, b), 4, 0)
    bits = bits + tile.where(tile.less(a, b), 8, 0) + tile.where(tile.less_equal(a, b), 16, 0)
    bits = bits + tile.where(tile.greater(a, b), 32, 0)
    flags.store(bits + tile.where(tile.greater_equal(a, b), 64, 0))


@tile.kernel
def ints_and_products(out: tile.Part[fl.i32], mm: tile.Part[fl.f32], x: tile.Tensor[fl.i32]):
    """`tile.bitwise_not` of ints, `tile.isnan` of ints (all False), `tile.matmul`, `tile.bid`."""
    v = tile.load_like(x, out)
    out.store(tile.bitwise_not(v) + tile.where(tile.isnan(v), 100, 0) + tile.bid(0))
    e = tile.ones((16, 16), fl.f16) * 0.5
    mm.store(tile.matmul(e, e).astype(fl.f32))


@tile.kernel
def unrolled(
    out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32], PIECES: tile.Const[int]
):
    """`tile.static_iter` over a range (each piece a compile-time index and weight) and over a
    tuple of tensors."""
    (BN,) = out.shape
    acc = tile.zeros((BN,), fl.f32)
    for p in tile.static_iter(range(PIECES)):
        acc = acc + tile.load(x, (p,), (BN,)) * (p + 1)
    for t in tile.static_iter((x, y)):
        acc = acc + tile.load_like(t, out)
    out.store(acc)


INTS = np.arange(-8, 8, dtype=np.int32)
X = np.random.default_rng(11).standard_normal((16, 64)).astype(np.float32)
BITS = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, 1e-40, 3.4e38], np.float32)


def test_extract_and_ones() -> None:
    out = fl.empty(16).partition((16,))
    last_column_plus_one(out, fl.asarray(X))
    want = X[:, 63] + X[:, 16:32].sum(axis=1) + 1.0
    np.testing.assert_allclose(out.unpartition().numpy(), want, rtol=1e-5, atol=1e-5)


def test_static_slices_of_tiles() -> None:
    out = fl.empty((16, 32)).partition((16, 32))
    halves(out, fl.asarray(X))
    want = X[:, 32:64] + X[3, 0:32] + X[-1, -32:] * 0.5
    np.testing.assert_allclose(out.unpartition().numpy(), want, rtol=1e-6)


def test_function_forms_cat_and_the_extract_method() -> None:
    out = fl.empty(16, dtype=fl.i32).partition((16,))
    function_forms(out, fl.asarray(INTS))
    a = 4 * INTS.astype(np.int64) - 1
    want = (a // 5 + a % 5 + INTS.astype(np.int64) ** 2) + 4 * INTS
    assert out.unpartition().numpy().tolist() == want.tolist()


A = np.array(
    [0.3, -1.2, 2.0, 0.0, 1.5, -0.5, 0.7, 1.0, -2.0, 0.1, 0.0, 3.0, -1.0, 0.4, 1.1, -0.9],
    np.float32,
)
B = np.array(
    [0.5, 0.5, 2.0, 0.0, -1.0, 1.5, 0.7, 2.0, 1.0, -0.3, 1.0, 3.0, 1.0, 0.2, 0.9, -0.1], np.float32
)


def test_more_math_and_the_comparison_forms() -> None:
    out, flags = fl.empty(16).partition((16,)), fl.empty(16, dtype=fl.i32).partition((16,))
    more_math(out, flags, fl.asarray(A), fl.asarray(B))
    want = np.tan(A) + np.sinh(A) * np.cosh(B) + np.arctan2(A, B) - B
    np.testing.assert_allclose(out.unpartition().numpy(), want, rtol=1e-5, atol=1e-6)
    with np.errstate(all="ignore"):
        nan = np.isnan(A / B)
    want_bits = (
        nan * 1 + (A == B) * 2 + (A != B) * 4 + (A < B) * 8 + (A <= B) * 16 + (A > B) * 32
        + (A >= B) * 64
    )  # fmt: skip
    assert flags.unpartition().numpy().tolist() == want_bits.tolist()


def test_bitwise_not_isnan_of_ints_matmul_and_bid() -> None:
    out, mm = fl.empty(16, dtype=fl.i32).partition((16,)), fl.empty((16, 16)).partition((16, 16))
    ints_and_products(out, mm, fl.asarray(INTS))
    assert out.unpartition().numpy().tolist() == (~INTS).tolist()
    assert np.array_equal(mm.unpartition().numpy(), np.full((16, 16), 4.0, np.float32))


def test_static_iter_unrolls_ranges_and_tuples() -> None:
    x, y = np.arange(64, dtype=np.float32), np.arange(64, dtype=np.float32)[::-1].copy()
    out = fl.empty(16).partition((16,))
    unrolled(out, fl.asarray(x), fl.asarray(y), 4)
    want = sum(x[16 * p : 16 * p + 16] * (p + 1) for p in range(4)) + x[:16] + y[:16]
    assert np.array_equal(out.unpartition().numpy(), want)
    from fearless.ir.tile.printer import print_function
    from fearless.runtime.target import current_target

    args = (fl.empty(16).partition((16,)), fl.asarray(x), fl.asarray(y), 4)
    sig, _ = unrolled.signature_of(args, current_target())
    text = print_function(unrolled.ir_for(sig).fn)
    assert "tile.for" not in text and text.count("tile.load") == 6  # 4 + 2 copies of the body


def test_bitcast_keeps_the_bits() -> None:
    out = fl.empty(8, dtype=fl.i32).partition((8,))
    back = fl.empty(8).partition((8,))
    float_bits(out, back, fl.asarray(BITS))
    assert out.unpartition().numpy().tolist() == BITS.view(np.int32).tolist()
    assert back.unpartition().numpy().view(np.int32).tolist() == BITS.view(np.int32).tolist()


def test_static_assert() -> None:
    out = fl.empty(32).partition((16,))
    checked_tile(out, fl.zeros(32), 16)
    with pytest.raises(
        fl.CompileError, match="static assertion failed: BM must be a multiple"
    ) as info:
        checked_tile(fl.empty(32).partition((16,)), fl.zeros(32), 8)
    loc = info.value.loc
    assert loc is not None and loc.line == _line(checked_tile.func, "here: assert")


def test_the_new_ops_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    assert cubin(last_column_plus_one, fl.empty(16).partition((16,)), fl.asarray(X))
    assert cubin(halves, fl.empty((16, 32)).partition((16, 32)), fl.asarray(X))
    ints = fl.asarray(INTS)
    assert cubin(function_forms, fl.empty(16, dtype=fl.i32).partition((16,)), ints)
    assert cubin(
        float_bits,
        fl.empty(8, dtype=fl.i32).partition((8,)),
        fl.empty(8).partition((8,)),
        fl.asarray(BITS),
    )
    assert cubin(unrolled, fl.empty(16).partition((16,)), fl.asarray(X[0]), fl.asarray(X[1]), 4)
    a, b = fl.asarray(A), fl.asarray(B)
    assert cubin(
        more_math, fl.empty(16).partition((16,)), fl.empty(16, dtype=fl.i32).partition((16,)), a, b
    )
    assert cubin(
        ints_and_products,
        fl.empty(16, dtype=fl.i32).partition((16,)),
        fl.empty((16, 16)).partition((16, 16)),
        ints,
    )


def _launch_with(statement: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Launch a kernel, written to a file, whose line 7 is `statement` (after `v`, a (16, 64)
    tile of x)."""
    src = tmp_path / "k.py"
    src.write_text(
        "import fearless as fl\nfrom fearless import tile\n\n@tile.kernel\n"
        "def k(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):\n"
        "    v = tile.load(x, (0, 0), (16, 64))\n"
        f"    {statement}\n"
        "    out.store(tile.zeros((16,), fl.f32))\n"
    )
    namespace: dict = {}
    exec(compile(src.read_text(), str(src), "exec"), namespace)
    namespace["k"](fl.empty(16).partition((16,)), fl.asarray(X))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("tile.extract(v, (0, 4), (16, 16))", r"index \(0, 4\) is outside the \(16, 64\) tile"),
        ("tile.extract(v, (0, 0), (16, 48))", "tile dimensions must be powers of two"),
        ("tile.extract(v, (0,), (16,))", "needs a 2-d index and shape"),
        ("tile.bitcast(v, fl.f16)", "cannot bitcast f32 to f16: a bitcast keeps the width"),
        ("tile.static_assert(tile.sum(v) > 0)", "needs a condition known at compile time"),
        ("v[:, 0:48]", r"cannot take \[0:48\] of axis 1 of a \(16, 64\) tile"),
        ("v[:, 16:48]", r"cannot take \[16:48\] of axis 1"),
        ("v[0, 0, 0]", "too many indices for a 2-d tile"),
        ("tile.cat((v, v[:, 0:32]), 0)", r"cannot concatenate a .* along axis 0"),
        ("tile.cat((v, v[:, 0:32]), 1)", "tile dimensions must be powers of two"),
        ("tile.atan2(v.astype(fl.i32), v.astype(fl.i32))", "`tile.atan2` takes float tiles"),
        ("tile.bitwise_not(v)", "`tile.bitwise_not` flips the bits of integer or bool tiles"),
        ("tile.tan(v.astype(fl.i32))", "`tile.tan` needs a float tile"),
        (
            "tile.static_iter((v, v))",
            r"`tile.static_iter\(...\)` is only the iterable of a `for`",
        ),
    ],
)
def test_mistakes_are_clear(body: str, message: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((fl.CompileError, fl.KernelTypeError), match=message) as info:
        _launch_with(f"r = {body}", tmp_path)
    loc = info.value.loc
    assert loc is not None and loc.line == 7


@pytest.mark.gpu
def test_gpu_extract_and_bitcast_match_the_simulator(sim_and_gpu: Callable[..., Any]) -> None:
    def run() -> list[np.ndarray]:
        a = fl.empty(16).partition((16,))
        last_column_plus_one(a, fl.asarray(X))
        b, c = fl.empty(8, dtype=fl.i32).partition((8,)), fl.empty(8).partition((8,))
        float_bits(b, c, fl.asarray(BITS))
        h = fl.empty((16, 32)).partition((16, 32))
        halves(h, fl.asarray(X))
        m, f = fl.empty(16).partition((16,)), fl.empty(16, dtype=fl.i32).partition((16,))
        more_math(m, f, fl.asarray(A), fl.asarray(B))
        return [p.unpartition().numpy() for p in (a, b, c, h, m, f)]

    sim, gpu = sim_and_gpu(run)
    np.testing.assert_allclose(gpu[0], sim[0], rtol=1e-5, atol=1e-5)
    assert np.array_equal(gpu[1], sim[1])
    assert np.array_equal(gpu[2].view(np.int32), sim[2].view(np.int32))
    np.testing.assert_allclose(gpu[3], sim[3], rtol=1e-6)
    np.testing.assert_allclose(gpu[4], sim[4], rtol=1e-5, atol=1e-5)  # tan, sinh, cosh, atan2
    assert np.array_equal(gpu[5], sim[5])


@pytest.mark.parametrize(
    ("loop", "message"),
    [
        (
            "for i in tile.static_iter(range(4)):\n        break",
            "`break` inside a `tile.static_iter` loop",
        ),
        (
            "for i in tile.static_iter(range(x.shape[0])):\n        pass",
            "needs bounds known at compile time",
        ),
        ("for i in tile.static_iter(v):\n        pass", "iterates over `range"),
    ],
)
def test_static_iter_mistakes(loop: str, message: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(fl.CompileError, match=message) as info:
        _launch_with(loop, tmp_path)
    assert info.value.loc is not None and info.value.loc.line in (7, 8)
