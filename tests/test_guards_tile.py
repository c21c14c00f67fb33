"""Tests that guard the Tile track's guards (issue 33): each test names the check it protects,
and fails when that check is switched off.

Also the Tile side of issue 33's fault-campaign findings: a read-only NumPy array as a `Part`
or a `tile.Atomic` (a clear E0701, not an internal error) and NumPy integers as the grid of
`kernel.launch(grid, ...)`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import tile
from support.fake_tile_driver import FakeCU, _dev, fake_gpu  # noqa: F401


@tile.kernel
def add(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


@tile.kernel
def owner(out: tile.Part[fl.i32]):
    """Each tile a block walks holds the block's linear id (x fastest)."""
    b = tile.block_id(0) + tile.num_blocks(0) * (
        tile.block_id(1) + tile.num_blocks(1) * tile.block_id(2)
    )
    for t in out.tiles():
        t.store(tile.zeros(t.shape, fl.i32) + b)


@tile.kernel
def count(h: tile.Atomic[fl.i32], x: tile.Tensor[fl.i32]):
    tile.atomic_add(h, tile.load(x, (0,), (4,)), tile.full((4,), 1, fl.i32))


@tile.kernel
def scale(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], a: fl.bf16):
    z.store(tile.load_like(x, z) * a.astype(fl.f32))


def _grid_size(grid: Any) -> int:
    dims = grid if isinstance(grid, tuple) else (grid,)
    return int(np.prod([int(d) for d in dims]))


# ------------------------------------------------------------- moved tensor, GPU warm path


def test_a_tensor_moved_after_a_warm_launch_is_refused_on_the_gpu(
    fake_gpu: FakeCU,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Guard: tile/dispatch.py `_tensor_reader`'s `arg._moved` test, the warm path's
    MovedError on "cuda". On the simulator `Tensor._array_info` catches a moved tensor too, so
    only a GPU launch (a fake driver here, the Python warm path) sees this check."""
    monkeypatch.setenv("FEARLESS_CLAUNCH", "0")  # the Python warm path, not claunch_tile.c's
    zp = _dev(0x100000, (256,)).partition((128,))
    x = _dev(0x200000, (256,))
    add(zp, x, x)
    add(zp, x, x)  # warm
    assert add._dispatch is not None and len(add._dispatch.entries) == 1
    launches = len(fake_gpu.calls)
    xp = x.partition((128,))  # moves x
    with pytest.raises(fl.MovedError, match="moved"):
        add(zp, x, x)
    assert len(fake_gpu.calls) == launches  # nothing launched
    xp.unpartition()
    add(zp, x, x)  # given back: launches again
    assert len(fake_gpu.calls) == launches + 1


# ------------------------------------------------------------- persistent tile ownership


@pytest.mark.parametrize("grid", [1, 3, 4, 10, 64, (2, 2), (1, 2, 3), (3, 1, 2)])
def test_block_b_of_a_persistent_launch_owns_tiles_b_b_plus_g(grid: Any) -> None:
    """Guard: tile/persistent.py's tile walk (block b of G takes tiles b, b + G, ...), the
    disjointness that lets `kernel.launch(grid, ...)` take any grid. Each block writes its id
    into its tiles, so two blocks sharing a tile, or a tile skipped, shows."""
    tiles, size = 10, 16
    part = fl.full(tiles * size, -1, fl.i32).partition((size,))
    owner.launch(grid, part)
    got = part.unpartition().numpy().reshape(tiles, size)
    g = _grid_size(grid)
    want = np.arange(tiles) % g
    np.testing.assert_array_equal(got, np.repeat(want[:, None], size, axis=1))


@pytest.mark.parametrize("grid", [2, 4, (2, 3)])
def test_persistent_blocks_own_2d_tiles_in_row_major_order(grid: Any) -> None:
    """Guard: the same walk over a 2-D partition (tiles numbered row-major)."""
    part = fl.full((5 * 8, 3 * 8), -1, fl.i32).partition((8, 8))  # 5 x 3 tiles
    owner.launch(grid, part)
    got = part.unpartition().numpy()
    g = _grid_size(grid)
    tile_of = (np.arange(40)[:, None] // 8) * 3 + np.arange(24)[None, :] // 8
    np.testing.assert_array_equal(got, tile_of % g)


# ------------------------------------------------------------- read-only outputs (issue 33)


def test_a_read_only_numpy_array_as_a_part_is_refused() -> None:
    """Guard: tile/kernel.py `signature_of`'s read-only check for a Part (before: the simulator
    failed writing it, an E0999 internal error), and the warm path declining such a Part."""
    host = np.zeros(256, np.float32)
    x = fl.full(256, 1.0)
    zp = fl.asarray(host).partition((128,))
    add(zp, x, x)  # prepared: the same key as the read-only launch below
    zp.unpartition()
    host[:] = 0
    host.flags.writeable = False
    zp = fl.asarray(host).partition((128,))
    with pytest.raises(fl.KernelTypeError, match="`z` is a read-only array") as e:
        add(zp, x, x)
    assert e.value.code == "E0701" and e.value.loc is not None and e.value.loc.file == __file__
    assert "x.copy()" in (e.value.help or "")
    assert not host.any()  # the array was never written


def test_a_read_only_numpy_array_as_an_atomic_is_refused() -> None:
    """Guard: tile/kernel.py `signature_of`'s read-only check for a `tile.Atomic`, and the warm
    path's (dispatch.py `_read_described`) for a NumPy array, then for an fl.Tensor."""
    idx = np.array([0, 1, 1, 3], np.int32)
    for wrap in (np.asarray, fl.asarray):
        hist = np.zeros(4, np.int32)
        count.launch(1, wrap(hist), idx)  # prepared: the same key as the read-only launch
        np.testing.assert_array_equal(hist, [1, 2, 0, 1])
        hist.flags.writeable = False
        with pytest.raises(fl.KernelTypeError, match="`h` is a read-only array") as e:
            count.launch(1, wrap(hist), idx)
        assert e.value.loc is not None and e.value.loc.file == __file__
        np.testing.assert_array_equal(hist, [1, 2, 0, 1])


# ------------------------------------------------------------- the host grid (issue 33)


@pytest.mark.parametrize(
    "grid", [np.int64(3), np.int32(3), (np.int64(3),), (np.int64(1), np.int16(3)), [3]]
)
def test_numpy_integers_are_a_launch_grid(grid: Any) -> None:
    """`kernel.launch(grid, ...)` takes any integer `operator.index` takes, as `k[grid, block]`
    and `prepare` do."""
    part = fl.full(10 * 16, -1, fl.i32).partition((16,))
    owner.launch(grid, part)
    got = part.unpartition().numpy().reshape(10, 16)[:, 0]
    np.testing.assert_array_equal(got, np.arange(10) % 3)


@pytest.mark.parametrize(
    "grid", [True, np.True_, 2.0, np.float64(2), (2, True), (2, 1.5), "2", (), (1, 1, 1, 1)]
)
def test_a_bool_or_float_grid_is_refused(grid: Any) -> None:
    part = fl.zeros(64, fl.i32).partition((16,))
    with pytest.raises(fl.LaunchContractError, match="takes a grid of 1 to 3 ints") as e:
        owner.launch(grid, part)
    assert e.value.loc is not None and e.value.loc.file == __file__


# ------------------------------------------------------------- bf16 scalar range, warm path


def test_the_bf16_range_on_the_tile_warm_path() -> None:
    """Guard: dispatch.py `_scalar_reader`'s float range (`_FLOAT_MAX`) and binder.scalar_fits'
    bf16 rounding: the largest finite bf16 is accepted, a value that rounds to inf is not."""
    biggest = 3.3895313892515355e38  # 0x7F7F: (2 - 2**-7) * 2**127
    host = np.zeros(128, np.float32)
    zp = fl.asarray(host).partition((128,))
    x = fl.full(128, 1.0)
    scale(zp, x, 1.0)  # warm: a float key
    scale(zp, x, biggest)
    assert host[0] == np.float32(biggest)
    for bad in (3.4e38, -3.4e38, 3.3963e38):
        with pytest.raises(fl.KernelTypeError, match="does not fit the parameter's type bf16"):
            scale(zp, x, bad)
