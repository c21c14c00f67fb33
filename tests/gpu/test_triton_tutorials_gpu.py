"""Triton's tutorials ported to fearless (examples/triton_tutorials.py) on the GPU, at the
tutorials' own shapes, against NumPy. 05's backward runs its spin locks with every row of a
group contending for one partial buffer: a lock that did not order the critical sections
would lose rows' terms, and dw and db would miss them."""

from __future__ import annotations

import numpy as np
import pytest
import triton_tutorials as tt

import fearless as fl
from support.triton_refs import layer_norm_reference

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

RNG = np.random.default_rng(2026)


def test_vector_add_softmax_and_dropout_at_the_tutorials_shapes() -> None:
    x, y = (RNG.random(98432, dtype=np.float32) for _ in range(2))
    assert np.array_equal(tt.add(fl.asarray(x), fl.asarray(y)).numpy(), x + y)
    xs = RNG.standard_normal((1823, 781)).astype(np.float32)
    e = np.exp(xs - xs.max(1, keepdims=True))
    got = tt.softmax(fl.asarray(xs)).numpy()
    np.testing.assert_allclose(got, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    xd = RNG.standard_normal(1 << 20).astype(np.float32)
    a, b = (tt.seeded_dropout(fl.asarray(xd), 0.5, 123).numpy() for _ in range(2))
    fl.set_target("sim")
    try:  # Philox on the GPU gives the simulator's mask
        sim = tt.seeded_dropout(fl.asarray(xd[:4096]), 0.5, 123).numpy()
    finally:
        fl.set_target("cuda")
    assert np.array_equal(a, b) and np.array_equal(a[:4096], sim)


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_matmul_at_the_tutorials_sizes(activation: str) -> None:
    a = RNG.standard_normal((1024, 1024)).astype(np.float16)
    b = RNG.standard_normal((1024, 1024)).astype(np.float16)
    got = tt.matmul(fl.asarray(a), fl.asarray(b), activation).numpy().astype(np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64)
    if activation:
        want = np.where(want >= 0, want, 0.01 * want)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 2e-3


@pytest.mark.parametrize("group", [None, 4])
def test_layer_norm_with_contended_locks(group: int | None) -> None:
    m, n = 1151, 8192
    x = (-2.3 + 0.5 * RNG.standard_normal((m, n))).astype(np.float32)
    w, b = RNG.random(n, dtype=np.float32), RNG.random(n, dtype=np.float32)
    dy = (0.1 * RNG.standard_normal((m, n))).astype(np.float32)
    want = layer_norm_reference(x, w, b, dy)
    y, mean, rstd = tt.layer_norm_fwd(fl.asarray(x), fl.asarray(w), fl.asarray(b))
    np.testing.assert_allclose(y.numpy(), want[0], rtol=1e-4, atol=1e-4)
    dx, dw, db = tt.layer_norm_bwd(fl.asarray(dy), fl.asarray(x), fl.asarray(w), mean, rstd, group)
    np.testing.assert_allclose(dx.numpy(), want[2], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(dw.numpy(), want[3], rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(db.numpy(), want[4], rtol=1e-3, atol=1e-3)
