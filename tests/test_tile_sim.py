"""Tile kernels on the simulator against NumPy, on irregular sizes (partial edge tiles)."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless.sim.numerics import bf16_load
from support.tile_examples import ex

rng = np.random.default_rng(1)


@pytest.mark.parametrize(("n", "tile"), [(1000, 128), (7, 8), (4096, 1024), (129, 64)])
def test_vecadd_irregular(n: int, tile: int) -> None:
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    zp = fl.zeros(n, dtype=fl.f32).partition((tile,))
    assert zp.grid == (-(-n // tile),)
    ex.vecadd(zp, fl.asarray(x), fl.asarray(y))
    np.testing.assert_array_equal(zp.unpartition().numpy(), x + y)


@pytest.mark.parametrize(("m", "n", "bm"), [(37, 100, 4), (5, 128, 8), (64, 33, 16)])
def test_softmax_f32(m: int, n: int, bm: int) -> None:
    a = rng.standard_normal((m, n)).astype(np.float32) * 4
    op = fl.empty((m, n), dtype=fl.f32).partition((bm, ex.next_pow2(n)))
    ex.softmax_f32(op, fl.asarray(a))
    ref = np.exp(a - a.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(op.unpartition().numpy(), ref, rtol=1e-5, atol=1e-7)


def test_softmax_bf16() -> None:
    m, n = 19, 70
    a = fl.asarray(rng.standard_normal((m, n)).astype(np.float32), dtype=fl.bf16)
    op = fl.empty((m, n), dtype=fl.bf16).partition((4, 128))
    ex.softmax_bf16(op, a)
    got = bf16_load(op.unpartition().numpy())
    av = bf16_load(a.numpy())
    ref = np.exp(av - av.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(got, ref, rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("kernel", ["matmul_f16", "matmul_bf16"])
def test_matmul(kernel: str) -> None:
    m, k, n = 70, 100, 45
    dt = fl.f16 if kernel == "matmul_f16" else fl.bf16
    a = fl.asarray(rng.standard_normal((m, k)).astype(np.float32), dtype=dt)
    b = fl.asarray(rng.standard_normal((k, n)).astype(np.float32), dtype=dt)
    cp = fl.zeros((m, n), dtype=dt).partition((32, 16))
    getattr(ex, kernel)(cp, a, b, 32)
    load = (lambda v: v.astype(np.float32)) if dt is fl.f16 else bf16_load
    ref = load(a.numpy()) @ load(b.numpy())
    # The f32 sum is exact to about 1e-6; rounding it to f16 (bf16) costs up to 2**-11 (2**-8).
    tol = 2.0**-10 if dt is fl.f16 else 2.0**-7
    np.testing.assert_allclose(load(cp.unpartition().numpy()), ref, rtol=tol, atol=tol)


def test_rms_norm_and_layer_norm() -> None:
    m, n = 21, 50
    x = rng.standard_normal((m, n)).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    op = fl.empty((m, n), dtype=fl.f32).partition((8, 64))
    ex.rms_norm(op, fl.asarray(x), fl.asarray(w), 1e-5)
    ref = x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(op.unpartition().numpy(), ref, rtol=1e-5, atol=1e-5)
    op = fl.empty((m, n), dtype=fl.f32).partition((8, 64))
    ex.layer_norm(op, fl.asarray(x), fl.asarray(w), fl.asarray(b), 1e-5)
    mu = x.mean(1, keepdims=True)
    ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(op.unpartition().numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("n", "tile"), [(1000, 128), (7, 8), (4096, 1024)])
def test_saxpy(n: int, tile: int) -> None:
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    op = fl.empty(n, dtype=fl.f32).partition((tile,))
    ex.saxpy(op, 2.5, fl.asarray(x), fl.asarray(y))
    np.testing.assert_allclose(op.unpartition().numpy(), np.float32(2.5) * x + y, rtol=1e-6)


@pytest.mark.parametrize(("rows", "cols", "tile"), [(37, 53, (16, 8)), (100, 68, (64, 64))])
def test_transpose(rows: int, cols: int, tile: tuple[int, int]) -> None:
    """Not square, partial edge tiles, and (for (16, 8)) tiles that are not square either."""
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    op = fl.full((cols, rows), np.nan, dtype=fl.f32).partition(tile)
    ex.transpose(op, fl.asarray(x))
    np.testing.assert_array_equal(op.unpartition().numpy(), x.T)


@pytest.mark.parametrize(("n", "partials", "tile"), [(70000, 8, 1024), (5, 4, 8), (4096, 2, 256)])
def test_sum_tiles_two_launches(n: int, partials: int, tile: int) -> None:
    """Block p sums tiles p, p + P, ... (none at all where P exceeds the tiles), then one block
    sums the partials."""
    x = rng.random(n, dtype=np.float32)
    part = fl.full(partials, np.nan, dtype=fl.f32)
    pp = part.partition((1,))
    ex.sum_tiles(pp, fl.asarray(x), tile)
    got_partials = pp.unpartition().numpy()
    padded = np.zeros(-(-n // tile) * tile)
    padded[:n] = x
    per_tile = padded.reshape(-1, tile).sum(1)
    want = [per_tile[p::partials].sum() for p in range(partials)]
    np.testing.assert_allclose(got_partials, want, rtol=1e-5)
    total = fl.full(1, np.nan, dtype=fl.f32).partition((1,))
    ex.sum_tiles(total, part, 16)
    np.testing.assert_allclose(total.unpartition().numpy(), [x.astype(np.float64).sum()], rtol=1e-5)


def test_launch_kernels_fill_ones_and_add7() -> None:
    n = 1000
    z = fl.full(n, np.nan, dtype=fl.f32).partition((256,))
    ex.fill_ones(z)
    np.testing.assert_array_equal(z.unpartition().numpy(), np.ones(n, np.float32))
    xs = [rng.standard_normal(n).astype(np.float32) for _ in range(7)]
    z = fl.full(n, np.nan, dtype=fl.f32).partition((256,))
    ex.add7(z, *(fl.asarray(x) for x in xs))
    np.testing.assert_allclose(z.unpartition().numpy(), np.sum(xs, axis=0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [4100, 300])  # chunks of 2048 and 4096; 16-row tiles
@pytest.mark.parametrize("op", ["softmax", "rms_norm", "layer_norm"])
def test_every_row_configuration_of_the_tuned_kernels(op: str, n: int) -> None:
    """Each structural variant of ROW_CONFIGS (rows per block, persistent, TMA, memory hints)
    computes the same rows on the simulator; the autotuned entry point runs too."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((37, n)).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    if op == "softmax":
        e = np.exp(x - x.max(axis=1, keepdims=True))
        want, rest = e / e.sum(axis=1, keepdims=True), ()
    elif op == "rms_norm":
        want = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * w
        rest = (fl.asarray(w), 1e-5)
    else:
        d = x - x.mean(axis=1, keepdims=True)
        want = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5) * w + b
        rest = (fl.asarray(w), fl.asarray(b), 1e-5)
    for config in ex.SOFTMAX_CONFIGS if op == "softmax" else ex.ROW_CONFIGS:
        out = fl.empty(x.shape)
        try:
            launch, part = ex.prepare_rows(op, out, fl.asarray(x), *rest, **config)
        except fl.LaunchContractError:  # rows * n over the register budget: the tuner skips it
            assert config["rows"] > 1
            continue
        launch()
        np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-4, atol=1e-5)
    out = fl.empty(x.shape)
    getattr(ex, f"{op}_tuned")(fl.asarray(x), *rest, out)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)


def test_every_gemm_configuration_of_the_tuned_matmul() -> None:
    a = rng.standard_normal((96, 80)).astype(np.float32)
    b = rng.standard_normal((80, 136)).astype(np.float32)
    want = a @ b
    for config in ex.GEMM_CONFIGS:
        c = fl.empty((96, 136), dtype=fl.f16)
        launch, part = ex.prepare_matmul(
            fl.asarray(a, dtype=fl.f16), fl.asarray(b, dtype=fl.f16), c, **config
        )
        launch()
        got = part.unpartition().numpy().astype(np.float32)
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=0.15)
