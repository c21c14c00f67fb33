"""Triton's tutorials ported to fearless Tile (examples/triton_tutorials.py): each runs on the
simulator against NumPy at small shapes and compiles through tileiras to a cubin (skipped
without tileiras); tests/gpu/test_triton_tutorials_gpu.py runs them on the GPU.

05's backward takes a spin lock per partial buffer inside `with tile.unsafe():`, where a
`tile.Atomic` may be read: the one place fearless lets blocks share plain reads and writes,
because the lock, not the compiler, orders them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import triton_tutorials as tt

import fearless as fl
from fearless import tile
from support.triton_refs import layer_norm_reference


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    fl.set_target("sim")


RNG = np.random.default_rng(5)


def test_01_vector_add() -> None:
    x, y = (RNG.random(5000, dtype=np.float32) for _ in range(2))
    assert np.array_equal(tt.add(fl.asarray(x), fl.asarray(y)).numpy(), x + y)


@pytest.mark.parametrize("dt", [fl.f32, fl.f16])
def test_02_softmax_walks_rows_on_the_programs_it_is_given(dt: fl.DType) -> None:
    x = RNG.standard_normal((37, 100)).astype(dt.np)
    xf = x.astype(np.float64)
    e = np.exp(xf - xf.max(1, keepdims=True))
    got = tt.softmax(fl.asarray(x)).numpy().astype(np.float64)
    tol = 1e-6 if dt == fl.f32 else 2e-3
    np.testing.assert_allclose(got, e / e.sum(1, keepdims=True), rtol=tol, atol=tol)


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_03_matmul_grouped_with_the_activation_fused(activation: str) -> None:
    a = RNG.standard_normal((96, 80)).astype(np.float16)
    b = RNG.standard_normal((80, 72)).astype(np.float16)
    got = tt.matmul(fl.asarray(a), fl.asarray(b), activation, tiles=(32, 32, 16), group_size_m=2)
    want = a.astype(np.float32) @ b.astype(np.float32)
    if activation:
        want = np.where(want >= 0, want, 0.01 * want)
    rel = np.linalg.norm(got.numpy().astype(np.float32) - want) / np.linalg.norm(want)
    assert rel < 1e-3


def test_04_seeded_dropout_keeps_a_mask_per_seed() -> None:
    x = RNG.standard_normal(4000).astype(np.float32)
    a, b, c = (tt.seeded_dropout(fl.asarray(x), 0.5, s).numpy() for s in (123, 123, 512))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    kept = a != 0
    np.testing.assert_allclose(a[kept], 2 * x[kept], rtol=1e-6)
    assert 0.45 < kept.mean() < 0.55


@pytest.mark.parametrize("m,n,group", [(37, 100, 8), (70, 300, None)])
def test_05_layer_norm_forward_and_the_locked_backward(m: int, n: int, group: int | None) -> None:
    x = (-2.3 + 0.5 * RNG.standard_normal((m, n))).astype(np.float32)
    w, b = RNG.random(n, dtype=np.float32), RNG.random(n, dtype=np.float32)
    dy = (0.1 * RNG.standard_normal((m, n))).astype(np.float32)
    want = layer_norm_reference(x, w, b, dy)
    y, mean, rstd = tt.layer_norm_fwd(fl.asarray(x), fl.asarray(w), fl.asarray(b))
    np.testing.assert_allclose(y.numpy(), want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean.numpy(), want[1], rtol=1e-5, atol=1e-6)
    dx, dw, db = tt.layer_norm_bwd(fl.asarray(dy), fl.asarray(x), fl.asarray(w), mean, rstd, group)
    np.testing.assert_allclose(dx.numpy(), want[2], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw.numpy(), want[3], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db.numpy(), want[4], rtol=1e-4, atol=1e-4)


def test_the_ports_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    f32, f16, n = fl.f32, fl.f16, 1024
    x, w = fl.zeros((8, n)), fl.zeros(n)
    stats = fl.zeros(8)
    cases = [
        (tt.add_kernel, (fl.empty(n).partition((n,)), w, w)),
        (tt.make_softmax(f32), (fl.empty((8, n)).partition((1, n)), x)),
        (
            tt.make_matmul(f16, "leaky_relu"),
            (
                fl.empty((256, 256), dtype=f16).partition((128, 128), order=tile.grouped(8)),
                fl.zeros((256, 256), dtype=f16),
                fl.zeros((256, 256), dtype=f16),
                64,
            ),
        ),
        (tt.seeded_dropout_kernel, (fl.empty(n).partition((n,)), w, 0.5, 123)),
        (
            tt.make_layer_norm_fwd(f32),
            (
                fl.empty((8, n)).partition((1, n)),
                fl.empty(8).partition((1,)),
                fl.empty(8).partition((1,)),
                x,
                w,
                w,
                1e-5,
            ),
        ),
        (
            tt.make_layer_norm_bwd_dx(f32, 4),
            (
                fl.empty((8, n)).partition((1, n)),
                *(fl.zeros((4, n)), fl.zeros((4, n)), fl.zeros(8, dtype=fl.i32)),
                *(x, x, w, stats, stats),
            ),
        ),
        (
            tt.make_layer_norm_bwd_dwdb(f32),
            (fl.empty(n).partition((128,)), fl.empty(n).partition((128,)), x, x, 32),
        ),
    ]
    for kernel, arguments in cases:
        assert cubin(kernel, *arguments)
