"""Raw coordinates, grid-stride loops, conditional expressions, weak parameters and unsafe
regions on the GPU, against the simulator (bit for bit: the arithmetic is exact or IEEE)."""

from __future__ import annotations

import numpy as np
import pytest
import simt_kernels as K

import fearless as fl
import support.simt_coords_kernels as C
import support.tile_ifexp_kernels as T
from fearless.errors import KernelIndexError
from support.gpu_compare import both

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]
RNG = np.random.default_rng(7)


@pytest.mark.parametrize(("grid", "block"), [((2, 3), (8, 4, 2)), ((3, 1), (5, 7, 3))])
def test_raw_coordinates(grid: tuple, block: tuple) -> None:
    n = grid[0] * grid[1] * block[0] * block[1] * block[2]
    sim, dev = both(C.coords_3d, grid, block, np.full((n, 5), -7, np.int64), out=0)
    np.testing.assert_array_equal(dev, sim)
    np.testing.assert_array_equal(dev, C._expected_coords(grid, block))


def test_thread_ids_example() -> None:
    sim, dev = both(K.thread_ids, 5, 96, np.zeros(450, np.int64), out=0)
    np.testing.assert_array_equal(dev, sim)


@pytest.mark.parametrize(("grid", "block", "n"), [(1, 32, 1000), (7, 96, 100_003), (4096, 256, 77)])
def test_grid_stride(grid: int, block: int, n: int) -> None:
    x = RNG.standard_normal(n).astype(np.float32)
    sim, dev = both(K.scale_positive, grid, block, 1.5, x, np.zeros(n, np.float32), out=2)
    np.testing.assert_array_equal(dev, sim)
    np.testing.assert_array_equal(dev, np.where(x > 0, np.float32(1.5) * x, x))


def test_grid_stride_past_the_output_raises_at_synchronize() -> None:
    x = fl.asarray(np.arange(300, dtype=np.float64))
    C.strided_sum[2, 32](x, 300, fl.zeros(250, dtype=fl.f64))
    with pytest.raises(KernelIndexError, match="the len is 250"):
        fl.synchronize()


def test_conditional_expression_and_weak_parameters() -> None:
    x = RNG.standard_normal(40).astype(np.float32)
    sim, dev = both(C.lazy_arm, 1, 64, x, np.zeros(64, np.float32), out=1)
    np.testing.assert_array_equal(dev, sim)
    x = RNG.standard_normal(3000).astype(np.float32)
    sim, dev = both(C.clamp, 12, 256, x, -0.5, 0.75, np.zeros(3000, np.float32), out=3)
    np.testing.assert_array_equal(dev, sim)
    sim, dev = both(C.python_math, 1, 8, 0.1, 7, np.zeros(8, np.float32), out=2)
    np.testing.assert_array_equal(dev, sim)


def test_unsafe_region() -> None:
    x = RNG.standard_normal(1000).astype(np.float32)
    sim, dev = both(K.reverse, 4, 256, x, np.zeros(1000, np.float32), out=1)
    np.testing.assert_array_equal(dev, sim)
    np.testing.assert_array_equal(dev, x[::-1])
    K.reverse[4, 256](fl.asarray(x), fl.zeros(600, dtype=fl.f32))
    with pytest.raises(KernelIndexError, match=r"simt\.unsafe"):
        fl.synchronize()


@pytest.mark.parametrize("scale", [1, 2])
def test_tile_conditional_expression(scale: int) -> None:
    x = RNG.standard_normal(300).astype(np.float32)
    fl.set_target("sim")
    sim = T._run(x, scale)
    fl.set_target("cuda")
    dev = T._run(x, scale)
    np.testing.assert_array_equal(dev, sim)
