"""Tile tensors of 4 and 5 dimensions (issue 11): a partition of more than 3 axes runs on a
3-D grid whose x axis numbers its leading axes row-major and whose y and z are its last two
(kernel._fold_grid, order.own_index), one block per tile; loads, stores and reductions work at
any rank."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import config, tile
from support.tile_rank_kernels import _digits, double4, mark4, rms_heads, scale5


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


@tile.kernel
def two_ranks(out4: tile.Part[fl.f32], out3: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load_like(x, out3)
    out3.store(v + 1.0)
    out4.store(tile.expand_dims(v, 3) * 2.0)


@tile.kernel
def scale2(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out) * 3.0)


@pytest.mark.parametrize("tile_shape", [(1, 2, 4, 8), (2, 1, 8, 4), (1, 1, 1, 32)])
def test_a_4d_partition_gives_each_block_its_own_tile(tile_shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    shape = (3, 5, 6, 20)  # partial tiles on every axis but the first
    xs, ys = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    part = fl.full(shape, np.nan).partition(tile_shape)
    mark4(part, fl.asarray(xs), fl.asarray(ys))
    want = xs + 2 * ys + _digits(shape, tile_shape)
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-6, atol=1e-4)


def test_a_5d_partition() -> None:
    xs = np.arange(2 * 3 * 4 * 5 * 6, dtype=np.float32).reshape(2, 3, 4, 5, 6)
    part = fl.full(xs.shape, np.nan).partition((1, 2, 2, 4, 4))
    scale5(part, fl.asarray(xs))
    assert np.array_equal(part.unpartition().numpy(), xs * 3)


def test_a_reduction_over_the_last_axis_of_a_4d_tile() -> None:
    xs = np.random.default_rng(1).standard_normal((2, 4, 16, 64)).astype(np.float32)
    part = fl.empty(xs.shape).partition((1, 2, 8, 64))
    rms_heads(part, fl.asarray(xs))
    want = xs / np.sqrt((xs * xs).mean(axis=3, keepdims=True) + 1e-6)
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-5, atol=1e-6)


def test_partitions_of_4_and_3_axes_that_number_tiles_differently_are_refused() -> None:
    xs = np.random.default_rng(2).standard_normal((4, 6, 8)).astype(np.float32)
    out4 = fl.empty((4, 6, 8, 1)).partition((2, 2, 4, 1))  # tile counts (2, 3, 2, 1)
    out3 = fl.empty((4, 6, 8)).partition((2, 2, 4))  # (2, 3, 2): equal but for the trailing 1
    with pytest.raises(fl.LaunchContractError, match="number them differently") as info:
        two_ranks(out4, out3, fl.asarray(xs))
    assert "same number of axes" in str(info.value)


@pytest.mark.parametrize("grid", [1, 7, (2, 3)])
def test_a_persistent_launch_walks_every_tile_of_a_4d_partition(grid: object) -> None:
    xs = np.arange(3 * 4 * 5 * 16, dtype=np.float32).reshape(3, 4, 5, 16)
    part = fl.full(xs.shape, np.nan).partition((1, 2, 2, 8))
    double4.launch(grid, part, fl.asarray(xs))
    assert np.array_equal(part.unpartition().numpy(), xs * 2)


def test_a_grid_axis_past_the_cuda_limit_is_refused_before_launch() -> None:
    part = fl.zeros((2, 70_000)).partition((1, 1))  # grid y = 70000 > 65535
    with pytest.raises(fl.LaunchContractError) as info:
        scale2(part, fl.zeros((2, 70_000)))  # the grid is checked before anything runs
    msg = str(info.value)
    assert "grid axis 1" in msg and "at most 65535" in msg
    assert "test_tile_rank.py" in msg  # points at the user's line


def test_4d_and_5d_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    shape4, shape5 = (3, 5, 6, 20), (2, 3, 4, 5, 6)
    for kernel, args in (
        (mark4, (fl.zeros(shape4).partition((1, 2, 4, 8)), fl.zeros(shape4), fl.zeros(shape4))),
        (scale5, (fl.zeros(shape5).partition((1, 2, 2, 4, 4)), fl.zeros(shape5))),
        (double4, (fl.zeros(shape4).partition((1, 2, 2, 8)), fl.zeros(shape4))),
        (rms_heads, (fl.zeros((2, 4, 16, 64)).partition((1, 2, 8, 64)), fl.zeros((2, 4, 16, 64)))),
    ):
        assert "tile.store" in kernel.inspect(*args, stage="ir")
        assert cubin(kernel, *args)
