"""The Tile language of issue 11: persistent launches (`kernel.launch(grid, ...)` on a grid the
host chooses, the kernel walking its tiles with `for t in out.tiles():`, block b taking tiles
b, b + G, ...), grouped tile order, tile methods, and dtypes compared at compile time."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tile_kernels

import fearless as fl
from fearless import config, tile
from support.tile_language_kernels import bits, outer


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


@tile.kernel
def double(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    for t in out.tiles():
        t.store(tile.load_like(x, t) * 2.0)


@tile.kernel
def shifted(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """out's tile (i, j) = x's tile (i, j) + 100 * i + j: checks t.index and tile.load."""
    for t in out.tiles():
        i, j = t.index
        BM, BN = t.shape
        v = tile.load(x, (i, j), (BM, BN))
        t.store(v + (100 * i + j).astype(fl.f32))


def make_matmul() -> tile.Kernel:
    """The persistent matmul of examples/tile_kernels.py, in f32 (a fresh kernel object)."""
    return tile_kernels.make_matmul_persistent(fl.f32)


@pytest.mark.parametrize("grid", [1, 3, 10, 64, (2, 2), (1, 2, 3)])
def test_every_tile_is_written_once_whatever_the_grid(grid: object) -> None:
    x = np.arange(10 * 16, dtype=np.float32)
    part = fl.full(len(x), np.nan).partition((16,))
    double.launch(grid, part, fl.asarray(x))
    assert np.array_equal(part.unpartition().numpy(), x * 2)


def test_a_plain_call_gives_each_block_its_tile() -> None:
    x = np.arange(100, dtype=np.float32)
    part = fl.full(100, np.nan).partition((16,))  # 7 tiles, the last partial
    double(part, fl.asarray(x))
    assert np.array_equal(part.unpartition().numpy(), x * 2)


@pytest.mark.parametrize("grid", [4, (2, 3)])
def test_two_dimensional_tiles_in_row_major_order(grid: object) -> None:
    x = np.random.default_rng(0).standard_normal((100, 70)).astype(np.float32)
    part = fl.full((100, 70), np.nan).partition((16, 32))  # 7 x 3 tiles
    shifted.launch(grid, part, fl.asarray(x))
    rows, cols = np.indices(x.shape)
    want = x + 100 * (rows // 16) + cols // 32
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-6)


def test_a_persistent_matmul() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((40, 24)).astype(np.float32)
    b = rng.standard_normal((24, 36)).astype(np.float32)
    part = fl.zeros((40, 36)).partition((16, 16))
    make_matmul().launch(2, part, fl.asarray(a), fl.asarray(b), 8)
    np.testing.assert_allclose(part.unpartition().numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_the_persistent_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    x = fl.zeros((100, 70))
    for kernel, args in (
        (double, (fl.zeros(160).partition((16,)), fl.zeros(160))),
        (shifted, (fl.zeros((100, 70)).partition((16, 32)), x)),
        (
            make_matmul(),
            (fl.zeros((40, 36)).partition((16, 16)), fl.zeros((40, 24)), fl.zeros((24, 36)), 8),
        ),
    ):
        assert "tile.store_at" in kernel.inspect(*args, stage="ir")
        assert cubin(kernel, *args)


def test_launch_refuses_a_kernel_that_stores_its_own_tile() -> None:
    @tile.kernel
    def own(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        out.store(tile.load_like(x, out))

    part = fl.zeros(64).partition((16,))
    with pytest.raises(fl.LaunchContractError, match=r"stores `out`'s own tile") as info:
        own.launch(2, part, fl.zeros(64))
    assert (
        info.value.loc is not None and info.value.loc.line == own.func.__code__.co_firstlineno + 2
    )
    assert "for t in out.tiles()" in str(info.value)
    own(part, fl.zeros(64))  # the plain call is fine


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (0, r"grid axis 0 of `double.launch` is 0"),
        ((1, 70000), r"grid axis 1 of `double.launch` is 70000, outside 1..65535"),
        ((1, 2, 3, 4), "takes a grid of 1 to 3 ints"),
        (1.5, "takes a grid of 1 to 3 ints"),
        (True, "takes a grid of 1 to 3 ints"),
    ],
)
def test_bad_host_grids(grid: object, message: str) -> None:
    with pytest.raises(fl.LaunchContractError, match=message) as info:
        double.launch(grid, fl.zeros(64).partition((16,)), fl.zeros(64))
    assert info.value.loc is not None and info.value.loc.file == __file__


def test_tiles_needs_a_part() -> None:
    @tile.kernel
    def bad(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        for _t in x.tiles():
            out.store(tile.load_like(x, out))

    with pytest.raises(fl.KernelTypeError, match=r"`x.tiles` needs a `tile.Part`"):
        bad(fl.zeros(64).partition((16,)), fl.zeros(64))


def test_a_tile_has_index_shape_and_store_only() -> None:
    @tile.kernel
    def bad(out: tile.Part[fl.f32]):
        for t in out.tiles():
            t.store(t.dtype)

    with pytest.raises(fl.CompileError, match=r"`t.dtype` is not available: a tile of"):
        bad(fl.zeros(64).partition((16,)))


def test_tiles_takes_no_arguments() -> None:
    @tile.kernel
    def bad(out: tile.Part[fl.f32]):
        for t in out.tiles(2):
            t.store(tile.full((16,), 1.0, fl.f32))

    with pytest.raises(fl.CompileError, match=r"`tiles\(\)` takes no arguments"):
        bad(fl.zeros(64).partition((16,)))


# ------------------------------------------------------------------------ grouped order


def grouped_numbering(m: int, n: int, g: int) -> list[tuple[int, int]]:
    """Tile number -> (row, col) in Triton's grouped order, written independently."""
    out = []
    for pid in range(m * n):
        group, within = divmod(pid, g * n)
        first = group * g
        size = min(m - first, g)
        out.append((first + within % size, within // size))
    return out


@tile.kernel
def stamp(out: tile.Part[fl.f32]):
    """Each block writes its own tile with the index it thinks it owns."""
    i, j = out.index
    out.store(tile.full((4, 4), 1.0, fl.f32) * (1000 * i + j).astype(fl.f32))


@tile.kernel
def launch_number(out: tile.Part[fl.f32]):
    """Each block fills its own tile with its number in launch order (x fastest)."""
    nx, ny = tile.num_blocks(0), tile.num_blocks(1)
    n = tile.block_id(0) + nx * (tile.block_id(1) + ny * tile.block_id(2))
    out.store(tile.full(out.shape, 0.0, fl.f32) + n.astype(fl.f32))


@pytest.mark.parametrize("tiles", [(3, 5), (2, 3, 5), (2, 3, 4, 2), (2, 2, 3, 4, 1)])
def test_row_major_order_gives_launch_order_the_last_axis_fastest(tiles: tuple[int, ...]) -> None:
    """`tile.row_major()`: the k-th block to launch owns tile number k, row-major (the last
    axis fastest: an attention head's query tiles run together), every tile exactly once."""
    shape = tuple(2 * t for t in tiles)
    part = fl.full(shape, np.nan).partition((2,) * len(tiles), order=tile.row_major())
    launch_number(part)
    got = part.unpartition().numpy()
    want = np.arange(int(np.prod(tiles)), dtype=np.float32).reshape(tiles)
    for axis in range(len(tiles)):
        want = np.repeat(want, 2, axis=axis)
    assert np.array_equal(got, want)


@pytest.mark.parametrize(
    ("tiles", "reverse"), [((3, 5), (1,)), ((2, 3, 5), (2,)), ((2, 3, 4, 2), (0, 2)), ((4,), (0,))]
)
def test_row_major_order_may_number_axes_from_their_last_tile(
    tiles: tuple[int, ...], reverse: tuple[int, ...]
) -> None:
    """`tile.row_major(reverse=axes)`: launch order as `tile.row_major()`'s, with the tiles of
    `axes` counted from the last (causal attention's longest query tiles first): every tile
    exactly once, and the tile the k-th block owns is row-major tile k with those axes
    flipped; the part's index is that tile's."""
    shape = tuple(2 * t for t in tiles)
    order = tile.row_major(reverse=reverse)
    part = fl.full(shape, np.nan).partition((2,) * len(tiles), order=order)
    launch_number(part)
    got = part.unpartition().numpy()
    want = np.arange(int(np.prod(tiles)), dtype=np.float32).reshape(tiles)
    want = np.flip(want, axis=reverse)
    for axis in range(len(tiles)):
        want = np.repeat(want, 2, axis=axis)
    assert np.array_equal(got, want)
    if len(tiles) == 2:  # the index each block sees is the tile it writes
        part = fl.full(shape, np.nan).partition((2, 2), order=order)
        stamp2(part)
        got = part.unpartition().numpy()
        rows, cols = np.indices(got.shape)
        assert np.array_equal(got, 1000 * (rows // 2) + cols // 2)


@tile.kernel
def stamp2(out: tile.Part[fl.f32]):
    i, j = out.index
    out.store(tile.full((2, 2), 1.0, fl.f32) * (1000 * i + j).astype(fl.f32))


def test_row_major_reverse_names_axes_of_the_tensor() -> None:
    with pytest.raises(fl.KernelTypeError, match="names an axis past"):
        fl.empty((4, 4)).partition((2, 2), order=tile.row_major(reverse=(2,)))
    with pytest.raises(fl.KernelTypeError, match="takes axes"):
        tile.row_major(reverse=(1.5,))  # type: ignore[arg-type]
    assert tile.row_major(reverse=[1, 1]) == tile.row_major(reverse=(1,))
    assert tile.row_major() == tile.row_major(reverse=())


@pytest.mark.parametrize(("m", "n", "g"), [(7, 5, 2), (8, 3, 4), (3, 9, 8), (5, 5, 1)])
def test_grouped_order_is_a_permutation_and_keeps_tiles_whole(m: int, n: int, g: int) -> None:
    assert sorted(grouped_numbering(m, n, g)) == [(i, j) for i in range(m) for j in range(n)]
    part = fl.full((4 * m, 4 * n), np.nan).partition((4, 4), order=tile.grouped(g))
    stamp(part)  # a plain launch: one block per tile, each its own (permuted) tile
    got = part.unpartition().numpy()
    rows, cols = np.indices(got.shape)
    assert np.array_equal(got, 1000 * (rows // 4) + cols // 4)


@pytest.mark.parametrize("grid", [1, 3, 16])
def test_grouped_tiles_walk_in_grouped_order(grid: int) -> None:
    @tile.kernel
    def order_of(out: tile.Part[fl.f32], seen: tile.Part[fl.f32]):
        for t in out.tiles():
            i, j = t.index
            t.store(tile.full((4, 4), 1.0, fl.f32) * (1000 * i + j).astype(fl.f32))

    m, n = 6, 5
    part = fl.full((4 * m, 4 * n), np.nan).partition((4, 4), order=tile.grouped(4))
    seen = fl.zeros((1, 1)).partition((1, 1))
    order_of.launch(grid, part, seen)
    got = part.unpartition().numpy()
    rows, cols = np.indices(got.shape)
    assert np.array_equal(got, 1000 * (rows // 4) + cols // 4)


def test_grouped_matmul_matches_numpy() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((64, 24)).astype(np.float32)
    b = rng.standard_normal((24, 80)).astype(np.float32)
    for grid in (None, 3):
        part = fl.zeros((64, 80)).partition((16, 16), order=tile.grouped(2))
        mm = make_matmul()
        if grid is None:
            mm(part, fl.asarray(a), fl.asarray(b), 8)
        else:
            mm.launch(grid, part, fl.asarray(a), fl.asarray(b), 8)
        np.testing.assert_allclose(part.unpartition().numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_grouped_order_mistakes() -> None:
    with pytest.raises(fl.KernelTypeError, match="a grouped order needs a 2-D partition"):
        fl.zeros(64).partition((16,), order=tile.grouped(2))
    with pytest.raises(fl.KernelTypeError, match=r"`order=` takes `tile.grouped\(n\)`"):
        fl.zeros((8, 8)).partition((4, 4), order=2)
    with pytest.raises(fl.KernelTypeError, match="positive number of tile rows"):
        tile.grouped(0)


def test_grouped_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    args = (
        fl.zeros((64, 80)).partition((16, 16), order=tile.grouped(2)),
        fl.zeros((64, 24)),
        fl.zeros((24, 80)),
        8,
    )
    mm = make_matmul()
    assert "grouped=2" in mm.inspect(*args, stage="ir")
    assert cubin(mm, *args)


# ------------------------------------------------------------------ tile methods (issue 11)


def test_reshape_as_a_method_and_its_message() -> None:
    @tile.kernel
    def square(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        out.store(tile.load(x, (0,), (16,)).reshape((4, 4)) * 2.0)

    part = fl.zeros((4, 4)).partition((4, 4))
    square(part, fl.asarray(np.arange(16, dtype=np.float32)))
    assert np.array_equal(part.unpartition().numpy(), np.arange(16).reshape(4, 4) * 2.0)

    @tile.kernel
    def wrong(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        out.store(tile.load(x, (0,), (16,)).reshape((4, 8)))

    with pytest.raises(
        fl.KernelTypeError, match=r"cannot reshape a tile of shape \(16,\) to \(4, 8\)"
    ) as e:
        wrong(fl.zeros((4, 8)).partition((4, 8)), fl.zeros(16))
    assert "32 elements, the tile has 16" in str(e.value) and "keeps the number" in str(e.value)


@tile.kernel
def by_dtype(out: tile.Part[fl.f16], x: tile.Tensor[fl.f16]):
    v = tile.load_like(x, out)
    if x.dtype == fl.f32:
        out.store(v * 2.0)
    elif x.dtype != fl.f16:
        out.store(v)
    else:
        out.store(v * 3.0)


@tile.kernel
def by_dtype_f32(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    if x.dtype == fl.f32:
        out.store(tile.load_like(x, out) * 2.0)
    else:
        out.store(tile.load_like(x, out))


def test_dtypes_compare_at_compile_time() -> None:
    x = np.arange(16, dtype=np.float32)
    for kernel, dt, factor in ((by_dtype, fl.f16, 3.0), (by_dtype_f32, fl.f32, 2.0)):
        part = fl.zeros(16, dtype=dt).partition((16,))
        kernel(part, fl.asarray(x, dtype=dt))
        assert np.array_equal(part.unpartition().numpy().astype(np.float32), x * factor)


# --------------------------------------------- shifts, bitwise ops, permute, new axes (issue 11)


@tile.kernel
def bits_u(out: tile.Part[fl.u32], x: tile.Tensor[fl.u32], s: tile.Tensor[fl.u32]):
    out.store(tile.bitwise_or(tile.load_like(x, out) >> tile.load_like(s, out), 0))


def _shift_reference(
    v: np.ndarray, k: np.ndarray, bits_: int, signed: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Python's infinite-precision shifts, wrapped (sim/numerics.py's meaning)."""
    amount = k.astype(np.int64) & ((1 << 32) - 1)
    mask = (1 << bits_) - 1
    left = np.array(
        [(int(a) << int(s)) & mask if s < bits_ else 0 for a, s in zip(v, amount, strict=True)],
        np.uint64,
    )
    right = []
    for a, s in zip(v, amount, strict=True):
        a = int(a)
        right.append((a >> min(int(s), 63)) & mask)
    out_l = left.astype(np.uint32).view(np.int32) if signed else left.astype(np.uint32)
    out_r = np.array(right, np.uint64).astype(np.uint32)
    return out_l, out_r.view(np.int32) if signed else out_r


def test_shifts_and_bitwise_ops_on_integer_tiles() -> None:
    v = np.array([1, -2, 3, 12345, -7, 0, 255, -1], np.int32)
    k = np.array([0, 1, 3, 31, 32, 40, -1, 5], np.int32)
    part = fl.zeros(8, dtype=fl.i32).partition((8,))
    bits(part, fl.asarray(v), fl.asarray(k))
    left, right = _shift_reference(v, k, 32, signed=True)
    want = ((left | (v >> 1)) ^ (v & 7)) + right
    assert np.array_equal(part.unpartition().numpy(), want.astype(np.int32))
    u = np.array([1, 2, 0xFFFFFFFF, 8, 9, 10, 11, 12], np.uint32)
    s = np.array([0, 1, 31, 32, 33, 2, 3, 4], np.uint32)
    up = fl.zeros(8, dtype=fl.u32).partition((8,))
    bits_u(up, fl.asarray(u), fl.asarray(s))
    _, uright = _shift_reference(u, s, 32, signed=False)
    assert np.array_equal(up.unpartition().numpy(), uright)


def test_shifts_refuse_float_tiles() -> None:
    @tile.kernel
    def bad(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        out.store(tile.load_like(x, out) << 1)

    with pytest.raises(fl.FearlessError, match="<<"):
        bad(fl.zeros(8).partition((8,)), fl.zeros(8))


def test_new_axes_expand_dims_and_permute() -> None:
    a = np.arange(4, dtype=np.float32)
    b = np.arange(8, dtype=np.float32) + 1
    part = fl.zeros((4, 8)).partition((4, 8))
    outer(part, fl.asarray(a), fl.asarray(b))
    assert np.array_equal(part.unpartition().numpy(), np.outer(a, b))


def test_shift_and_shape_ops_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    for kernel, args in (
        (
            bits,
            (
                fl.zeros(8, dtype=fl.i32).partition((8,)),
                fl.zeros(8, dtype=fl.i32),
                fl.zeros(8, dtype=fl.i32),
            ),
        ),
        (
            bits_u,
            (
                fl.zeros(8, dtype=fl.u32).partition((8,)),
                fl.zeros(8, dtype=fl.u32),
                fl.zeros(8, dtype=fl.u32),
            ),
        ),
    ):
        assert cubin(kernel, *args)


# ------------------------------------------------------------ helper functions (issue 11)

EPS_HELPER = 1e-5


def _rms(v, eps=EPS_HELPER):
    ms = tile.sum(v * v, axis=1, keepdims=True) / v.shape[1]
    return v * tile.rsqrt(ms + eps)


def _scaled(v, factor):
    return _rms(v) * factor


@tile.kernel
def with_helpers(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(_scaled(tile.load_like(x, out), factor=2.0))


def test_plain_functions_are_inlined(cubin: Callable[..., bytes]) -> None:
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    part = fl.zeros((4, 8)).partition((1, 8))
    with_helpers(part, fl.asarray(x))
    want = 2 * x / np.sqrt((x * x).mean(1, keepdims=True) + EPS_HELPER)
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-5, atol=1e-6)
    assert cubin(with_helpers, fl.zeros((4, 8)).partition((1, 8)), fl.zeros((4, 8)))


def _forever(v):
    return _forever(v)


def _early(v):
    if v.shape[0] > 1:
        return v
    return v * 2.0


def test_helper_mistakes_are_clear() -> None:
    @tile.kernel
    def recursive(out: tile.Part[fl.f32]):
        out.store(_forever(tile.zeros((8,), fl.f32)))

    with pytest.raises(
        fl.CompileError, match=r"recursive call of `_forever` \(_forever -> _forever\)"
    ):
        recursive(fl.zeros(8).partition((8,)))

    @tile.kernel
    def early(out: tile.Part[fl.f32]):
        out.store(_early(tile.zeros((8,), fl.f32)))

    with pytest.raises(fl.CompileError, match="returns before its end") as e:
        early(fl.zeros(8).partition((8,)))
    assert e.value.loc is not None and e.value.loc.line == _early.__code__.co_firstlineno + 2

    @tile.kernel
    def numpy_call(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        out.store(np.clip(tile.load_like(x, out), 0.0, 1.0))

    with pytest.raises(fl.CompileError, match=r"np\.clip"):
        numpy_call(fl.zeros(8).partition((8,)), fl.zeros(8))


@tile.kernel
def exp2_ftz(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.exp2(tile.load_like(x, out), flush_to_zero=True))


@tile.kernel
def exp2_plain(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.exp2(tile.load_like(x, out)))


def test_exp2_flush_to_zero(cubin: Callable[..., bytes]) -> None:
    x = np.array([1.0, -126.5, -140.0, -149.0, 0.0, 3.0, -200.0, 1e-40], np.float32)
    results = {}
    for name, kernel in (("ftz", exp2_ftz), ("plain", exp2_plain)):
        part = fl.zeros(8).partition((8,))
        kernel(part, fl.asarray(x))
        results[name] = part.unpartition().numpy()
    want = np.exp2(x.astype(np.float64)).astype(np.float32)  # 2**-200 underflows to 0
    np.testing.assert_allclose(results["plain"], want, rtol=1e-6, atol=0)
    tiny = np.finfo(np.float32).tiny
    subnormal_out = (np.abs(want) < tiny) & (np.abs(x) >= tiny)
    assert np.all(results["ftz"][subnormal_out] == 0)
    assert results["ftz"][7] == 1.0  # 1e-40, a subnormal input, flushes to 0: exp2(0) = 1
    normal = ~subnormal_out & (np.abs(x) >= tiny)
    np.testing.assert_allclose(results["ftz"][normal], want[normal], rtol=1e-6, atol=0)
    assert results["plain"][2] > 0 and results["ftz"][2] == 0  # 2**-140 is subnormal
    assert "flush_to_zero=True" in exp2_ftz.inspect(fl.zeros(8).partition((8,)), fl.zeros(8))
    assert cubin(exp2_ftz, fl.zeros(8).partition((8,)), fl.zeros(8))


def test_exp2_flush_to_zero_needs_a_compile_time_bool_and_f32() -> None:
    @tile.kernel
    def half(out: tile.Part[fl.f16], x: tile.Tensor[fl.f16]):
        out.store(tile.exp2(tile.load_like(x, out), flush_to_zero=True))

    with pytest.raises(fl.KernelTypeError, match=r"is for f32 tiles"):
        half(fl.zeros(8, dtype=fl.f16).partition((8,)), fl.zeros(8, dtype=fl.f16))
