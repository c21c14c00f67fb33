"""cuTile Python's samples ported to fearless (examples/cutile_samples.py) on the GPU, at the
samples' own shapes and tiles, against NumPy (float64 references, the samples' tolerances), and
`tile.load(..., order=axes)` on the GPU against NumPy's transpose (partial tiles included): the
partition view's dim_map must mean on the GPU what the simulator says."""

from __future__ import annotations

import math

import cutile_samples as cs
import numpy as np
import pytest

import fearless as fl
from support.cutile_samples_refs import (
    attention_reference,
    layer_norm_bwd_reference,
    layer_norm_reference,
    load_3d,
    load_t,
)

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

RNG = np.random.default_rng(2026)


def _randn(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float64)


@pytest.mark.parametrize("use_gather", [False, True])
@pytest.mark.parametrize("shape", [(1_000_000,), (1_000_001,), (2048, 1024), (2000, 1000)])
def test_vector_addition(shape: tuple[int, ...], use_gather: bool) -> None:
    """The sample's four cases (and each kernel on the others' shapes)."""
    a, b = _randn(*shape), _randn(*shape)
    assert np.array_equal(cs.vec_add(a, b, use_gather=use_gather).numpy(), a + b)


@pytest.mark.parametrize("persistent", [False, True])
def test_matmul_f16(persistent: bool) -> None:
    """The sample's 512 x 768 @ 768 x 512 in f16 with its (128, 256, 64) tiles."""
    a, b = _randn(512, 768, dtype=np.float16), _randn(768, 512, dtype=np.float16)
    c = cs.matmul(a, b, persistent=persistent).numpy()
    np.testing.assert_allclose(_f64(c), _f64(a) @ _f64(b), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize(
    ("m", "k", "n", "persistent"),
    [(512, 768, 512, False), (1000, 700, 500, False), (512, 768, 512, True)],
)
def test_matmul_f32(m: int, k: int, n: int, persistent: bool) -> None:
    """f32 with the sample's (32, 32, 32) tiles, including its dimensions that are not
    multiples of the tiles; the tolerance allows tf32-like products."""
    a, b = _randn(m, k), _randn(k, n)
    c = cs.matmul(a, b, persistent=persistent).numpy()
    np.testing.assert_allclose(_f64(c), _f64(a) @ _f64(b), rtol=1e-2, atol=5e-2)


def test_batch_matmul_f16() -> None:
    """The sample's 4 x 512 x 256 @ 4 x 256 x 1024 with its (128, 256, 128) tiles."""
    a, b = _randn(4, 512, 256, dtype=np.float16), _randn(4, 256, 1024, dtype=np.float16)
    c = cs.batch_matmul(a, b).numpy()
    np.testing.assert_allclose(_f64(c), _f64(a) @ _f64(b), rtol=1e-2, atol=5e-2)


def test_batch_matmul_fp8_into_f32() -> None:
    """The sample's float8_e4m3fn case at its shapes, f32 out, on the fp8 tensor cores.

    Hopper's fp8 MMA does not keep a full f32 accumulator: its partial sums hold about 14
    bits (DeepSeek-V3's report, section 3.3.2), so on the H200 the error of an element is
    bounded by the sum of its products' magnitudes, not by its value (measured 2026-12-04: up
    to 0.027 on elements near 20, where an f32 sum is off by 1e-5). The bound is 2**-11 of
    that sum: 8 times the 14-bit rounding's."""
    import ml_dtypes

    a = _randn(4, 512, 256).astype(ml_dtypes.float8_e4m3fn)
    b = _randn(4, 256, 1024).astype(ml_dtypes.float8_e4m3fn)
    c = cs.batch_matmul(fl.asarray(a), fl.asarray(b), out_dtype=fl.f32).numpy()
    a64, b64 = _f64(a.astype(np.float32)), _f64(b.astype(np.float32))
    err = np.abs(_f64(c) - a64 @ b64)
    bound = 2.0**-11 * (np.abs(a64) @ np.abs(b64))
    assert np.all(err <= bound), f"worst error {err.max():.3g}, {(err / bound).max():.2f} x bound"


@pytest.mark.parametrize("by_order", [False, True])
@pytest.mark.parametrize(
    ("shape", "dtype"), [((1024, 512), np.float16), ((1024, 512), np.float32),
                         ((1000, 500), np.float32)],
)  # fmt: skip
def test_transpose(shape: tuple[int, int], dtype: type, by_order: bool) -> None:
    x = _randn(*shape, dtype=dtype)
    assert np.array_equal(cs.cutile_transpose(x, by_order=by_order).numpy(), x.T)


def test_layer_norm_forward_bf16() -> None:
    """The sample's (1024, 2048) bf16 input, TILE_N 1024, eps 1e-5, atol = rtol = 1e-2."""
    x = fl.asarray(-2.3 + 0.5 * _randn(1024, 2048)).astype(fl.bf16)
    w = fl.asarray(_randn(2048)).astype(fl.bf16)
    b = fl.asarray(_randn(2048)).astype(fl.bf16)
    xs, ws, bs = (t.astype(fl.f32).numpy() for t in (x, w, b))
    y, mean, rstd = cs.layer_norm_fwd(x, w, b, 1e-5)
    want, want_mean, want_rstd = layer_norm_reference(xs, ws, bs, 1e-5)
    np.testing.assert_allclose(y.astype(fl.f32).numpy(), want, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(mean.numpy(), want_mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rstd.numpy(), want_rstd, rtol=1e-3)


@pytest.mark.parametrize(
    ("seq_q", "seq_kv", "group", "causal", "input_pos", "tiles"),
    [
        (128, 128, 1, False, 0, (128, 128)),  # the sample's configuration
        (128, 128, 1, True, 0, (128, 128)),
        (256, 200, 2, False, 0, (64, 64)),  # uneven keys (the EVEN_K mask), grouped heads
        (256, 300, 4, True, 44, (64, 32)),  # causal from input_pos, uneven, 4 heads per KV
    ],
)
def test_fmha_f16(
    seq_q: int, seq_kv: int, group: int, causal: bool, input_pos: int, tiles: tuple[int, int]
) -> None:
    q = _randn(2, 8, seq_q, 64, dtype=np.float16)
    k = _randn(2, 8 // group, seq_kv, 64, dtype=np.float16)
    v = _randn(2, 8 // group, seq_kv, 64, dtype=np.float16)
    out = cs.fmha(q, k, v, input_pos=input_pos, tile_m=tiles[0], tile_n=tiles[1],
                  query_group_size=group, causal=causal).numpy()  # fmt: skip
    want = attention_reference(q, k, v, 1 / math.sqrt(64), causal, input_pos)
    np.testing.assert_allclose(_f64(out), want, rtol=1e-2, atol=1e-2)


def test_a_transposed_load() -> None:
    x = _randn(700, 500)  # partial tiles on both axes
    part = fl.full((500, 700), 7.0).partition((16, 32))
    load_t(part, fl.asarray(x))
    fl.synchronize()
    assert np.array_equal(part.unpartition().numpy(), x.T)


def test_a_transposed_load_in_three_dimensions() -> None:
    x = _randn(6, 10, 12)
    part = fl.zeros((12, 6, 10)).partition((8, 4, 8))
    load_3d(part, fl.asarray(x), 1)
    fl.synchronize()
    assert np.array_equal(part.unpartition().numpy(), x.transpose(2, 0, 1))


def test_layer_norm_backward() -> None:
    """The sample's backward at (1024, 2048) f32: 1024 rows adding into 64 partial rows with
    atomics on the GPU, against float64."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1024, 2048)).astype(np.float32)
    dy = rng.standard_normal((1024, 2048)).astype(np.float32)
    w, b = (
        rng.standard_normal(2048).astype(np.float32),
        rng.standard_normal(2048).astype(np.float32),
    )
    _, mean, rstd = cs.layer_norm_fwd(x, w, b, 1e-5)
    dx, dw, db = cs.layer_norm_bwd(dy, x, w, mean, rstd)
    want_dx, want_dw, want_db = layer_norm_bwd_reference(dy, x, w, 1e-5)
    np.testing.assert_allclose(dx.numpy(), want_dx, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(dw.numpy(), want_dw, rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(db.numpy(), want_db, rtol=1e-3, atol=1e-2)
