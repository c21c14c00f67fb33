"""Tile kernels on the simulator against NumPy, on irregular sizes (partial edge tiles)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import fearless as fl
from fearless.sim.numerics import bf16_load

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tile_kernels.py"


def _examples():
    spec = importlib.util.spec_from_file_location("tile_kernels", EXAMPLES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tile_kernels"] = module
    spec.loader.exec_module(module)
    return module


ex = _examples()
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
