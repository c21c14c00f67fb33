"""Persistent Tile launches on the GPU against the simulator (issue 11)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tile_kernels

import fearless as fl
from fearless import tile

pytestmark = pytest.mark.gpu


@tile.kernel
def shifted(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    for t in out.tiles():
        i, j = t.index
        BM, BN = t.shape
        t.store(tile.load(x, (i, j), (BM, BN)) + (100 * i + j).astype(fl.f32))


matmul = tile_kernels.make_matmul_persistent(fl.f16)  # examples/tile_kernels.py's


def _run(
    target: str,
    kernel: Any,
    grid: Any,
    shape: tuple[int, ...],
    dtype: Any,
    tile_shape: tuple[int, ...],
    *inputs: Any,
) -> np.ndarray:
    fl.set_target(target)
    try:
        part = fl.zeros(shape, dtype=dtype).partition(tile_shape)
        args = [fl.asarray(a, dtype=dtype) if isinstance(a, np.ndarray) else a for a in inputs]
        kernel.launch(grid, part, *args)
        fl.synchronize()
        return part.unpartition().numpy()
    finally:
        fl.set_target(None)


@pytest.mark.parametrize("grid", [1, 7, 132, (4, 3)])
def test_persistent_tiles_match_the_simulator(grid: Any) -> None:
    x = np.random.default_rng(0).standard_normal((1000, 300)).astype(np.float32)
    gpu = _run("cuda", shifted, grid, x.shape, fl.f32, (64, 64), x)
    sim = _run("sim", shifted, grid, x.shape, fl.f32, (64, 64), x)
    assert np.array_equal(gpu, sim)


def test_persistent_matmul_matches_numpy() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((512, 256)).astype(np.float16)
    b = rng.standard_normal((256, 384)).astype(np.float16)
    gpu = _run("cuda", matmul, 132, (512, 384), fl.f16, (128, 128), a, b, 64)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(gpu.astype(np.float32), want, rtol=2e-2, atol=2e-1)


@tile.kernel
def stamp(out: tile.Part[fl.f32]):
    i, j = out.index
    out.store(tile.full((32, 32), 1.0, fl.f32) * (1000 * i + j).astype(fl.f32))


def test_grouped_order_matches_the_simulator() -> None:
    results = []
    for target in ("cuda", "sim"):
        fl.set_target(target)
        try:
            part = fl.zeros((32 * 13, 32 * 7)).partition((32, 32), order=tile.grouped(4))
            stamp(part)
            fl.synchronize()
            results.append(part.unpartition().numpy())
        finally:
            fl.set_target(None)
    assert np.array_equal(results[0], results[1])
    rows, cols = np.indices(results[0].shape)
    assert np.array_equal(results[0], 1000 * (rows // 32) + cols // 32)


def test_grouped_persistent_matmul_matches_numpy() -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((1024, 256)).astype(np.float16)
    b = rng.standard_normal((256, 768)).astype(np.float16)
    fl.set_target("cuda")
    try:
        part = fl.zeros((1024, 768), dtype=fl.f16).partition((128, 128), order=tile.grouped(8))
        matmul.launch(132, part, fl.asarray(a, dtype=fl.f16), fl.asarray(b, dtype=fl.f16), 64)
        got = part.unpartition().numpy().astype(np.float32)
    finally:
        fl.set_target(None)
    np.testing.assert_allclose(
        got, a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=2e-1
    )


def test_shifts_bitwise_and_new_axes_match_the_simulator() -> None:

    import support.tile_language_kernels as L

    v = np.array([1, -2, 3, 12345, -7, 0, 255, -1], np.int32)
    k = np.array([0, 1, 3, 31, 32, 40, -1, 5], np.int32)
    a, b = np.arange(4, dtype=np.float32), np.arange(8, dtype=np.float32) + 1
    results = []
    for target in ("cuda", "sim"):
        fl.set_target(target)
        try:
            p = fl.zeros(8, dtype=fl.i32).partition((8,))
            L.bits(p, fl.asarray(v), fl.asarray(k))
            q = fl.zeros((4, 8)).partition((4, 8))
            L.outer(q, fl.asarray(a), fl.asarray(b))
            fl.synchronize()
            results.append((p.unpartition().numpy(), q.unpartition().numpy()))
        finally:
            fl.set_target(None)
    assert np.array_equal(results[0][0], results[1][0])
    assert np.array_equal(results[0][1], results[1][1])
