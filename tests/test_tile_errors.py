"""Tile-track diagnostics: each names the user's line (and column where it has one)."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import tile


def _line(fn, marker: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def test_tile_shape_not_a_power_of_two_points_at_the_shape() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        z.store(tile.load(x, (0,), (100,)))  # error: 100

    zp = fl.empty(128, dtype=fl.f32).partition((128,))
    with pytest.raises(fl.CompileError, match="powers of two") as info:
        k(zp, fl.zeros(128, dtype=fl.f32))
    loc = info.value.loc
    assert loc is not None and loc.line == _line(k.func, "error: 100")
    assert "^^^^^^" in str(info.value)  # the caret under `(100,)`


def test_partition_shape_not_a_power_of_two() -> None:
    z = fl.empty(100, dtype=fl.f32)
    with pytest.raises(fl.CompileError, match="powers of two"):
        z.partition((100,))


def test_moved_tensor_names_the_line_it_moved_at() -> None:
    z = fl.empty(256, dtype=fl.f32)
    zp = z.partition((128,))
    moved_line = _this_line() - 1  # the line above, where `z` moved
    with pytest.raises(fl.MovedError, match="moved") as info:
        z.numpy()
    assert f":{moved_line}:" in str(info.value)
    z = zp.unpartition()
    assert z.numpy().shape == (256,)
    with pytest.raises(fl.MovedError, match="unpartition"):
        zp.unpartition()


def test_a_with_block_gives_the_partitioned_tensor_back_at_its_end() -> None:
    """`with z.partition(tile) as zp:` moves z for the block (a use of z inside is E0382 at
    that line) and gives it back at the block's end, also when the block raises, and when
    the block gave it back itself."""
    x = fl.from_numpy(np.arange(256, dtype=np.float32))
    z = fl.empty(256, dtype=fl.f32)
    with z.partition((128,)) as zp:
        copy(zp, x)
        with pytest.raises(fl.MovedError, match=r"with z\.partition"):
            z.numpy()
    assert np.array_equal(z.numpy(), x.numpy()) and not zp.open
    with pytest.raises(RuntimeError, match="inside"), z.partition((64,)) as zp:
        raise RuntimeError("inside")
    assert z.numpy().shape == (256,) and not zp.open
    with z.partition((128,)) as zp:
        z = zp.unpartition()
    assert z.numpy().shape == (256,)
    with pytest.raises(fl.MovedError, match="unpartition"), zp:
        pass  # a partition given back is not entered again


def _this_line() -> int:
    import sys

    return sys._getframe(1).f_lineno


@tile.kernel
def copy(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z))


def test_input_overlapping_a_partitioned_output_is_a_borrow_error() -> None:
    host = np.zeros(256, np.float32)
    zp = fl.asarray(host).partition((128,))
    alias = fl.asarray(host)  # a second wrapper of the same memory
    with pytest.raises(fl.BorrowError, match="cannot borrow `z` as mutable"):
        copy(zp, alias)


def test_partitions_must_agree_on_the_grid() -> None:
    @tile.kernel
    def two(a: tile.Part[fl.f32], b: tile.Part[fl.f32]):
        a.store(0.0)
        b.store(1.0)

    ap = fl.empty(256, dtype=fl.f32).partition((128,))
    bp = fl.empty(256, dtype=fl.f32).partition((64,))
    with pytest.raises(fl.LaunchContractError, match="disagree on the grid"):
        two(ap, bp)


def test_grids_that_differ_by_trailing_ones_are_one_grid() -> None:
    """(1024, 1) tiles and (1024,) tiles: the same 8 blocks (issue 11, from TileGym's
    layer norm, whose mean and rstd outputs are 1-D beside a 2-D output)."""

    @tile.kernel
    def rows_and_sums(y: tile.Part[fl.f32], s: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        v = tile.load_like(x, y)
        y.store(v * 2.0)
        s.store(tile.sum(v, axis=1))

    x = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)
    yp = fl.zeros((8, 4)).partition((1, 4))  # grid (8, 1)
    sp = fl.zeros(8).partition((1,))  # grid (8,)
    rows_and_sums(yp, sp, fl.asarray(x))
    assert np.array_equal(yp.unpartition().numpy(), x * 2)
    assert np.array_equal(sp.unpartition().numpy(), x.sum(axis=1))
    # the other order, and a leading-axis mismatch is still refused
    yp, sp = fl.zeros((8, 4)).partition((1, 4)), fl.zeros(8).partition((1,))
    rows_and_sums(yp, sp, fl.asarray(x))
    bad = fl.zeros(4).partition((1,))
    with pytest.raises(fl.LaunchContractError, match=r"`y` has \(8, 1\) tiles, `s` has \(4,\)"):
        rows_and_sums(fl.zeros((8, 4)).partition((1, 4)), bad, fl.asarray(x))


def test_store_into_a_tensor_is_a_safety_error() -> None:
    @tile.kernel
    def bad(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        x.store(tile.load_like(x, z))

    with pytest.raises(fl.SafetyError, match=r"read-only `tile\.Tensor`"):
        bad(fl.empty(128, dtype=fl.f32).partition((128,)), fl.zeros(128, dtype=fl.f32))


def test_loading_another_blocks_tile_of_a_part_is_a_safety_error() -> None:
    @tile.kernel
    def peek(z: tile.Part[fl.f32]):
        z.store(tile.load(z, (0,), (128,)))

    with pytest.raises(fl.SafetyError, match="other blocks own"):
        peek(fl.empty(256, dtype=fl.f32).partition((128,)))


def test_mixed_dtypes_need_astype() -> None:
    @tile.kernel
    def mix(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], h: tile.Tensor[fl.f16]):
        z.store(tile.load_like(x, z) + tile.load_like(h, z))

    with pytest.raises(fl.KernelTypeError, match="mismatched types in `\\+`: f32 and f16") as info:
        mix(
            fl.empty(128, dtype=fl.f32).partition((128,)),
            fl.zeros(128),
            fl.zeros(128, dtype=fl.f16),
        )
    assert "astype(fl.f32)" in str(info.value)


def test_a_plain_tensor_for_a_part_is_a_type_error() -> None:
    with pytest.raises(fl.KernelTypeError, match="needs a Partition"):
        copy(fl.empty(128, dtype=fl.f32), fl.zeros(128, dtype=fl.f32))


def test_calling_a_tile_function_on_the_host() -> None:
    with pytest.raises(fl.FearlessError, match=r"inside a @tile\.kernel"):
        tile.exp(1.0)


# ------------------------------------------------- the frontend core's wording (frontend/core.py)


def _inspect_error(k: tile.Kernel) -> fl.FearlessError:
    with pytest.raises(fl.FearlessError) as info:
        k.inspect(stage="ir")
    return info.value


def test_operators_a_dtype_lacks_read_as_in_simt() -> None:
    @tile.kernel
    def bool_add(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        m = tile.load_like(x, z) > 0.0
        z.store((m + m).astype(fl.f32))

    @tile.kernel
    def float_and(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        v = tile.load_like(x, z)
        z.store(v & v)

    err = _inspect_error(bool_add)
    assert (err.code, err.message) == ("E0308", "`+` is not defined on bool")
    err = _inspect_error(float_and)
    assert (err.code, err.message) == ("E0308", "`&` needs integer operands, found f32")


def test_literal_operators_fold_or_say_why_not() -> None:
    @tile.kernel
    def folded(z: tile.Part[fl.f32]):
        z.store(tile.full((128,), tile.maximum(1, 2) + -(+3) + ~4, fl.f32))

    @tile.kernel
    def invert_float(z: tile.Part[fl.f32]):
        z.store(tile.full((128,), ~1.5, fl.f32))

    assert "tile.constant {value=-6.0}" in folded.inspect(stage="ir")  # 2 + -3 + -5
    err = _inspect_error(invert_float)
    assert (err.code, err.message) == ("E0308", "`~` needs an integer operand")


def test_calling_a_value_is_not_a_call() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        v = tile.load_like(x, z)
        z.store(v(1))

    err = _inspect_error(k)
    assert (err.code, err.message) == ("E0605", "`v` is not callable")


def test_unsupported_construct_is_worded_as_in_simt() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        z.store([tile.load_like(x, z)][0])

    err = _inspect_error(k)
    assert err.message == "the expression `[tile.load_like(x, z)]` is not supported in kernels"
    assert "not supported" in str(err)  # the label under the caret
