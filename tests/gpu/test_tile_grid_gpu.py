"""Partitions whose grids differ only by trailing 1s launch as one grid, on the GPU as on the
simulator (issue 11)."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import tile

pytestmark = pytest.mark.gpu


@tile.kernel
def rows_and_sums(y: tile.Part[fl.f32], s: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load_like(x, y)
    y.store(v * 2.0)
    s.store(tile.sum(v, axis=1))


def _run(target: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    fl.set_target(target)
    try:
        yp = fl.zeros(x.shape).partition((1, x.shape[1]))
        sp = fl.zeros(x.shape[0]).partition((1,))
        rows_and_sums(yp, sp, fl.asarray(x))
        fl.synchronize()
        return yp.unpartition().numpy(), sp.unpartition().numpy()
    finally:
        fl.set_target(None)


def test_trailing_ones_grid_matches_the_simulator() -> None:
    x = np.random.default_rng(3).standard_normal((300, 64)).astype(np.float32)
    gy, gs = _run("cuda", x)
    sy, ss = _run("sim", x)
    assert np.array_equal(gy, sy)
    np.testing.assert_allclose(gs, ss, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gs, x.sum(axis=1), rtol=1e-4, atol=1e-4)
