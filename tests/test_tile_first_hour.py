"""What a new user of the Tile track met in the first hour (issue 33): the math functions and
their table, `tile.erf`, `math.*` folded on compile-time numbers, `float`/`int` parameters that
are weak, the store-shape and store-at-index errors, any `padding=` value, rounding modes by
name, and docs that said less than the code does (3-D transpose, 6-D partitions)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config, tile
from fearless.ir.tile import ops
from fearless.tile.api import KERNEL_FUNCTIONS
from fearless.tile.intrinsics import OPS

DOC = Path(__file__).resolve().parents[1] / "docs" / "tile.md"
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


def _error(kernel: Any, *args: Any) -> fl.FearlessError:
    with pytest.raises(fl.FearlessError) as info:
        kernel.inspect(*args, stage="ir")
    return info.value


# ----------------------------------------------------------------------- 1. math functions


def _math_table() -> set[str]:
    text = DOC.read_text()
    section = text.split("### Math functions", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`tile\.(\w+)\(", row.split("|")[1])}


def test_the_math_table_lists_every_elementwise_function_of_the_registry() -> None:
    listed = _math_table()
    assert listed <= set(KERNEL_FUNCTIONS), listed - set(KERNEL_FUNCTIONS)
    unary = {name for name, made in OPS.items() if ops.Unary in made}
    # bitwise_not is an integer operator's function form; randn is a random-number function
    math_like = (unary - {"bitwise_not", "randn"}) | {"erf", "atan2", "isnan", "pow"}
    assert math_like <= listed, math_like - listed


@tile.kernel
def erf_kernel(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.erf(tile.load_like(x, out)))


@tile.kernel
def erf_half(out: tile.Part[fl.f16], x: tile.Tensor[fl.f16]):
    out.store(tile.erf(tile.load_like(x, out)))


@tile.kernel
def erf_f64(out: tile.Part[fl.f64], x: tile.Tensor[fl.f64]):
    out.store(tile.erf(tile.load_like(x, out)))


def _erf_inputs() -> np.ndarray:
    tiny = np.geomspace(1e-30, 1e-2, 1024)
    xs = np.concatenate([np.linspace(-6, 6, 1 << 15), tiny, -tiny, [0.0, -0.0, 4.0, -4.0]])
    return xs.astype(np.float32)


def test_erf_is_accurate_to_f32_on_the_simulator() -> None:
    xs = _erf_inputs()
    yp = fl.empty(xs.shape).partition((1024,))
    erf_kernel(yp, fl.asarray(xs))
    got = yp.unpartition().numpy().astype(np.float64)
    want = np.array([math.erf(float(v)) for v in xs])
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-38)
    assert rel.max() < 1e-6, (rel.max(), xs[rel.argmax()])
    assert np.array_equal(np.signbit(got[want == 0]), np.signbit(xs[want == 0]))  # erf(-0) = -0


def test_erf_of_inf_and_nan_and_half_tiles() -> None:
    xs = np.array([np.inf, -np.inf, np.nan, 1.0], np.float32)
    yp = fl.empty(4).partition((4,))
    erf_kernel(yp, fl.asarray(xs))
    got = yp.unpartition().numpy()
    assert got[:2].tolist() == [1.0, -1.0] and np.isnan(got[2])
    h = np.linspace(-3, 3, 64).astype(np.float16)
    hp = fl.empty(64, dtype=fl.f16).partition((64,))
    erf_half(hp, fl.asarray(h))
    want = np.array([math.erf(float(v)) for v in h])
    np.testing.assert_allclose(hp.unpartition().numpy().astype(np.float64), want, atol=1e-3)
    err = _error(erf_f64, fl.empty(8, dtype=fl.f64).partition((8,)), fl.zeros(8, dtype=fl.f64))
    assert "`tile.erf` is for f32, f16 and bf16 tiles" in str(err) and "astype" in str(err)


def test_erf_compiles_through_tileiras(cubin: Callable[..., bytes]) -> None:
    assert cubin(erf_kernel, fl.zeros(1024).partition((256,)), fl.zeros(1024))
    assert cubin(erf_half, fl.zeros(256, dtype=fl.f16).partition((256,)), fl.zeros(256, fl.f16))


@tile.kernel
def misspelt(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.sigmod(tile.load_like(x, out)))


@tile.kernel
def numpy_name(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.arctan2(tile.load_like(x, out), 1.0))


@tile.kernel
def unheard_of(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.logsumexp(tile.load_like(x, out)))


def test_an_unknown_tile_function_suggests_the_known_ones() -> None:
    args = (fl.empty(8).partition((8,)), fl.zeros(8))
    err = _error(misspelt, *args)
    assert err.diagnostic.code == "E0433"
    assert "did you mean `tile.sigmoid`" in str(err)
    assert "`tile.order`" not in str(err)  # a module of the package, not a function
    assert "fearless calls it `tile.atan2`" in str(_error(numpy_name, *args))
    assert "docs/tile.md lists the tile functions" in str(_error(unheard_of, *args))


# ------------------------------------------------------------------------- 2. math.* folded

SCALE = 0.5  # a module constant


@tile.kernel
def gelu_tanh(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], C: tile.Const[float]):
    v = tile.load_like(x, out)
    c = math.sqrt(2 / math.pi)
    inner = c * (v + 0.044715 * v * v * v)
    out.store(SCALE * v * (1.0 + math.tanh(inner)) * math.exp(C) * math.floor(1.5))


def test_math_on_compile_time_numbers_is_folded_and_on_tiles_is_the_tile_function() -> None:
    xs = np.linspace(-3, 3, 256).astype(np.float32)
    args = (fl.empty(256).partition((64,)), fl.asarray(xs), 0.25)
    ir = gelu_tanh.inspect(*args, stage="ir")
    assert "sqrt" not in ir and "'exp'" not in ir  # folded: literals in the IR
    assert "kind='tanh'" in ir  # math.tanh of a tile is tile.tanh
    yp = fl.empty(256).partition((64,))
    gelu_tanh(yp, fl.asarray(xs), 0.25)
    x64 = xs.astype(np.float64)
    want = 0.5 * x64 * (1 + np.tanh(SQRT_2_OVER_PI * (x64 + 0.044715 * x64**3))) * math.exp(0.25)
    np.testing.assert_allclose(yp.unpartition().numpy(), want, rtol=1e-5, atol=1e-6)


@tile.kernel
def math_domain(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out) * math.sqrt(-1.0))


def test_a_math_function_that_fails_on_its_numbers_fails_the_compile() -> None:
    err = _error(math_domain, fl.empty(8).partition((8,)), fl.zeros(8))
    assert "`math.sqrt(-1.0)` fails when the kernel compiles: math domain error" in str(err)
    assert err.loc is not None and err.loc.file == __file__


# ---------------------------------------------------------------- 3. weak `float` / `int`


@tile.kernel
def scale_float(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], alpha: float):
    out.store(alpha * tile.load_like(x, out) + (alpha - 1.0))


@tile.kernel
def scale_int(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32], n: int):
    out.store(n * tile.load_like(x, out) + n // 2)


@tile.kernel
def int_times_half(out: tile.Part[fl.f16], x: tile.Tensor[fl.f16], n: int):
    out.store(tile.load_like(x, out) * n)


def test_a_float_parameter_takes_the_tiles_dtype() -> None:
    xs = np.linspace(-2, 2, 256).astype(np.float32)
    args = (fl.empty(256).partition((64,)), fl.asarray(xs), 0.1)
    ir = scale_float.inspect(*args, stage="ir")
    assert "%alpha: tile<f64>" in ir and "tile.cast %alpha {dtype='f32'}" in ir
    assert "xf64" not in ir  # no f64 tile: the arithmetic is f32
    yp = fl.empty(256).partition((64,))
    scale_float(yp, fl.asarray(xs), 0.1)
    a = np.float32(0.1)
    want = a * xs + np.float32(np.float64(0.1) - 1.0)  # alpha - 1.0 is weak: Python's f64
    assert np.array_equal(yp.unpartition().numpy(), want)


def test_an_int_parameter_takes_the_tiles_dtype() -> None:
    xs = np.arange(-128, 128, dtype=np.int32)
    yp = fl.empty(256, dtype=fl.i32).partition((64,))
    scale_int(yp, fl.asarray(xs), 7)
    assert np.array_equal(yp.unpartition().numpy(), 7 * xs + 3)
    h = np.linspace(-1, 1, 64).astype(np.float16)
    hp = fl.empty(64, dtype=fl.f16).partition((64,))
    int_times_half(hp, fl.asarray(h), 3)  # an int takes a float dtype too, as in Python
    assert np.array_equal(hp.unpartition().numpy(), h * np.float16(3))


def test_weak_parameters_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    assert cubin(scale_float, fl.zeros(256).partition((64,)), fl.zeros(256), 0.5)
    assert cubin(scale_int, fl.zeros(256, fl.i32).partition((64,)), fl.zeros(256, fl.i32), 2)


# ------------------------------------------------------------------------- 4. store shapes


@tile.kernel
def store_too_big(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.load(x, (0,), (128,)))


def test_a_store_of_the_wrong_shape_names_the_part_and_the_fixes() -> None:
    err = _error(store_too_big, fl.empty(256).partition((64,)), fl.zeros(256))
    text = str(err)
    assert "cannot store a tile of shape (128,) into `out`, whose tiles are (64,)" in text
    assert "`.partition((128,))`" in text and "tile.extract(v, (0,), (64,))" in text
    assert "keepdims" not in text


# ------------------------------------------------------------------------- 5. any padding


@tile.kernel
def pad_minus_one(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out, padding=-1))


@tile.kernel
def pad_2d(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], p: fl.f32):
    i, j = out.index
    a = tile.load(x, (i, j), out.shape, padding=7.5)
    b = tile.load(x, (j, i), (out.shape[1], out.shape[0]), padding=p, order=(1, 0))
    out.store(a + tile.transpose(b))


@tile.kernel
def pad_int(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
    out.store(tile.load_like(x, out, padding=-1))


@tile.kernel
def pad_u8(out: tile.Part[fl.u8], x: tile.Tensor[fl.u8]):
    out.store(tile.load_like(x, out, padding=-1))


def _padded(xs: np.ndarray, shape: tuple[int, ...], fill: float) -> np.ndarray:
    out = np.full(shape, fill, xs.dtype)
    out[tuple(slice(0, d) for d in xs.shape)] = xs
    return out


def test_padding_minus_one_fills_the_edge_tiles() -> None:
    xs = np.arange(1, 101, dtype=np.float32)
    out = fl.full(128, np.nan).partition((32,))  # x's last tile has 4 elements inside
    pad_minus_one(out, fl.asarray(xs))
    got = out.unpartition().numpy()
    assert np.array_equal(got[:100], xs) and (got[100:] == -1).all()
    part = fl.full(90, np.nan).partition((32,))  # an edge tile of the output too
    pad_minus_one(part, fl.asarray(xs))
    assert np.array_equal(part.unpartition().numpy(), xs[:90])


def test_padding_of_a_2d_and_a_transposed_load() -> None:
    xs = np.arange(20 * 20, dtype=np.float32).reshape(20, 20)
    out = fl.empty((32, 32)).partition((16, 16))
    big = fl.asarray(xs)
    pad_2d(out, big, -2.0)
    got = out.unpartition().numpy()
    want = _padded(xs, (32, 32), 7.5) + _padded(xs, (32, 32), -2.0)
    assert np.array_equal(got, want)


def test_padding_of_integer_tensors() -> None:
    xs = np.arange(10, dtype=np.int32)
    out = fl.empty(16, dtype=fl.i32).partition((16,))
    pad_int(out, fl.asarray(xs))
    assert out.unpartition().numpy().tolist() == [*range(10), *[-1] * 6]
    err = _error(pad_u8, fl.empty(16, dtype=fl.u8).partition((16,)), fl.zeros(16, dtype=fl.u8))
    assert "-1" in str(err) and "u8" in str(err)


def test_emulated_padding_compiles_through_tileiras(cubin: Callable[..., bytes]) -> None:
    assert cubin(pad_minus_one, fl.zeros(100).partition((32,)), fl.zeros(100))
    assert cubin(pad_2d, fl.zeros((20, 20)).partition((16, 16)), fl.zeros((20, 20)), 1.0)
    assert cubin(pad_int, fl.zeros(10, fl.i32).partition((16,)), fl.zeros(10, fl.i32))


def test_gpu_padding_erf_and_weak_parameters_match_the_simulator(
    sim_and_gpu: Callable[..., Any],
) -> None:
    xs = np.random.default_rng(0).standard_normal((20, 20)).astype(np.float32)

    def run() -> tuple[np.ndarray, ...]:
        a = fl.empty((32, 32)).partition((16, 16))
        pad_2d(a, fl.asarray(xs), -2.0)
        b = fl.full(128, np.nan).partition((32,))
        pad_minus_one(b, fl.asarray(xs.ravel()[:90]))
        e = fl.empty(400).partition((128,))
        erf_kernel(e, fl.asarray(xs.ravel()))
        s = fl.empty(400).partition((128,))
        scale_float(s, fl.asarray(xs.ravel()), 0.1)
        return tuple(p.unpartition().numpy() for p in (a, b, e, s))

    sim, gpu = sim_and_gpu(run)
    for s, g in zip(sim[:2], gpu[:2], strict=True):
        assert np.array_equal(s, g, equal_nan=True)
    np.testing.assert_allclose(gpu[2], sim[2], rtol=2e-6, atol=1e-7)  # the GPU's fma may differ
    np.testing.assert_allclose(gpu[3], sim[3], rtol=1e-6)


# ----------------------------------------------------------------- 6. rounding mode names


@tile.kernel
def divide(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], MODE: tile.Const[int]):
    v = tile.load_like(x, out)
    if MODE == 0:
        out.store(tile.truediv(1.0, v, rounding_mode="approx"))
    elif MODE == 1:
        out.store(tile.truediv(1.0, v, rounding_mode="FULL"))
    else:
        out.store(tile.truediv(1.0, v, rounding_mode="Nearest_Even"))


def test_rounding_modes_by_name() -> None:
    xs = np.linspace(1, 4, 64).astype(np.float32)
    for mode, rounding in ((0, "approx"), (1, "full"), (2, None)):
        args = (fl.empty(64).partition((64,)), fl.asarray(xs), mode)
        ir = divide.inspect(*args, stage="ir")
        assert (f"rounding='{rounding}'" in ir) if rounding else "rounding" not in ir
        divide(*args)
        assert np.array_equal(args[0].unpartition().numpy(), np.float32(1) / xs)


def test_rounding_mode_names_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    assert cubin(divide, fl.zeros(64).partition((64,)), fl.zeros(64), 0)


# ----------------------------------------------------------------------- 7. store at an index


@tile.kernel
def cutile_store(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    tile.store(out, index=(0,), tile=tile.load_like(x, out))


@tile.kernel
def store_with_index(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out), index=(0,))


def test_a_store_at_an_index_names_the_safe_forms() -> None:
    args = (fl.empty(8).partition((8,)), fl.zeros(8))
    for kernel in (cutile_store, store_with_index):
        text = str(_error(kernel, *args))
        assert "tile.order" not in text
        for form in ("out.chunks(shape)", "out.tiles()", "tile.scatter", "tile.Atomic"):
            assert form in text, (kernel, form)


# --------------------------------------------------------------------- 8. what the docs said


@tile.kernel
def reverse_axes(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load(x, (0, 0, 0), (2, 4, 8))
    out.store(tile.transpose(v) + v.T)


@tile.kernel
def scale6(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    i0, i1, i2, i3, i4, i5 = out.index  # each 0 or 1 here: the tile's number in binary
    digits = ((((i0 * 2 + i1) * 2 + i2) * 2 + i3) * 2 + i4) * 2 + i5
    out.store(tile.load_like(x, out) + digits.astype(fl.f32) * 1024.0)


def test_transpose_without_axes_reverses_every_axis() -> None:
    xs = np.arange(64, dtype=np.float32).reshape(2, 4, 8)
    out = fl.empty((8, 4, 2)).partition((8, 4, 2))
    reverse_axes(out, fl.asarray(xs))
    assert np.array_equal(out.unpartition().numpy(), 2 * xs.transpose())


def test_a_6d_partition(cubin: Callable[..., bytes]) -> None:
    shape, tile_shape = (2, 3, 2, 3, 4, 6), (1, 2, 1, 2, 4, 4)
    xs = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    part = fl.full(shape, np.nan).partition(tile_shape)
    scale6(part, fl.asarray(xs))
    idx = np.indices(shape)
    digits = sum(2 ** (5 - a) * (idx[a] // tile_shape[a]) for a in range(6))
    assert np.array_equal(part.unpartition().numpy(), xs + digits * 1024.0)
    assert cubin(scale6, fl.zeros(shape).partition(tile_shape), fl.zeros(shape))
