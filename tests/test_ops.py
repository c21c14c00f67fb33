"""fearless.ops (issue 13, part 1) on the simulator against NumPy references: every operator,
the tensor kinds in and out, and the errors torch would raise."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config, ops, tile
from fearless.ops.kernels_layout import TRANSPOSE_CONFIGS


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")  # the first configuration (one test tunes)


rng = np.random.default_rng(0)
_erf = np.vectorize(math.erf)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.exp(-x))


def _gelu(x: np.ndarray, tanh: bool = False) -> np.ndarray:
    if tanh:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _bits_to_f32(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32)  # bf16 reads back as ml_dtypes' bfloat16


@pytest.mark.parametrize("shape", [(7, 300), (2, 3, 64), (5, 5000)])
def test_softmax(shape: tuple[int, ...]) -> None:
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(ops.softmax(x), _softmax(x), rtol=1e-5, atol=1e-7)


def test_row_ops_in_bf16() -> None:
    x = fl.asarray(rng.standard_normal((6, 200)).astype(np.float32), dtype=fl.bf16)
    xf = _bits_to_f32(x.numpy())
    got = _bits_to_f32(ops.softmax(x).numpy())
    np.testing.assert_allclose(got, _softmax(xf), rtol=2e-2, atol=1e-3)
    w = fl.asarray(rng.standard_normal(200).astype(np.float32), dtype=fl.bf16)
    got = _bits_to_f32(ops.rms_norm(x, 200, w, 1e-6).numpy())
    want = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-6) * _bits_to_f32(w.numpy())
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_rms_norm_and_layer_norm() -> None:
    x = rng.standard_normal((4, 3, 96)).astype(np.float32)
    w, b = rng.standard_normal(96).astype(np.float32), rng.standard_normal(96).astype(np.float32)
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 2.0**-23) * w
    np.testing.assert_allclose(ops.rms_norm(x, (96,), w), want, rtol=1e-4, atol=1e-5)
    d = x - x.mean(-1, keepdims=True)
    norm = d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ops.layer_norm(x, [96], w, b), norm * w + b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ops.layer_norm(x, 96), norm, rtol=1e-4, atol=1e-4)


def test_matmul_and_bmm() -> None:
    a, b = rng.standard_normal((70, 33)), rng.standard_normal((33, 50))
    a, b = a.astype(np.float32), b.astype(np.float32)
    np.testing.assert_allclose(ops.matmul(a, b), a @ b, rtol=1e-4, atol=1e-4)
    ah = fl.asarray(a, dtype=fl.f16)
    bh = fl.asarray(b, dtype=fl.f16)
    got = ops.matmul(ah, bh).numpy().astype(np.float32)
    np.testing.assert_allclose(got, a @ b, rtol=2e-2, atol=0.1)
    A, B = rng.standard_normal((3, 20, 33)), rng.standard_normal((3, 33, 17))
    A, B = A.astype(np.float32), B.astype(np.float32)
    np.testing.assert_allclose(ops.bmm(A, B), A @ B, rtol=1e-4, atol=1e-4)


def test_activations() -> None:
    x = rng.standard_normal((3, 5, 40)).astype(np.float32) * 3
    np.testing.assert_array_equal(ops.relu(x), np.maximum(x, 0))
    np.testing.assert_allclose(ops.gelu(x), _gelu(x), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(ops.gelu(x, approximate="tanh"), _gelu(x, True), atol=2e-6)
    h = rng.standard_normal((4, 6, 96)).astype(np.float32)
    np.testing.assert_allclose(ops.silu_and_mul(h), _silu(h[..., :48]) * h[..., 48:], atol=1e-6)
    np.testing.assert_allclose(ops.geglu(h), h[..., :48] * _gelu(h[..., 48:]), atol=2e-6)
    np.testing.assert_allclose(ops.swiglu(h, 2 * h), _silu(h) * 2 * h, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", ["silu", "gelu_tanh"])
def test_every_gated_configuration_computes_the_same_rows(kind: str) -> None:
    """Each configuration of the gated activations' tuner, the `wide` ones (x as (M, 2, d),
    tiles past d's power-of-two factor, padded) too, at a d of factor 4 and ragged rows; the
    tuner times the wide ones only where they are wider."""
    from fearless.ops.kernels_activation import GATED_CONFIGS, _wider, gated_tuned

    h = rng.standard_normal((37, 88)).astype(np.float32)
    a, b = h[:, :44], h[:, 44:]
    want = _silu(a) * b if kind == "silu" else a * _gelu(b, True)
    assert any(c["wide"] for c in GATED_CONFIGS)
    for cfg in GATED_CONFIGS:
        out = fl.empty((37, 44))
        gated_tuned.fn(kind, fl.asarray(h), out, **cfg)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=2e-6, err_msg=str(cfg))
    narrow = [c for c in GATED_CONFIGS if not c["wide"]]
    assert _wider(GATED_CONFIGS, kind, fl.empty((1, 88))) == narrow  # on the simulator
    gpu = type("Target", (), {"on_device": True})()
    with pytest.MonkeyPatch.context() as m:
        m.setattr("fearless.ops.kernels_activation.current_target", lambda: gpu)
        assert _wider(GATED_CONFIGS, kind, fl.empty((1, 88))) == GATED_CONFIGS
        assert _wider(GATED_CONFIGS, kind, fl.empty((1, 8192))) == narrow


def test_the_bf16_tanh_gelu_takes_the_hardware_tanh() -> None:
    """gelu's tanh form in a bf16 kernel takes `tile.tanh(..., approx=True)` (its error, about
    2^-11, is under bf16's rounding); f16 and f32 keep the exact tanh."""
    from fearless.ops.kernels_activation import make_unary

    def tanhs(dt: Any) -> list[str]:
        x = fl.zeros(1024, dtype=dt)
        with fl.empty(1024, dtype=dt).partition((1024,)) as p:
            text = make_unary("gelu_tanh", dt).inspect(p, x, stage="tileir")
        return [line for line in text.splitlines() if " = tanh " in line]

    assert ["rounding<approx>" in line for line in tanhs(fl.bf16)] == [True]
    assert ["rounding<approx>" in line for line in tanhs(fl.f16)] == [False]
    assert ["rounding<approx>" in line for line in tanhs(fl.f32)] == [False]


def test_dropout_is_deterministic_per_seed() -> None:
    x = rng.standard_normal(10_000).astype(np.float32)
    a, b = ops.dropout(x, 0.3, seed=7), ops.dropout(x, 0.3, seed=7)
    np.testing.assert_array_equal(a, b)
    assert abs((a == 0).mean() - 0.3) < 0.02
    kept = a != 0
    np.testing.assert_allclose(a[kept], x[kept] / 0.7, rtol=1e-6)
    assert not np.array_equal(a, ops.dropout(x, 0.3, seed=8))
    assert ops.dropout(x, 0.3, training=False) is x
    assert not ops.dropout(x, 1.0).any()


def test_the_dropout_mask_is_philox_four_elements_per_counter() -> None:
    """Element e is kept when word e % 4 of Philox4x32-10 at counter e // 4 is >= p * 2^32,
    against an independent NumPy Philox; a length that no tile divides included."""
    from support.tile_random_kernels import randint4x_ref

    n, p, seed = 5000, 0.3, -123456789
    x = rng.standard_normal(n).astype(np.float32)
    words = randint4x_ref(seed, np.arange((n + 3) // 4, dtype=np.int32))
    bits = np.stack(words, axis=1).reshape(-1)[:n]
    keep = bits >= np.uint32(round(p * 2**32))
    want = np.where(keep, x * np.float32(1 / (1 - p)), 0).astype(np.float32)
    np.testing.assert_array_equal(ops.dropout(x, p, seed=seed), want)


def test_the_kind_given_is_the_kind_returned() -> None:
    x = rng.standard_normal((4, 64)).astype(np.float32)
    assert isinstance(ops.softmax(x), np.ndarray)
    t = ops.softmax(fl.asarray(x))
    assert isinstance(t, fl.Tensor) and t.shape == (4, 64)


def test_the_tuned_path_picks_a_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "1")
    x = rng.standard_normal((3, 100)).astype(np.float32)
    np.testing.assert_allclose(ops.softmax(x), _softmax(x), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ops.softmax(np.zeros((2, 3), np.float32), dim=0), "works over the last axis"),
        (lambda: ops.softmax(np.zeros((2, 3), np.int32)), "takes f32, f16, bf16 tensors"),
        (lambda: ops.softmax([1.0, 2.0]), "must be a tensor"),
        (lambda: ops.rms_norm(np.zeros((2, 8), np.float32), (4,)), "normalized_shape must be"),
        (
            lambda: ops.layer_norm(np.zeros((2, 8), np.float32), 8, np.ones(4, np.float32)),
            "has shape",
        ),
        (
            lambda: ops.matmul(np.zeros((2, 3), np.float32), np.zeros((4, 5), np.float32)),
            "multiplies",
        ),
        (
            lambda: ops.group_gemm(
                [np.zeros((2, 3), np.float32)] * 2,
                [np.zeros((3, 5), np.float32), np.zeros((4, 5), np.float32)],
            ),
            r"`fearless\.ops\.group_gemm` multiplies As\[1\] @ Bs\[1\] as \(M, K\) @ \(K, N\), "
            r"got \(2, 3\) and \(4, 5\)",
        ),
        (
            lambda: ops.group_gemm([np.zeros((2, 3), np.float32)], [np.zeros((3, 5), np.float16)]),
            r"`fearless\.ops\.group_gemm` needs both operands of one dtype",
        ),
        (lambda: ops.silu_and_mul(np.zeros((2, 7), np.float32)), "two halves"),
        (lambda: ops.dropout(np.zeros(4, np.float32), 1.5), "between 0 and 1"),
        (lambda: ops.relu(np.zeros(4, np.float32), inplace=True), "no in-place form"),
        (lambda: ops.gelu(np.zeros(4, np.float32), approximate="fast"), "'none' or 'tanh'"),
    ],
)
def test_errors_name_the_problem(call: object, message: str) -> None:
    with pytest.raises(fl.KernelTypeError, match=message) as info:
        call()  # type: ignore[operator]
    assert info.value.code == "E0701" and "test_ops.py" in str(info.value)


def test_the_operator_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    from fearless.ops import kernels_activation as act
    from fearless.ops import kernels_gemm as gemm

    bf16, n = fl.bf16, 4096
    flat = (fl.zeros(n, dtype=bf16).partition((1024,)), fl.zeros(n, dtype=bf16))
    cases = [
        (act.make_unary("gelu", bf16), flat),
        (
            act.make_unary("gelu_tanh", fl.f16),
            (fl.zeros(n, dtype=fl.f16).partition((1024,)), fl.zeros(n, dtype=fl.f16)),
        ),
        (act.make_unary("relu", bf16), flat),
        (act.make_swiglu(bf16), (*flat, fl.zeros(n, dtype=bf16))),
        (act.make_dropout(bf16), (*flat, 429496730, 1 / 0.9, 7)),
        (
            act.make_gated("silu", bf16),
            (
                fl.zeros((8, 512), dtype=bf16).partition((8, 512)),
                fl.zeros((8, 1024), dtype=bf16),
                512,
            ),
        ),
        (
            act.make_gated("gelu", bf16),
            (
                fl.zeros((8, 512), dtype=bf16).partition((8, 512)),
                fl.zeros((8, 1024), dtype=bf16),
                512,
            ),
        ),
        (  # the wide form: a whole row of d = 5504 in one 8192-column tile
            act.make_gated("silu", bf16, True),
            (
                fl.zeros((2, 5504), dtype=bf16).partition((1, 8192)),
                fl.zeros((2, 2, 5504), dtype=bf16),
            ),
        ),
        (
            gemm.make_bmm(bf16),
            (
                fl.zeros((2, 256, 256), dtype=bf16).partition((1, 128, 128)),
                fl.zeros((2, 256, 64), dtype=bf16),
                fl.zeros((2, 64, 256), dtype=bf16),
                64,
            ),
        ),
        *(
            (
                gemm.make_bmm_flat(bf16, persistent).options(num_ctas=2),
                (
                    fl.zeros((512, 256), dtype=bf16).partition((256, 128), order=tile.grouped(8)),
                    fl.zeros((512, 64), dtype=bf16),
                    fl.zeros((2, 64, 256), dtype=bf16),
                    64,
                ),
            )
            for persistent in (False, True)
        ),
    ]
    for kernel, args in cases:
        assert cubin(kernel, *args)


def _rope_ref(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    h = x.shape[-1] // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], -1)
    return x * cos + rot * sin


@pytest.mark.parametrize("cos_batch", [0, 1, 2])
def test_rope(cos_batch: int) -> None:
    b, hq, hk, s, d = 2, 5, 2, 7, 32
    q = rng.standard_normal((b, hq, s, d)).astype(np.float32)
    k = rng.standard_normal((b, hk, s, d)).astype(np.float32)
    ang = rng.standard_normal((cos_batch or 1, s, d // 2)).astype(np.float32)
    cos = np.concatenate([np.cos(ang)] * 2, -1)
    sin = np.concatenate([np.sin(ang)] * 2, -1)
    if cos_batch == 0:  # (S, D) tables
        cos, sin = cos[0], sin[0]
    qr, kr = ops.rope(q, k, cos, sin)
    c = cos if cos.ndim == 2 else cos[:, None]
    sn = sin if sin.ndim == 2 else sin[:, None]
    np.testing.assert_allclose(qr, _rope_ref(q, c, sn), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(kr, _rope_ref(k, c, sn), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("empty", ["q", "k"])
def test_rope_rotates_one_of_q_and_k_when_the_other_has_no_head(empty: str) -> None:
    """A k (or q) with no head leaves the other to be rotated alone (it was returned unwritten:
    the one launch rotates both, and it was skipped when either was empty)."""
    b, s, d = 2, 5, 16
    x = rng.standard_normal((b, 3, s, d)).astype(np.float32)
    none = np.zeros((b, 0, s, d), np.float32)
    ang = rng.standard_normal((s, d // 2)).astype(np.float32)
    cos = np.concatenate([np.cos(ang)] * 2, -1)
    sin = np.concatenate([np.sin(ang)] * 2, -1)
    qr, kr = ops.rope(none, x, cos, sin) if empty == "q" else ops.rope(x, none, cos, sin)
    rotated, nothing = (kr, qr) if empty == "q" else (qr, kr)
    np.testing.assert_allclose(rotated, _rope_ref(x, cos, sin), rtol=1e-6, atol=1e-6)
    assert nothing.shape == none.shape


def test_transpose_and_group_gemm() -> None:
    x = rng.standard_normal((70, 130)).astype(np.float32)
    np.testing.assert_array_equal(ops.transpose(x), x.T)
    xb = fl.asarray(x, dtype=fl.bf16)
    np.testing.assert_array_equal(ops.transpose(xb).numpy(), xb.numpy().T)
    As = [x[:10], x[:33]]
    Bs = [x.T[:, :5], x.T[:, :17]]
    for got, a, b in zip(ops.group_gemm(As, Bs), As, Bs, strict=True):
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-3)


def test_rope_refuses_tables_of_the_wrong_shape() -> None:
    q = np.zeros((1, 2, 4, 8), np.float32)
    with pytest.raises(fl.KernelTypeError, match=r"`cos` of `fearless\.ops\.rope` has shape"):
        ops.rope(q, q, np.zeros((3, 8), np.float32), np.zeros((3, 8), np.float32))


def test_the_layout_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    from fearless.ops import kernels_layout as lay

    bf16 = fl.bf16
    q = fl.zeros((2, 8, 16, 128), dtype=bf16)
    k = fl.zeros((2, 2, 16, 128), dtype=bf16)
    tab = fl.zeros((1, 16, 128), dtype=bf16)
    cases = [
        (
            lay.make_transpose(bf16),
            (
                fl.zeros((256, 128), dtype=bf16).partition((64, 64)),
                fl.zeros((128, 256), dtype=bf16),
            ),
        ),
        (  # the tuner's largest tile (TileGym's for 16-bit tensors of 4096 and more a side)
            lay.make_transpose(bf16),
            (
                fl.zeros((256, 128), dtype=bf16).partition((128, 128)),
                fl.zeros((128, 256), dtype=bf16),
            ),
        ),
        (
            lay.make_rope(bf16),
            (
                fl.zeros(q.shape, dtype=bf16).partition((1, 8, 1, 128)),
                fl.zeros(k.shape, dtype=bf16).partition((1, 2, 1, 128)),
                q,
                k,
                tab,
                tab,
                1,
            ),
        ),
    ]
    for kernel, args in cases:
        assert cubin(kernel, *args)


def test_empty_inputs_and_any_integer_seed() -> None:
    empty = np.zeros((0, 5), np.float32)  # NumPy gives it zero strides: still contiguous
    assert ops.softmax(empty).shape == (0, 5)
    assert ops.relu(empty).shape == (0, 5)
    x = rng.standard_normal(1000).astype(np.float32)
    big = ops.dropout(x, 0.5, seed=2**70 + 5)  # the seed's low 64 bits, as an i64
    np.testing.assert_array_equal(big, ops.dropout(x, 0.5, seed=5))
    np.testing.assert_array_equal(ops.dropout(x, 0.5, seed=-1), ops.dropout(x, 0.5, seed=2**64 - 1))


def test_a_configuration_that_fails_gives_the_output_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tuner tries every configuration on one output: one that fails to compile after
    the partition must leave the output usable for the next (H200: all of softmax's configs
    then failed with E0382)."""
    from fearless.ops import kernels_rows

    out = fl.zeros((4, 64), dtype=fl.f32)

    def failing(op, out, x, *rest, **config):  # type: ignore[no-untyped-def]
        part = out.partition((1, 64))

        def launch() -> None:
            raise fl.CompileError("tileiras refused this configuration")

        return launch, part

    monkeypatch.setattr(kernels_rows, "prepare_rows", failing)
    with pytest.raises(fl.CompileError):
        kernels_rows._row_launch("softmax", out, fl.zeros((4, 64), dtype=fl.f32))
    assert out._moved is None
    out.partition((1, 64)).unpartition()


@pytest.mark.parametrize("config", TRANSPOSE_CONFIGS, ids=str)
def test_every_transpose_configuration_matches_numpy(config: dict) -> None:
    """Each tile shape the tuner may choose, on shapes none of them divides."""
    from fearless.ops.kernels_layout import transpose_tuned

    rng = np.random.default_rng(3)
    for shape in ((200, 130), (3, 70, 150)):
        x = rng.standard_normal(shape).astype(np.float32)
        out = fl.empty((*shape[:-2], shape[-1], shape[-2]))
        transpose_tuned.fn(fl.asarray(x), out, **config)
        np.testing.assert_array_equal(out.numpy(), np.swapaxes(x, -1, -2))


def test_elementwise_operators_tune_once_per_size_class_and_dtype() -> None:
    """Two sizes within one power of two share a tuning; the next power of two tunes anew."""
    from fearless.ops import kernels_activation as ka

    ka.elementwise_tuned._best.clear()
    for n in (1000, 700, 1500):
        ops.relu(np.linspace(-1, 1, n, dtype=np.float32))
    keys = [k for k in ka.elementwise_tuned._best if "relu" in repr(k)]
    assert len(keys) == 2, keys  # 2^10 (1000, 700) and 2^11 (1500)


def test_tuners_key_extents_that_vary_between_calls_by_size_class() -> None:
    """Rows of a row op, M of a GEMM and the keys of a decode step enter the tuners' keys
    rounded up to a power of two (`size_class`), the row length, K and N exactly."""
    from fearless.ops import kernels_gemm as kg
    from fearless.ops import kernels_rows as kr

    rng = np.random.default_rng(0)
    kr.softmax_tuned._best.clear()
    for m, n in ((100, 64), (120, 64), (300, 64), (100, 96)):
        ops.softmax(rng.standard_normal((m, n), dtype=np.float32))
    assert [k[0] for k in kr.softmax_tuned._best] == [(7, 64), (9, 64), (7, 96)]
    kg.matmul_tuned._best.clear()
    for m in (40, 60, 70):
        a = rng.standard_normal((m, 32)).astype(np.float16)
        ops.matmul(a, rng.standard_normal((32, 48)).astype(np.float16))
    assert [k[0] for k in kg.matmul_tuned._best] == [(6, 32, 48), (7, 32, 48)]
