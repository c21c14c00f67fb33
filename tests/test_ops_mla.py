"""`fearless.ops.mla`, `mla_decoding` and `mla_decoding_split_kv` (DESIGN 2c): DeepSeek's
multi-head latent attention with TileGym's semantics (scores q k^T + qpe kpe^T, default scale
1 / sqrt(D + D_PE), top-left causal prefill, GQA and a shared RoPE head, the latent cache as keys
and values, the log2-sum-exp) against float64 NumPy references on the simulator, at ragged
shapes and with small tiles (skipped and masked key tiles); the one-split and split decode
paths; no keys; NumPy and fl.Tensor operands; the torch operators and their fake kernels; the
refusals; the kernels through tileiras."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_attention_mla import (
    make_mla,
    make_mla_combine,
    make_mla_decode,
    make_mla_decode_split,
)
from support.mla_ref import mla_decoding_reference, mla_reference

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float16": 3e-3, "bfloat16": 2e-2}


def _randn(gen, dtype, *shape):  # type: ignore[no-untyped-def]
    return torch.randn(*shape, generator=gen).to(getattr(torch, dtype))


def _prefill(b, h, hk, hp, lq, s, d, dp, dtype, seed=0):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(seed + lq * 100 + s)
    return (
        _randn(gen, dtype, b, h, lq, d),
        _randn(gen, dtype, b, hk, s, d),
        _randn(gen, dtype, b, hk, s, d),
        _randn(gen, dtype, b, h, lq, dp),
        _randn(gen, dtype, b, hp, s, dp),
    )


def _decode(b, h, s, d, dp, dtype, seed=0):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(seed + s)
    return (
        _randn(gen, dtype, b, h, d),
        _randn(gen, dtype, b, h, dp),
        _randn(gen, dtype, b, s, d),
        _randn(gen, dtype, b, s, dp),
    )


def _np(*xs):  # type: ignore[no-untyped-def]
    return [x.float().numpy() for x in xs]


def _rel(got, want: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    got = np.asarray(got.float().numpy() if hasattr(got, "float") else got, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


PREFILL = [  # ((B, H, H_kv, H_pe, L, S, D, D_PE), dtype, is_causal, scaling)
    ((1, 4, 2, 1, 37, 45, 16, 8), "float32", True, None),  # GQA, one RoPE head, L < S
    ((2, 4, 4, 4, 33, 20, 16, 8), "float32", True, 0.3),  # a RoPE head per head, L > S
    ((1, 2, 1, 1, 30, 30, 40, 24), "float16", False, None),  # D, D_PE not powers of two
    ((1, 4, 1, 2, 21, 21, 32, 16), "bfloat16", True, None),  # MQA, two RoPE heads
    ((1, 2, 2, 1, 17, 23, 16, 0), "float32", True, None),  # D_PE 0: no RoPE part
]


@pytest.mark.parametrize("case", PREFILL, ids=lambda c: "-".join(map(str, (*c[0], *c[1:]))))
def test_mla_matches_the_reference(case: tuple) -> None:
    (b, h, hk, hp, lq, s, d, dp), dtype, causal, scaling = case
    q, k, v, qpe, kpe = _prefill(b, h, hk, hp, lq, s, d, dp, dtype)
    got = ops.mla(q, k, v, qpe, kpe, causal, scaling)
    want = mla_reference(*_np(q, k, v, qpe, kpe), causal, scaling)
    assert got.dtype == q.dtype and got.shape == (b, h, lq, d)
    assert _rel(got, want) < TOL[dtype]


@pytest.mark.parametrize("dtype", ["float8_e5m2", "float8_e4m3fn"])
@pytest.mark.parametrize(
    "case",
    [((1, 4, 2, 1, 37, 45, 64, 32), True), ((1, 2, 1, 1, 30, 20, 40, 24), False)],
    ids=lambda c: "-".join(map(str, c)),
)
def test_mla_in_fp8(dtype: str, case: tuple) -> None:
    """TileGym's mla takes fp8 q, k, v, qpe, kpe (test_mla.py's float8_e5m2 case, its tolerance
    0.1): the output is fp8, within a few of fp8's steps of the f32 reference of the same
    fp8 inputs; fp8 mixed with another dtype is refused."""
    (b, h, hk, hp, lq, s, d, dp), causal = case
    args = [x.to(getattr(torch, dtype)) for x in _prefill(b, h, hk, hp, lq, s, d, dp, "float16")]
    got = ops.mla(*args, causal)
    assert got.dtype == args[0].dtype and got.shape == (b, h, lq, d)
    want = mla_reference(*_np(*args), causal, None)
    step = 0.25 if dtype == "float8_e5m2" else 0.125  # fp8's spacing near 1 to 2, doubled
    assert float(np.abs(got.float().numpy() - want).max()) <= step
    with pytest.raises(fl.KernelTypeError, match="one dtype for every tensor"):
        ops.mla(*args[:3], args[3].half(), args[4], causal)


def test_the_rope_term_and_the_default_scale_count() -> None:
    """The RoPE term moves the result (a reference without it is far off), and the default
    scale is 1 / sqrt(D + D_PE), not 1 / sqrt(D)."""
    q, k, v, qpe, kpe = _prefill(1, 2, 2, 1, 12, 12, 16, 16, "float32")
    got = ops.mla(q, k, v, qpe, kpe, True)
    args = _np(q, k, v, qpe, kpe)
    assert _rel(got, mla_reference(*args, True, 1.0 / math.sqrt(32))) < 1e-5
    assert _rel(got, mla_reference(*args, True, 0.25)) > 1e-2
    assert _rel(got, mla_reference(*args[:3], args[3] * 0, args[4], True)) > 1e-2


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("lq,s", [(70, 90), (90, 70)])
def test_small_tiles_skip_and_mask_the_right_key_tiles(causal: bool, lq: int, s: int) -> None:
    """The prefill kernel with (16, 16) tiles, so that key tiles past the diagonal are skipped
    and the diagonal and ragged ones masked (the simulator's tuner takes the first, 128-row,
    configuration)."""
    q, k, v, qpe, kpe = _prefill(1, 4, 2, 1, lq, s, 16, 8, "float32")
    out = fl.empty((1, 4, lq, 16), dtype=fl.f32)
    kernel = make_mla(fl.f32, causal, s % 16 == 0, True)
    args = [fl.asarray(x.numpy()) for x in (q, k, v, qpe, kpe)]
    with out.partition((1, 1, 16, 16)) as part:
        kernel(part, *args, 0.2, 16, 8, 2, 4)
    want = mla_reference(*_np(q, k, v, qpe, kpe), causal, 0.2)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


DECODE = [  # ((B, H, S, D, D_PE), dtype): the simulator's tuner splits the keys over 4 blocks
    ((4, 16, 70, 32, 8), "float32"),  # 4 head tiles fill the 4 blocks: one split
    ((1, 5, 150, 32, 8), "float32"),  # H below the head tile, 2 splits of 128 keys
    ((2, 16, 90, 48, 16), "float16"),  # D not a power of two
    ((1, 24, 200, 64, 32), "bfloat16"),  # 2 head tiles, the second ragged
    ((1, 8, 40, 32, 0), "float32"),  # D_PE 0
]


@pytest.mark.parametrize("case", DECODE, ids=lambda c: "-".join(map(str, (*c[0], c[1]))))
def test_mla_decoding_matches_the_reference(case: tuple) -> None:
    (b, h, s, d, dp), dtype = case
    q, qpe, kv, kpe = _decode(b, h, s, d, dp, dtype)
    o, lse = ops.mla_decoding(q, qpe, kv, kpe)
    want_o, want_lse = mla_decoding_reference(*_np(q, qpe, kv, kpe))
    assert o.dtype == q.dtype and o.shape == (b, h, d)
    assert lse.dtype == torch.float32 and lse.shape == (b, h)
    assert _rel(o, want_o) < TOL[dtype]
    np.testing.assert_allclose(lse.numpy(), want_lse, rtol=1e-5, atol=TOL[dtype])


def test_split_kv_matches_the_reference_for_every_split() -> None:
    q, qpe, kv, kpe = _decode(2, 12, 173, 64, 16, "float16")
    want = mla_decoding_reference(*_np(q, qpe, kv, kpe), 0.1)[0]
    for split in (None, 16, 64, 256):  # 11, 3 and 1 splits, and the tuner's
        got = ops.mla_decoding_split_kv(q, qpe, kv, kpe, 0.1, split)
        assert got.shape == (2, 12, 64) and got.dtype == torch.float16
        assert _rel(got, want) < TOL["float16"]


def test_the_combine_weighs_splits_by_their_sums() -> None:
    """The split kernel then the combine, with 40 splits of 16 keys combined 16 at a time
    (three rounds, the last ragged): the output and the log2-sum-exp match one pass."""
    q, qpe, kv, kpe = _decode(1, 8, 630, 32, 8, "float32")
    qf, pf, cf, kf = (fl.asarray(x.numpy()) for x in (q, qpe, kv, kpe))
    o = fl.empty((1, 8, 40, 32), dtype=fl.f32)
    pl = fl.empty((1, 8, 40, 1), dtype=fl.f32)
    with o.partition((1, 8, 1, 32)) as o_p, pl.partition((1, 8, 1, 1)) as pl_p:
        make_mla_decode_split(fl.f32, True)(o_p, pl_p, qf, pf, cf, kf, 0.3, 16, 8, 1)
    out, lse = fl.empty((1, 8, 32), dtype=fl.f32), fl.empty((1, 8, 1), dtype=fl.f32)
    with out.partition((1, 1, 32)) as out_p, lse.partition((1, 1, 1)) as l_p:
        make_mla_combine(fl.f32)(out_p, l_p, o, pl, 16)
    want_o, want_lse = mla_decoding_reference(*_np(q, qpe, kv, kpe), 0.3)
    np.testing.assert_allclose(out.numpy(), want_o, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lse.numpy()[..., 0], want_lse, rtol=1e-5, atol=1e-5)


def test_no_keys_numpy_and_fl_tensors() -> None:
    q, k, v, qpe, kpe = _prefill(1, 2, 1, 1, 5, 0, 16, 8, "float32")
    assert torch.equal(ops.mla(q, k, v, qpe, kpe, True), torch.zeros(1, 2, 5, 16))
    dq, dp, dkv, dkpe = _decode(1, 3, 0, 16, 8, "float32")
    o, lse = ops.mla_decoding(dq, dp, dkv, dkpe)
    assert torch.equal(o, torch.zeros(1, 3, 16)) and torch.equal(lse, torch.full((1, 3), -math.inf))
    q, k, v, qpe, kpe = _prefill(1, 2, 1, 1, 9, 11, 16, 8, "float32")
    want = mla_reference(*_np(q, k, v, qpe, kpe), True)
    got = ops.mla(*(x.numpy() for x in (q, k, v, qpe, kpe)), True)
    assert isinstance(got, np.ndarray) and _rel(got, want) < 1e-5
    dq, dp, dkv, dkpe = _decode(1, 3, 20, 16, 8, "float32")
    o, lse = ops.mla_decoding(*(fl.asarray(x.numpy()) for x in (dq, dp, dkv, dkpe)))
    want_o, want_lse = mla_decoding_reference(*_np(dq, dp, dkv, dkpe))
    assert isinstance(o, fl.Tensor) and isinstance(lse, fl.Tensor) and lse.dtype == fl.f32
    assert _rel(o.numpy(), want_o) < 1e-5 and _rel(lse.numpy(), want_lse) < 1e-5


def test_torch_operators_fake_kernels_and_compile() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v, qpe, kpe = _prefill(1, 4, 2, 1, 10, 12, 16, 8, "float32")
    want = mla_reference(*_np(q, k, v, qpe, kpe), True, 0.2)
    assert _rel(torch.ops.fearless.mla(q, k, v, qpe, kpe, True, 0.2), want) < 1e-5
    dq, dp, dkv, dkpe = _decode(2, 4, 30, 16, 8, "float32")
    o, lse = torch.ops.fearless.mla_decoding(dq, dp, dkv, dkpe, None, True)
    want_o, want_lse = mla_decoding_reference(*_np(dq, dp, dkv, dkpe))
    assert _rel(o, want_o) < 1e-5 and _rel(lse, want_lse) < 1e-5
    got = torch.ops.fearless.mla_decoding_split_kv(dq, dp, dkv, dkpe, None, 16)
    assert _rel(got, want_o) < 1e-5
    with FakeTensorMode():
        fq, fkv = torch.empty(2, 16, 512, dtype=torch.bfloat16), torch.empty(2, 99, 512)
        o, lse = torch.ops.fearless.mla_decoding(fq, fq[..., :64], fkv, fkv[..., :64])
        assert o.shape == (2, 16, 512) and o.dtype == torch.bfloat16
        assert lse.shape == (2, 16) and lse.dtype == torch.float32
        fq4 = torch.empty(1, 8, 7, 128)
        out = torch.ops.fearless.mla(fq4, fq4, fq4, fq4[..., :64], fq4[:, :1, :, :64], True)
        assert out.shape == (1, 8, 7, 128)

    def block(q, k, v, qpe, kpe):  # type: ignore[no-untyped-def]
        return ops.mla(q, k, v, qpe, kpe, True, 0.2)

    got = torch.compile(block, fullgraph=True, backend="aot_eager")(q, k, v, qpe, kpe)
    assert _rel(got, want) < 1e-5


def test_refusals_are_fearless_errors() -> None:
    q, k, v, qpe, kpe = _prefill(1, 4, 2, 1, 6, 6, 16, 8, "float32")
    with pytest.raises(fl.KernelTypeError, match="one dtype for every tensor"):
        ops.mla(q, k, v, qpe.half(), kpe, True)
    with pytest.raises(fl.KernelTypeError, match=r"H a multiple of H_kv and of H_pe"):
        ops.mla(q, k, v, qpe, torch.randn(1, 3, 6, 8), True)  # 3 RoPE heads for 4
    with pytest.raises(fl.KernelTypeError, match=r"kpe \(B, H_pe, S, D_PE\)"):
        ops.mla(q, k, v, qpe, kpe[..., :4], True)  # D_PE differs
    with pytest.raises(fl.KernelTypeError, match="shapes"):
        ops.mla(q, k, v[:, :, :5], qpe, kpe, True)
    with pytest.raises(
        fl.KernelTypeError, match="takes f32, f16, bf16, f8e5m2, f8e4m3fn tensors, but `kpe` is i32"
    ):
        ops.mla(q, k, v, qpe, kpe.int(), True)
    with pytest.raises(fl.KernelTypeError, match=r"`scaling` .* must be a number"):
        ops.mla(q, k, v, qpe, kpe, True, "0.1")
    dq, dp, dkv, dkpe = _decode(1, 4, 10, 16, 8, "float32")
    with pytest.raises(fl.KernelTypeError, match=r"q \(B, H, D\), qpe \(B, H, D_PE\), kv"):
        ops.mla_decoding(dq[:, None], dp, dkv, dkpe)  # a 4-d query
    with pytest.raises(fl.KernelTypeError, match="shapes"):
        ops.mla_decoding(dq, dp, dkv, dkpe[:, :9])  # kpe's S differs
    with pytest.raises(fl.KernelTypeError, match="latent head dim D of 1 or more"):
        ops.mla_decoding(dq[..., :0], dp, dkv[..., :0], dkpe)
    with pytest.raises(fl.KernelTypeError, match=r"`transpose` .* must be a bool"):
        ops.mla_decoding(dq, dp, dkv, dkpe, None, "yes")
    with pytest.raises(fl.KernelTypeError, match="kv_len_per_split None or a power of two"):
        ops.mla_decoding_split_kv(dq, dp, dkv, dkpe, None, 100)
    with pytest.raises(fl.KernelTypeError, match="has no backward yet"):
        ops.mla(q.requires_grad_(), k, v, qpe, kpe, True)
    with pytest.raises(fl.KernelTypeError, match="has no backward yet"):
        ops.mla_decoding(dq, dp, dkv.requires_grad_(), dkpe)
    with torch.no_grad():
        assert ops.mla(q, k, v, qpe, kpe, True).shape == (1, 4, 6, 16)


@pytest.mark.parametrize(
    "dtype", [pytest.param("f16", marks=pytest.mark.slow), "bf16"]
)  # f16: make test-slow
def test_the_mla_kernels_compile_through_tileiras(cubin: Callable[..., bytes], dtype: str) -> None:
    """DeepSeek-V3's sizes: prefill D 128 + D_PE 64 over 16 heads; decode D 512 + D_PE 64."""
    dt = getattr(fl, dtype)
    q, kv = fl.zeros((1, 16, 300, 128), dtype=dt), fl.zeros((1, 16, 300, 128), dtype=dt)
    qpe, kpe = fl.zeros((1, 16, 300, 64), dtype=dt), fl.zeros((1, 1, 300, 64), dtype=dt)
    out = fl.empty(q.shape, dtype=dt).partition((1, 1, 128, 128))
    kernel = make_mla(dt, True, False, True, occupancy=2)
    assert cubin(kernel, out, q, kv, kv, qpe, kpe, 0.07, 64, 64, 1, 16)
    q, qpe = fl.zeros((2, 16, 512), dtype=dt), fl.zeros((2, 16, 64), dtype=dt)
    kv, kpe = fl.zeros((2, 1000, 512), dtype=dt), fl.zeros((2, 1000, 64), dtype=dt)
    o = fl.empty(q.shape, dtype=dt).partition((1, 16, 512))
    lse = fl.empty((2, 16, 1), dtype=fl.f32).partition((1, 16, 1))
    assert cubin(make_mla_decode(dt, True), o, lse, q, qpe, kv, kpe, 0.04, 64, 64)
    po = fl.empty((2, 16, 8, 512), dtype=fl.f32).partition((1, 16, 1, 512))
    pl = fl.empty((2, 16, 8, 1), dtype=fl.f32).partition((1, 16, 1, 1))
    assert cubin(make_mla_decode_split(dt, True), po, pl, q, qpe, kv, kpe, 0.04, 64, 64, 2)
    o = fl.empty(q.shape, dtype=dt).partition((1, 1, 512))
    lse = fl.empty((2, 16, 1), dtype=fl.f32).partition((1, 1, 1))
    parts = fl.empty((2, 16, 8, 512), dtype=fl.f32), fl.empty((2, 16, 8, 1), dtype=fl.f32)
    assert cubin(make_mla_combine(dt), o, lse, *parts, 8)


@pytest.mark.parametrize("dtype", ["f8e5m2", "f8e4m3fn"])
def test_the_fp8_prefill_compiles_through_tileiras(cubin: Callable[..., bytes], dtype: str) -> None:
    """mla's fp8 prefill for sm_90 at DeepSeek-V3's sizes (D 128 + D_PE 64, keys that fill no
    whole tile), causal and not."""
    dt = getattr(fl, dtype)
    q, kv = fl.zeros((1, 16, 300, 128), dtype=dt), fl.zeros((1, 16, 300, 128), dtype=dt)
    qpe, kpe = fl.zeros((1, 16, 300, 64), dtype=dt), fl.zeros((1, 1, 300, 64), dtype=dt)
    out = fl.empty(q.shape, dtype=dt).partition((1, 1, 128, 128))
    for causal in (True, False):
        kernel = make_mla(dt, causal, False, True, occupancy=2)
        assert cubin(kernel, out, q, kv, kv, qpe, kpe, 0.07, 64, 64, 1, 16)
