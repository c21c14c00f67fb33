"""The benchmark's SIMT kernels (`fearless_bench/kernels_simt.py`: block reductions, an atomic sum, a
shared-memory transpose) on the GPU agree with the simulator and with NumPy, at the suite's row
length and at ragged sizes."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless_bench import family_rows
from fearless_bench import kernels_simt as K
from fearless_bench.check import rel_err_numpy

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]
RNG = np.random.default_rng(31)


def on(target: str, kernel, grid, block, args):  # type: ignore[no-untyped-def]
    """Run `kernel` on `target`; the last argument is the output, returned as NumPy."""
    fl.set_target(target)
    try:
        if target == "sim":
            kernel[grid, block](*args)
            return args[-1]
        dev = [fl.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        kernel[grid, block](*dev)
        return dev[-1].numpy()
    finally:
        fl.set_target("cuda")


@pytest.mark.parametrize("rows,cols", [(64, 1024), (9, 37), (4, 1000), (3, 16384)])
@pytest.mark.parametrize("name", family_rows.CASES)
def test_row_kernels(name: str, rows: int, cols: int) -> None:
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    w, b = (RNG.standard_normal(cols).astype(np.float32) for _ in range(2))
    kernel, threads = K.row_kernel(name, cols)  # registers up to 1024 columns, else block_stride
    inputs, scalars = family_rows.operands(name, x, w, b)
    outs = {}
    for target in ("sim", "cuda"):
        y = np.full((rows, cols), np.nan, np.float32)
        outs[target] = on(target, kernel, rows, threads, [*inputs, *scalars, y])
    ref = family_rows.numpy_reference(name, x, w, b)
    assert rel_err_numpy(outs["cuda"], ref) < 1e-5
    np.testing.assert_allclose(outs["cuda"], outs["sim"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [1, 70001, 1 << 22])
def test_block_sum(n: int) -> None:
    x = RNG.integers(-8, 9, n).astype(np.float32)  # exact in f32 in any order
    total = np.zeros(1, np.float32)
    got = on("cuda", K.block_sum, K.SUM_BLOCKS, K.SUM_BLOCK, [x, total])
    assert got[0] == float(x.astype(np.int64).sum())
    xr = RNG.random(n, dtype=np.float32)
    got = on("cuda", K.block_sum, K.SUM_BLOCKS, K.SUM_BLOCK, [xr, np.zeros(1, np.float32)])
    assert rel_err_numpy(got, np.array([xr.astype(np.float64).sum()])) < 1e-5


@pytest.mark.parametrize("rows,cols", [(100, 68), (256, 512), (33, 1)])
def test_transpose(rows: int, cols: int) -> None:
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    grid = ((rows + K.TILE - 1) // K.TILE, (cols + K.TILE - 1) // K.TILE)
    for block_rows in (K.TRANSPOSE_ROWS, 8, 1):
        kernel = K.transpose if block_rows == K.TRANSPOSE_ROWS else K.make_transpose(block_rows)
        for target in ("sim", "cuda"):
            y = np.full((cols, rows), np.nan, np.float32)
            got = on(target, kernel, grid, (K.TILE, block_rows), [x, y])
            np.testing.assert_array_equal(got, x.T)
