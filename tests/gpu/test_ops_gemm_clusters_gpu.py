"""The GEMM kernels' clustered configurations at grids their clusters do not divide, on the GPU:
a tuned winner serves every M of its size class, so a (256, 256) tile over clusters of 2 tuned
at an even count of tile rows meets odd counts. Each such launch runs the winner's tiles
unclustered (kernels_gemm.dividing_cluster) instead of failing with E0700."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless.ops import kernels_gemm, kernels_linear_ce

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _gemm(shape: tuple[int, int], num_ctas: int, persistent: bool = False) -> dict[str, object]:
    return {
        "shape": shape,
        "BK": 64,
        "occupancy": 1,
        "num_ctas": num_ctas,
        "persistent": persistent,
    }


def _inputs(m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(m)
    a = rng.integers(-2, 3, (m, k)).astype(np.float16)
    b = rng.integers(-2, 3, (k, n)).astype(np.float16)
    return a, b


@pytest.mark.parametrize("m", [1024, 768, 3 * 256 + 17])
@pytest.mark.parametrize(
    "config",
    [_gemm((256, 256), 2), _gemm((512, 256), 2), _gemm((256, 256), 4), _gemm((256, 256), 2, True)],
    ids=["256x256-c2", "512x256-c2", "256x256-c4", "persistent-c2"],
)
def test_a_clustered_matmul_runs_at_any_count_of_tile_rows(m: int, config: dict) -> None:
    a, b = _inputs(m, 128, 512)
    c = fl.zeros((m, 512), dtype=fl.f16)
    launch, part = kernels_gemm.prepare_matmul(fl.asarray(a), fl.asarray(b), c, **config)
    with part:
        launch()
    np.testing.assert_array_equal(c.numpy(), (a.astype(np.float32) @ b).astype(np.float16))


@pytest.mark.parametrize(("batch", "m"), [(3, 256), (4, 256), (3, 200)])
def test_a_clustered_flat_bmm_runs_at_any_batch(batch: int, m: int) -> None:
    """(256, 256) over clusters of 2, flat: 3 batches of 256 rows are 3 tile rows; 200 rows
    do not fill a tile, so the batched kernel runs, its axis x the batch."""
    rng = np.random.default_rng(batch)
    a = rng.integers(-2, 3, (batch, m, 64)).astype(np.float16)
    b = rng.integers(-2, 3, (batch, 64, 256)).astype(np.float16)
    c = fl.zeros((batch, m, 256), dtype=fl.f16)
    config = dict(_gemm((256, 256), 2), flat=True)
    kernels_gemm.bmm_tuned.fn(fl.asarray(a), fl.asarray(b), c, **config)
    np.testing.assert_array_equal(c.numpy(), (a.astype(np.float32) @ b).astype(np.float16))


@pytest.mark.parametrize("m", [512, 768])
def test_a_clustered_logits_gemm_runs_at_any_count_of_tile_rows(m: int) -> None:
    a, w = _inputs(m, 128, 512)
    out = fl.zeros((m, 512), dtype=fl.f16)
    config = {"shape": (256, 256), "BK": 64, "occupancy": 1, "num_ctas": 2}
    no_bias = fl.zeros((512,), dtype=fl.f16)
    wt = fl.asarray(np.ascontiguousarray(w.T))  # (V, H), torch's layout
    kernels_linear_ce.logits_tuned.fn(fl.asarray(a), wt, no_bias, out, False, **config)
    np.testing.assert_array_equal(out.numpy(), (a.astype(np.float32) @ w).astype(np.float16))
