"""`simt.thread.block_stride` and `tile_index_2d` on the GPU, against the simulator: the
owners and coordinates of every element bit for bit (1-D, 2-D and 3-D launches), the row
kernels within rounding (the block reduction's order is the simulator's, the exp is
libdevice's), the row check and the tile step's check."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
import support.block_stride_kernels as B
import support.simt_tiles_kernels as T
from fearless.errors import KernelIndexError
from support.gpu_compare import both

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]
RNG = np.random.default_rng(17)


@pytest.mark.parametrize(
    ("grid", "block", "cols"),
    [(3, 32, 100), (2, 128, 50), ((2, 3), (16, 4), 70), ((2, 1, 2), (8, 2, 2), 33)],
)
def test_every_element_has_one_writer(grid: object, block: object, cols: int) -> None:
    dims = [grid] if isinstance(grid, int) else list(grid)  # type: ignore[arg-type]
    rows = int(np.prod(dims))
    for kernel in (B.owners, B.coordinates):
        sim, dev = both(kernel, grid, block, np.zeros((rows, cols), np.int64), out=0)
        np.testing.assert_array_equal(dev, sim)


def test_row_kernels_agree_with_the_simulator() -> None:
    x = RNG.standard_normal((40, 1000)).astype(np.float32)
    w = RNG.standard_normal(1000).astype(np.float32)
    sim, dev = both(B.rms_norm, 40, 128, x, w, 1e-5, np.zeros_like(x), out=3)
    np.testing.assert_allclose(dev, sim, rtol=1e-5, atol=1e-6)
    sim, dev = both(B.softmax, 40, 256, x, np.zeros_like(x), out=1)
    np.testing.assert_allclose(dev, sim, rtol=1e-5, atol=1e-8)


def test_more_blocks_than_rows_is_a_checked_error() -> None:
    out = fl.asarray(np.zeros((3, 40), np.int64))
    with pytest.raises(KernelIndexError, match=r"the len is 3 but the index is 3"):
        B.coordinates[4, 32](out)
        fl.synchronize()


def test_local_arrays_and_block_columns_agree_with_the_simulator() -> None:
    x = RNG.standard_normal((30, 250)).astype(np.float32)
    w = RNG.standard_normal(250).astype(np.float32)
    sim, dev = both(B.rms_norm_registers, 30, 64, x, w, np.full_like(x, np.nan), out=2)
    np.testing.assert_allclose(dev, sim, rtol=1e-5, atol=1e-6)
    sim, dev = both(B.column_of, 2, 32, 1, np.full((2, 96), -1, np.int64), out=1)
    np.testing.assert_array_equal(dev, sim)
    sim, dev = both(B.local_2d, 3, 32, 3, np.zeros(90, np.int64), out=1)
    np.testing.assert_array_equal(dev, sim)
    with pytest.raises(KernelIndexError, match="the len is 3 but the index is 3"):
        B.local_2d[3, 32](4, fl.asarray(np.zeros(90, np.int64)))
        fl.synchronize()


def test_tiles_agree_with_the_simulator() -> None:
    """`tile_index_2d(k, rows)` and `block_index_2d(k)` (tests/test_simt_tiles.py)."""
    for block_rows in (1, 2, 3, 8):
        grid = (3, 5)  # 8-column blocks over 20 columns, tiles of 5 rows over 23 rows
        sim, dev = both(T.owners, grid, (8, block_rows), 5, np.zeros((23, 20), np.int64), out=1)
        np.testing.assert_array_equal(dev, sim)
    x = RNG.standard_normal((70, 45)).astype(np.float32)
    sim, dev = both(T.transpose, (3, 2), (32, 8), x, np.full((45, 70), np.nan, np.float32), out=1)
    np.testing.assert_array_equal(dev, sim)
    np.testing.assert_array_equal(dev, x.T)
    for k in (5, -1):
        with pytest.raises(KernelIndexError, match="a step past its block's tile"):
            T.step_of[(1, 2), (4, 1)](k, fl.asarray(np.zeros((10, 4), np.int64)))
            fl.synchronize()
