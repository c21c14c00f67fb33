"""`fearless.ops.attention_sink` and `attention_sink_decode` (DESIGN 2c): TileGym's semantics
(GPT-OSS's per-head sink logit in the softmax's denominator, start_q, the sliding window, GQA in
its (B, L, H_kv, G, D) layout) against a float64 NumPy reference on the simulator, at ragged
shapes and with small tiles (the skipped key tiles); rows with no key; start_q as a tensor;
the torch operators and their fake kernels; the refusals; the kernels through tileiras."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_attention_sink import make_sink_attention
from support.attention_sink_ref import attention_sink_reference as reference

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def _inputs(b, lq, s, hk, g, d, dtype, seed=0):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(seed + lq * 1000 + s)
    make = lambda *shape: torch.randn(*shape, generator=gen).to(getattr(torch, dtype))  # noqa: E731
    return make(b, lq, hk, g, d), make(b, s, hk, d), make(b, s, hk, d), make(hk * g) * 2


def _np(*xs):  # type: ignore[no-untyped-def]
    return [None if x is None else x.float().numpy() for x in xs]


def _rel(got, want: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    got = np.asarray(got.float().numpy() if hasattr(got, "float") else got, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


CASES = [  # ((B, L, S, H_kv, G, D), dtype, sm_scale, sliding_window, start_q)
    ((1, 37, 70, 2, 2, 16), "float32", 0.125, None, 0),  # GQA, L < S, ragged
    ((2, 33, 33, 1, 4, 16), "float32", 0.3, None, 0),  # MQA
    ((1, 40, 90, 2, 1, 32), "float32", 0.2, None, 50),  # start_q > 0: rows see 51.. keys
    ((1, 30, 45, 2, 2, 16), "float32", 0.25, 4, 15),  # a window of 4
    ((1, 45, 30, 1, 2, 16), "float32", 0.25, 1, 0),  # a window of one key: itself
    ((1, 20, 40, 2, 2, 40), "float16", 0.125, 6, 20),  # D not a power of two
    ((2, 25, 60, 2, 2, 16), "bfloat16", 0.125, None, 35),
    ((1, 1, 77, 2, 4, 64), "bfloat16", 0.125, 128, 76),  # a decode step, window wider than S
    ((1, 16, 16, 1, 8, 64), "float16", 0.125, 0, 0),  # window 0: none
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, (*c[0], *c[1:]))))
def test_matches_the_reference(case: tuple) -> None:
    (b, lq, s, hk, g, d), dtype, scale, w, start = case
    q, k, v, sinks = _inputs(b, lq, s, hk, g, d, dtype)
    got = ops.attention_sink(q, k, v, sinks, scale, w, start)
    want = reference(*_np(q, k, v, sinks), scale, w, start)
    assert got.dtype == q.dtype and got.shape == (b, lq, hk * g * d)
    assert torch.isfinite(got).all()
    assert _rel(got, want) < TOL[dtype]


def test_the_sink_changes_the_result_as_a_denominator_term() -> None:
    """A -inf sink is plain causal attention (the reference without sinks); a large one takes
    almost all the weight (the output shrinks towards 0); sinks differ per head."""
    q, k, v, _ = _inputs(1, 12, 12, 2, 2, 16, "float32")
    plain = ops.attention_sink(q, k, v, torch.full((4,), -torch.inf))
    assert _rel(plain, reference(*_np(q, k, v), None)) < 1e-5
    big = ops.attention_sink(q, k, v, torch.tensor([30.0, 0.0, 0.0, 0.0]))
    assert float(big[0, :, :16].abs().max()) < 1e-6
    assert float(big[0, :, 16:32].abs().max()) > 0.1


@pytest.mark.parametrize("windowed,wl", [(False, 0), (True, 0), (True, 20)])
@pytest.mark.parametrize("lq,s,start", [(70, 90, 20), (90, 70, -10), (40, 100, 60)])
def test_small_tiles_skip_only_tiles_no_row_sees(
    windowed: bool, wl: int, lq: int, s: int, start: int
) -> None:
    """The kernel with (16, 16) tiles, so that many key tiles are skipped or masked on both
    sides of the window (the simulator's autotuner takes the first, 128-row, configuration)."""
    q, k, v, sinks = _inputs(1, lq, s, 2, 2, 16, "float32")
    out = fl.empty((1, lq, 4, 16), dtype=fl.f32)
    kernel = make_sink_attention(fl.f32, fl.f32, windowed)
    fq = fl.asarray(q.numpy().reshape(1, lq, 4, 16))
    fk, fv, fs = (fl.asarray(x.numpy()) for x in (k, v, sinks))
    st = fl.asarray(np.array([start], np.int32))
    with out.partition((1, 16, 1, 16)) as part:
        kernel(part, fq, fk, fv, fs, st, 0.25, wl, 16, 2)
    want = reference(*_np(q, k, v, sinks), 0.25, wl + 1 if windowed else None, start)
    np.testing.assert_allclose(out.numpy().reshape(1, lq, 64), want, rtol=1e-5, atol=1e-5)


def test_rows_that_see_no_key_give_zeros() -> None:
    q, k, v, sinks = _inputs(1, 12, 8, 1, 2, 16, "float32")
    got = ops.attention_sink(q, k, v, sinks, start_q=-5)  # rows 0..4 sit before key 0
    assert torch.equal(got[:, :5], torch.zeros(1, 5, 32))
    assert _rel(got, reference(*_np(q, k, v, sinks), 0.125, None, -5)) < 1e-5
    q, k, v, sinks = _inputs(1, 5, 0, 1, 2, 16, "float32")
    assert torch.equal(ops.attention_sink(q, k, v, sinks), torch.zeros(1, 5, 32))
    got = ops.attention_sink_decode(q[:, :1], k, v, None)
    assert torch.equal(got, torch.zeros(1, 1, 32))


def test_start_q_as_a_tensor_numpy_and_fl_tensors() -> None:
    q, k, v, sinks = _inputs(1, 20, 40, 2, 2, 16, "float32")
    want = reference(*_np(q, k, v, sinks), 0.125, 8, 17)
    for start in (
        torch.tensor([17], dtype=torch.int32),
        torch.tensor(17),  # int64, 0-d: TileGym's LongTensor
        np.array([17], np.int64),
    ):
        assert _rel(ops.attention_sink(q, k, v, sinks, 0.125, 8, start), want) < 1e-5
    np_out = ops.attention_sink(q.numpy(), k.numpy(), v.numpy(), sinks.numpy(), 0.125, 8, 17)
    assert isinstance(np_out, np.ndarray)
    np.testing.assert_allclose(np_out, want, rtol=1e-5, atol=1e-5)
    fl_args = (fl.asarray(x.numpy()) for x in (q, k, v, sinks))
    fl_out = ops.attention_sink(*fl_args, sliding_window=8, start_q=17)
    assert isinstance(fl_out, fl.Tensor)
    np.testing.assert_allclose(fl_out.numpy(), want, rtol=1e-5, atol=1e-5)
    half = ops.attention_sink(q.half(), k.half(), v.half(), sinks.bfloat16(), 0.125, 8, 17)
    assert half.dtype == torch.float16 and _rel(half, want) < TOL["float16"]


def test_decode_matches_the_reference() -> None:
    q, k, v, sinks = _inputs(2, 1, 300, 2, 4, 64, "bfloat16")
    for w, start, split in ((None, 299, None), (128, 299, 256), (16, 100, 1024)):
        got = ops.attention_sink_decode(q, k, v, sinks, 0.125, w, start, split)
        want = reference(*_np(q, k, v, sinks), 0.125, w, start)
        assert got.shape == (2, 1, 512) and _rel(got, want) < TOL["bfloat16"]
    got = ops.attention_sink_decode(q, k, v, None, 0.1, None, torch.tensor([150]))
    assert _rel(got, reference(*_np(q, k, v), None, 0.1, None, 150)) < TOL["bfloat16"]


def test_torch_operators_fake_kernels_and_compile() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v, sinks = _inputs(1, 10, 12, 2, 2, 16, "float32")
    st = torch.tensor([2], dtype=torch.int32)
    want = reference(*_np(q, k, v, sinks), 0.2, 3, 2)
    assert _rel(torch.ops.fearless.attention_sink(q, k, v, sinks, 0.2, 3, st), want) < 1e-5
    got = torch.ops.fearless.attention_sink_decode(q[:, :1], k, v, None, 0.2, None, st, None)
    assert _rel(got, reference(*_np(q[:, :1], k, v), None, 0.2, None, 2)) < 1e-5
    with FakeTensorMode():
        fq, fk = torch.empty(2, 7, 2, 3, 16), torch.empty(2, 9, 2, 16)
        fs, fst = torch.empty(6), torch.zeros(1, dtype=torch.int32)
        out = torch.ops.fearless.attention_sink(fq, fk, fk, fs, 0.125, None, fst)
        assert out.shape == (2, 7, 96) and out.dtype == fq.dtype
        out = torch.ops.fearless.attention_sink_decode(fq[:, :1], fk, fk, None)
        assert out.shape == (2, 1, 96)

    def block(q, k, v, sinks):  # type: ignore[no-untyped-def]
        return ops.attention_sink(q, k, v, sinks, 0.2, 3, 2)

    got = torch.compile(block, fullgraph=True, backend="aot_eager")(q, k, v, sinks)
    assert _rel(got, want) < 1e-5


def test_refusals_are_fearless_errors() -> None:
    q, k, v, sinks = _inputs(1, 6, 6, 2, 2, 16, "float32")
    with pytest.raises(fl.KernelTypeError, match=r"`sinks` .* must have shape \(H,\) = \(4,\)"):
        ops.attention_sink(q, k, v, sinks[:3])
    with pytest.raises(
        fl.KernelTypeError, match="takes f32, f16, bf16 tensors, but `sinks` is i32"
    ):
        ops.attention_sink(q, k, v, sinks.int())
    with pytest.raises(fl.KernelTypeError, match="must be a tensor"):
        ops.attention_sink(q, k, v, None)
    with pytest.raises(fl.KernelTypeError, match="dtypes"):
        ops.attention_sink(q, k.half(), v.half(), sinks)
    with pytest.raises(fl.KernelTypeError, match=r"query \(B, L, H_kv, G, D\)"):
        ops.attention_sink(q[:, :, 0], k, v, sinks)  # the (B, L, H, D) layout
    with pytest.raises(fl.KernelTypeError, match="shapes"):
        ops.attention_sink(q, k[:, :, :1], v[:, :, :1], sinks)  # H_kv differs
    with pytest.raises(fl.KernelTypeError, match="shapes"):
        ops.attention_sink(q, k, v[:, :3], sinks)
    with pytest.raises(fl.KernelTypeError, match="sliding_window None or an int of 0 or more"):
        ops.attention_sink(q, k, v, sinks, sliding_window=-1)
    with pytest.raises(fl.KernelTypeError, match=r"`start_q` .* must be an int"):
        ops.attention_sink(q, k, v, sinks, start_q=1.5)
    with pytest.raises(fl.KernelTypeError, match=r"`start_q` .* must have one element"):
        ops.attention_sink(q, k, v, sinks, start_q=torch.tensor([1, 2]))
    with pytest.raises(
        fl.KernelTypeError, match=r"`start_q` .* must be an int32 or int64 tensor, got f32"
    ):
        ops.attention_sink(q, k, v, sinks, start_q=torch.tensor([1.0]))
    with pytest.raises(fl.KernelTypeError, match=r"`sm_scale` .* must be a number"):
        ops.attention_sink(q, k, v, sinks, sm_scale="0.1")
    with pytest.raises(fl.KernelTypeError, match="takes one query token"):
        ops.attention_sink_decode(q, k, v, sinks)
    with pytest.raises(fl.KernelTypeError, match="kv_len_per_split None or a power of two"):
        ops.attention_sink_decode(q[:, :1], k, v, sinks, kv_len_per_split=100)
    with pytest.raises(fl.KernelTypeError, match="has no backward yet"):
        ops.attention_sink_decode(q[:, :1], k, v, sinks.requires_grad_())
    with torch.no_grad():
        assert ops.attention_sink(q, k, v, sinks).shape == (1, 6, 64)


@pytest.mark.parametrize("windowed", [False, True])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_the_sink_kernels_compile_through_tileiras(
    cubin: Callable[..., bytes], windowed: bool, dtype: str
) -> None:
    dt = getattr(fl, dtype)
    q = fl.zeros((2, 200, 64, 64), dtype=dt)
    kv = fl.zeros((2, 300, 8, 64), dtype=dt)
    out = fl.empty(q.shape, dtype=dt).partition((1, 128, 1, 64))
    sinks, start = fl.zeros((64,), dtype=fl.bf16), fl.zeros((1,), dtype=fl.i32)
    kernel = make_sink_attention(dt, fl.bf16, windowed, occupancy=2)
    assert cubin(kernel, out, q, kv, kv, sinks, start, 0.125, 127, 128, 8)
