"""cuTile Python's samples ported to fearless (examples/cutile_samples.py), and `tile.load(...,
order=axes)`, the transposed load the FMHA sample needs (issue 11).

Each port runs on the simulator against NumPy at small shapes (tiles shrunk to match) and
compiles through tileiras to a cubin (skipped without tileiras). A load with `order` reads
tile axis d along the tensor's axis order[d]: checked against NumPy's transpose of the window,
partial tiles included, on the simulator, and as the partition view's dim_map in the bytecode.
tests/gpu/test_cutile_samples_gpu.py runs the ports at the samples' shapes on the GPU."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import cutile_samples as cs
import numpy as np
import pytest

import fearless as fl
from fearless import config, tile
from fearless.errors import PaddedReductionWarning
from support.cutile_samples_refs import (
    attention_reference,
    layer_norm_bwd_reference,
    layer_norm_reference,
    load_3d,
    load_t,
)


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


RNG = np.random.default_rng(11)


def _f16(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float16)


# ---------------------------------------------------------------- the ports, on the simulator


@pytest.mark.parametrize("use_gather", [False, True])
@pytest.mark.parametrize("shape", [(1000,), (5000,), (50, 70), (3, 1500)])
def test_vector_addition(shape: tuple[int, ...], use_gather: bool) -> None:
    """Partial last tiles: the tiled kernels pad and drop, the gather kernels read zeros and
    drop the scatter's elements past the end."""
    a = RNG.standard_normal(shape).astype(np.float32)
    b = RNG.standard_normal(shape).astype(np.float32)
    assert np.array_equal(cs.vec_add(a, b, use_gather=use_gather).numpy(), a + b)


@pytest.mark.parametrize("persistent", [False, True])
def test_matmul_f16_partial_tiles(persistent: bool) -> None:
    """Tiles of (32, 32, 16) over 100 x 72 @ 72 x 90: partial tiles on every axis, 4 x 3 tiles
    in groups of 8 rows; the persistent launch has 4 blocks on the simulator."""
    a, b = _f16(100, 72), _f16(72, 90)
    c = cs.matmul(a, b, persistent=persistent, tiles=(32, 32, 16)).numpy().astype(np.float32)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c, want, rtol=1e-2, atol=2e-2)


def test_matmul_f32_with_the_samples_tiles() -> None:
    a = RNG.standard_normal((70, 40)).astype(np.float32)
    b = RNG.standard_normal((40, 50)).astype(np.float32)
    assert cs.matmul_tiles(fl.f32) == (32, 32, 32) and cs.matmul_tiles(fl.f16) == (128, 256, 64)
    got, want = cs.matmul(a, b).numpy(), a.astype(np.float64) @ b
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert 1e-5 < rel < 2e-3  # tf32 products, as the sample's: rounded, not f32-exact

    def tf32(x: np.ndarray) -> np.ndarray:  # a 10-bit mantissa, ties to even (Tile IR's ftof)
        u = x.view(np.uint32)
        return ((u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000).view(np.float32)

    np.testing.assert_allclose(got, tf32(a) @ tf32(b), rtol=1e-5, atol=1e-5)


def test_batch_matmul_fp8_into_f32() -> None:
    """The sample's second case: float8_e4m3fn operands, f32 out, exact f32 sums of the fp8
    products (each product of two e4m3 values is exact in f32)."""
    import ml_dtypes

    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 64, 32)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((2, 32, 48)).astype(ml_dtypes.float8_e4m3fn)
    c = cs.batch_matmul(fl.asarray(a), fl.asarray(b), out_dtype=fl.f32, tiles=(16, 16, 16))
    assert c.dtype == fl.f32
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-6, atol=1e-5)


def test_batch_matmul() -> None:
    a, b = _f16(3, 40, 24), _f16(3, 24, 36)
    c = cs.batch_matmul(a, b, tiles=(16, 32, 16)).numpy().astype(np.float32)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=2e-2)
    c32 = cs.batch_matmul(a, b, out_dtype=fl.f32, tiles=(16, 32, 16)).numpy()
    assert c32.dtype == np.float32
    np.testing.assert_allclose(
        c32, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3
    )


@pytest.mark.parametrize("by_order", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_transpose(by_order: bool, dtype: type) -> None:
    x = RNG.standard_normal((100, 70)).astype(dtype)  # partial tiles both ways
    assert np.array_equal(cs.cutile_transpose(x, by_order=by_order).numpy(), x.T)


def test_layer_norm_forward() -> None:
    """Rows of 300 in chunks of 128 (a partial last chunk), f32; the mean and rstd too."""
    x = (-2.3 + 0.5 * RNG.standard_normal((6, 300))).astype(np.float32)
    w, b = RNG.standard_normal(300).astype(np.float32), RNG.standard_normal(300).astype(np.float32)
    y, mean, rstd = cs.layer_norm_fwd(x, w, b, 1e-5, tile_n=128)
    want, want_mean, want_rstd = layer_norm_reference(x, w, b, 1e-5)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mean.numpy(), want_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd.numpy(), want_rstd, rtol=1e-4)


@pytest.mark.parametrize(("m", "n", "tile_n"), [(150, 300, 128), (64, 1000, 256)])
def test_layer_norm_backward(m: int, n: int, tile_n: int) -> None:
    """The backward against float64: dX per row, dW and dB summed through the partial rows."""
    x, dy = (
        RNG.standard_normal((m, n)).astype(np.float32),
        RNG.standard_normal((m, n)).astype(np.float32),
    )
    w, b = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    _, mean, rstd = cs.layer_norm_fwd(x, w, b, 1e-5, tile_n=tile_n)
    dx, dw, db = cs.layer_norm_bwd(dy, x, w, mean, rstd, group=16, tile_n=tile_n, tile_m=8)
    want_dx, want_dw, want_db = layer_norm_bwd_reference(dy, x, w, 1e-5)
    np.testing.assert_allclose(dx.numpy(), want_dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw.numpy(), want_dw, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(db.numpy(), want_db, rtol=1e-4, atol=1e-3)


def test_layer_norm_forward_bf16() -> None:
    x = fl.asarray(RNG.standard_normal((4, 96)).astype(np.float32)).astype(fl.bf16)
    w = fl.asarray(RNG.standard_normal(96).astype(np.float32)).astype(fl.bf16)
    b = fl.asarray(RNG.standard_normal(96).astype(np.float32)).astype(fl.bf16)
    xs, ws, bs = (t.astype(fl.f32).numpy() for t in (x, w, b))
    y, _, _ = cs.layer_norm_fwd(x, w, b, 1e-5, tile_n=32)
    want, _, _ = layer_norm_reference(xs, ws, bs, 1e-5)
    np.testing.assert_allclose(y.astype(fl.f32).numpy(), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize(
    ("causal", "seq_kv", "input_pos", "group"),
    [(False, 64, 0, 1), (False, 50, 0, 2), (True, 40, 0, 1), (True, 50, 8, 2)],
)
def test_fmha(causal: bool, seq_kv: int, input_pos: int, group: int) -> None:
    """Even and uneven key lengths (the EVEN_K mask), causal with queries from `input_pos`,
    grouped-query attention (2 query heads per KV head)."""
    q, k, v = _f16(2, 4, 40, 16), _f16(2, 4 // group, seq_kv, 16), _f16(2, 4 // group, seq_kv, 16)
    out = cs.fmha(q, k, v, input_pos=input_pos, tile_m=16, tile_n=16, query_group_size=group,
                  causal=causal).numpy()  # fmt: skip
    want = attention_reference(q, k, v, 1 / math.sqrt(16), causal, input_pos)
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=1e-2, atol=1e-2)


def test_fmha_refuses_mismatched_heads() -> None:
    with pytest.raises(ValueError, match="query_group_size"):
        cs.fmha(_f16(1, 4, 16, 16), _f16(1, 3, 16, 16), _f16(1, 3, 16, 16))


# ------------------------------------------------------------- the ports, through tileiras


def test_the_ports_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    """Every port, with the samples' tiles where they are cheap to compile (the bigger GEMM
    tiles compile on the GPU machine, in tests/gpu/)."""
    f16, z = fl.f16, fl.zeros
    q = z((2, 8, 128, 64), dtype=f16)
    x, w = z((4, 2048), dtype=fl.bf16), z(2048, dtype=fl.bf16)
    mm = (
        z((96, 96), dtype=f16).partition((64, 64), order=tile.grouped(8)),
        z((96, 64), dtype=f16),
        z((64, 96), dtype=f16),
        32,
    )
    for kernel, args in (
        (cs.vec_add_1d, (z(1000).partition((1024,)), z(1000), z(1000))),
        (cs.vec_add_2d, (z((20, 70)).partition((8, 128)), z((20, 70)), z((20, 70)))),
        (cs.vec_add_1d_gather, (z(1000), z(1000), z(1000), 1024)),
        (cs.vec_add_2d_gather, (z((20, 70)), z((20, 70)), z((20, 70)), 8, 128)),
        (cs.make_matmul(f16), mm),
        (cs.make_persistent_matmul(f16), mm),
        (
            cs.make_batch_matmul(f16),
            (
                z((2, 64, 64), dtype=f16).partition((1, 64, 64)),
                z((2, 64, 32), dtype=f16),
                z((2, 32, 64), dtype=f16),
                32,
            ),
        ),
        (
            cs.make_batch_matmul(fl.f8e4m3fn, fl.f32),
            (
                z((2, 64, 64)).partition((1, 64, 64)),
                z((2, 64, 32), dtype=fl.f8e4m3fn),
                z((2, 32, 64), dtype=fl.f8e4m3fn),
                32,
            ),
        ),
        (
            cs.make_matmul(fl.f32),  # f32 tiles into the tensor cores as tf32
            (z((64, 64)).partition((32, 32), order=tile.grouped(8)), z((64, 64)), z((64, 64)), 32),
        ),
        (cs.transpose, (z((64, 96)).partition((32, 32)), z((96, 64)))),
        (cs.transpose_by_order, (z((64, 96)).partition((32, 32)), z((96, 64)))),
        (
            cs.make_layer_norm_bwd(fl.bf16),
            (
                z((4, 2048), dtype=fl.bf16).partition((1, 2048)),
                z((64, 2048)),
                z((64, 2048)),
                x,
                x,
                w,
                z(4),
                z(4),
                1024,
            ),
        ),
        (
            cs.make_layer_norm_bwd_dwdb(fl.bf16),
            (
                z(2048, dtype=fl.bf16).partition((1024,)),
                z(2048, dtype=fl.bf16).partition((1024,)),
                z((64, 2048)),
                z((64, 2048)),
                32,
            ),
        ),
        (
            cs.make_layer_norm_fwd(fl.bf16),
            (
                z((4, 2048), dtype=fl.bf16).partition((1, 2048)),
                z(4).partition((1,)),
                z(4).partition((1,)),
                x,
                w,
                w,
                1e-5,
                1024,
            ),
        ),
        (
            cs.make_fmha(f16, True, False, occupancy=2),
            (z((2, 8, 128, 64), dtype=f16).partition((1, 1, 64, 64)), q, q, q, 0.125, 0, 64, 1),
        ),
    ):
        assert cubin(kernel, *args)


# ------------------------------------------------------------------- tile.load(order=...)


def test_order_loads_the_transposed_tile() -> None:
    x = RNG.standard_normal((70, 50)).astype(np.float32)  # partial tiles on both axes
    part = fl.full((50, 70), 7.0).partition((16, 32))
    load_t(part, fl.asarray(x))
    assert np.array_equal(part.unpartition().numpy(), x.T)


def test_order_follows_cutiles_example() -> None:
    """cuTile's docstring: `load(a, (j, i), shape=(tn, tm), order=(1, 0))[y, x]` is
    `a[i * tm + x, j * tn + y]`."""

    @tile.kernel
    def one(out: tile.Part[fl.f32], a: tile.Tensor[fl.f32]):
        out.store(tile.load(a, (1, 2), (8, 4), order=(1, 0)))  # j = 1, i = 2, tn = 8, tm = 4

    a = RNG.standard_normal((12, 16)).astype(np.float32)
    part = fl.zeros((8, 4)).partition((8, 4))
    one(part, fl.asarray(a))
    y, x = np.indices((8, 4))
    assert np.array_equal(part.unpartition().numpy(), a[2 * 4 + x, 1 * 8 + y])


def test_order_in_three_dimensions_with_padding() -> None:
    x = RNG.standard_normal((6, 10, 12)).astype(np.float32)  # out = x.transpose(2, 0, 1)
    part = fl.zeros((12, 6, 10)).partition((8, 4, 8))  # partial tiles: padding is nan
    load_3d(part, fl.asarray(x), 1)
    assert np.array_equal(part.unpartition().numpy(), x.transpose(2, 0, 1))
    with pytest.raises(fl.CompileError, match=r"`order=\(2, 0, 2\)` is not a permutation"):
        load_3d(fl.zeros((12, 6, 10)).partition((8, 4, 8)), fl.asarray(x), 2)


def test_order_is_an_attribute_of_the_load_and_a_dim_map_in_the_bytecode(
    cubin: Callable[..., bytes],
) -> None:
    args = (fl.zeros((50, 70)).partition((16, 32)), fl.zeros((70, 50)))
    ir = load_t.inspect(*args, stage="ir")
    assert "tile.load %x, %0, %1 {shape=(16, 32), padding=0.0, order=(1, 0)}" in ir
    plain = cs.transpose.inspect(*args, stage="ir")
    assert "tile.load" in plain and "order=" not in plain
    identity = pair_order.inspect(fl.zeros((16, 16)).partition((16, 16)), fl.zeros((16, 16)), 0, 1)
    assert "tile.load" in identity and "order=" not in identity  # the identity is not kept
    try:
        text = load_t.inspect(*args, stage="tileir")
    except fl.ToolchainError as exc:  # no tileirdisasm on this machine
        pytest.skip(str(exc).splitlines()[0])
    assert "dim_map=[1, 0]" in text
    assert cubin(load_t, *args)
    assert cubin(load_3d, fl.zeros((12, 6, 10)).partition((8, 4, 8)), fl.zeros((6, 10, 12)), 1)


@tile.kernel
def row_max_t(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], AXIS: tile.Const[int]):
    """The max along tile axis AXIS of x's (2, 4) tile read transposed (zero padding)."""
    v = tile.load(x, (0, 0), (2, 4), order=(1, 0))
    out.store(tile.max(v, axis=AXIS, keepdims=True).reshape(out.shape) * 0.0)


def test_the_padded_reduction_check_follows_the_order() -> None:
    """x is (8, 6): its extents divide by 4 and by 2. The (2, 4) tile read with order=(1, 0)
    runs along x's axis 1 (6: no padding for 2) and axis 0 (8: none for 4), so neither max
    warns; along x's axes as they are, axis 1 (4 over 6) would be padded."""
    x = fl.zeros((8, 6))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddedReductionWarning)
        row_max_t(fl.zeros((4,)).partition((4,)), x, 0)
        row_max_t(fl.zeros((2,)).partition((2,)), x, 1)
    with pytest.warns(PaddedReductionWarning, match="tile.max"):
        row_max_t(fl.zeros((4,)).partition((4,)), fl.zeros((8, 7)), 0)


@tile.kernel
def pair_order(
    out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], A: tile.Const[int], B: tile.Const[int]
):
    out.store(tile.load(x, out.index, out.shape, order=(A, B)))


@tile.kernel
def short_order(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.load(x, out.index, out.shape, order=(1,)))


@tile.kernel
def runtime_order(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    i, j = out.index
    out.store(tile.load(x, (i, j), out.shape, order=(i, 0)))


@pytest.mark.parametrize(
    ("kernel", "consts", "message"),
    [
        (short_order, (), r"`order=\(1,\)` has 1 axis: the tensor has 2 dimension\(s\)"),
        (pair_order, (1, 1), r"`order=\(1, 1\)` is not a permutation: .* of \(0, 1\)"),
        (pair_order, (0, 2), r"`order=\(0, 2\)` is not a permutation"),
        (runtime_order, (), r"each axis of `order` must be a compile-time integer"),
    ],
)
def test_a_bad_order_is_refused_at_its_argument(
    kernel: tile.Kernel, consts: tuple[int, ...], message: str
) -> None:
    with pytest.raises(fl.CompileError, match=message) as info:
        kernel(fl.zeros((16, 16)).partition((16, 16)), fl.zeros((16, 16)), *consts)
    loc = info.value.loc
    src = kernel.func.__code__
    assert loc is not None and src.co_filename == loc.file
    assert "order=(" in loc.source_line()[loc.col - 7 : loc.col + 1]
    if kernel is not runtime_order:
        assert "help: `order` gives, for each tile axis, the tensor axis" in str(info.value)
