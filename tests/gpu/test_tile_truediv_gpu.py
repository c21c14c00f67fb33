"""`tile.truediv`'s rounding modes on the H200: IEEE division matches the simulator bit for bit,
APPROX and FULL stay within a few ulp of it."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from support.tile_truediv_kernels import divide

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_division_modes_on_the_gpu(mode: int) -> None:
    rng = np.random.default_rng(mode)
    x = rng.standard_normal(1 << 16).astype(np.float32)
    y = rng.standard_normal(1 << 16).astype(np.float32) + 3
    part = fl.empty(x.shape).partition((1024,))
    divide(part, fl.asarray(x), fl.asarray(y), mode)
    got = part.unpartition().numpy()
    if mode == 0:
        np.testing.assert_array_equal(got, x / y)
    else:
        np.testing.assert_allclose(got, x / y, rtol=4e-7, atol=0)
