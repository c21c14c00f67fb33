"""4-D and 5-D Tile partitions on the GPU against the simulator (issue 11): the z axis of the
grid numbers axes 2.. of the partition, on the GPU as in the simulator."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fearless as fl
from support.tile_rank_kernels import _digits, double4, mark4, rms_heads, scale5

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _run(kernel: Any, grid: Any, shape: tuple[int, ...], tile_shape: tuple[int, ...], *xs: Any):
    part = fl.full(shape, np.nan).partition(tile_shape)
    args = [fl.asarray(x) for x in xs]
    if grid is None:
        kernel(part, *args)
    else:
        kernel.launch(grid, part, *args)
    fl.synchronize()
    return part.unpartition().numpy()


@pytest.mark.parametrize("tile_shape", [(1, 2, 4, 8), (2, 1, 8, 4), (1, 1, 1, 32)])
def test_a_4d_partition_on_the_gpu(tile_shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    shape = (3, 5, 6, 20)
    xs, ys = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    got = _run(mark4, None, shape, tile_shape, xs, ys)
    want = xs + 2 * ys + _digits(shape, tile_shape)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-4)


def test_5d_persistent_and_reduction_kernels_on_the_gpu() -> None:
    x5 = np.arange(2 * 3 * 4 * 5 * 6, dtype=np.float32).reshape(2, 3, 4, 5, 6)
    assert np.array_equal(_run(scale5, None, x5.shape, (1, 2, 2, 4, 4), x5), x5 * 3)
    x4 = np.arange(3 * 4 * 5 * 16, dtype=np.float32).reshape(3, 4, 5, 16)
    for grid in (1, 7, 132):
        assert np.array_equal(_run(double4, grid, x4.shape, (1, 2, 2, 8), x4), x4 * 2)
    h = np.random.default_rng(1).standard_normal((2, 4, 16, 64)).astype(np.float32)
    want = h / np.sqrt((h * h).mean(axis=3, keepdims=True) + 1e-6)
    np.testing.assert_allclose(
        _run(rms_heads, None, h.shape, (1, 2, 8, 64), h), want, rtol=1e-5, atol=1e-6
    )
