"""`fearless.ops.recurrent_gated_delta_rule` and `chunk_gated_delta_rule` (DESIGN 2c):
TileGym's semantics (Qwen3-Next's gated delta rule: the decay exp(g), the beta-gated delta
update, the 1/sqrt(K) scale, the in-kernel l2norm, initial and final states, value heads
grouped over query/key heads) against float64 NumPy references on the simulator, at ragged
shapes (K, V, T not multiples of the tiles; a partial last chunk); the chunked form against the
recurrent one; the torch operators and their fake kernels; the refusals (inputs that require
grad among them); the kernels through tileiras."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_delta_rule import make_chunk_inter, make_chunk_prepare, make_recurrent
from support.delta_rule_ref import chunk_reference, recurrent_reference

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float16": 3e-3, "bfloat16": 2e-2}


def _inputs(b, t, h, hv, k, v, dtype, init=False, seed=0):  # type: ignore[no-untyped-def]
    """TileGym's test inputs: q, k, v ~ 0.3 N(0, 1), g = -0.5 |N|, beta = sigmoid(N)."""
    gen = torch.Generator().manual_seed(seed + t * 100 + k)
    rn = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    dt = getattr(torch, dtype)
    q, kk = (rn(b, t, h, k) * 0.3).to(dt), (rn(b, t, h, k) * 0.3).to(dt)
    vv = (rn(b, t, hv, v) * 0.3).to(dt)
    g = (-rn(b, t, hv).abs() * 0.5).to(dt)
    beta = torch.sigmoid(rn(b, t, hv)).to(dt)
    s0 = rn(b, hv, k, v) * 0.1 if init else None
    return q, kk, vv, g, beta, s0


def _np(*xs):  # type: ignore[no-untyped-def]
    return [None if x is None else x.double().numpy() for x in xs]


def _rel(got, want: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    got = np.asarray(got.double().numpy() if hasattr(got, "double") else got, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def test_the_two_references_agree() -> None:
    q, k, v, g, beta, s0 = _np(*_inputs(1, 37, 1, 2, 12, 10, "float32", init=True))
    for l2 in (False, True):
        out, s = recurrent_reference(q, k, v, g, beta, s0, l2)
        for cs in (8, 16, 64):
            out_c, s_c = chunk_reference(q, k, v, g, beta, cs, s0, l2)
            assert np.abs(out_c - out).max() < 1e-12 and np.abs(s_c - s).max() < 1e-12


CASES = [  # ((B, T, H, HV, K, V), dtype, initial state, l2norm)
    ((1, 21, 1, 1, 12, 20), "float32", False, False),  # K, V, T ragged
    ((2, 19, 1, 2, 16, 24), "float32", True, True),  # two value heads per key head
    ((1, 40, 2, 2, 32, 16), "float16", True, False),
    ((1, 18, 2, 4, 24, 40), "bfloat16", False, True),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, (*c[0], *c[1:]))))
def test_recurrent_matches_the_reference(case: tuple) -> None:
    (b, t, h, hv, k, v), dtype, init, l2 = case
    q, kk, vv, g, beta, s0 = _inputs(b, t, h, hv, k, v, dtype, init)
    out, state = ops.recurrent_gated_delta_rule(q, kk, vv, g, beta, s0, True, l2)
    want, want_s = recurrent_reference(*_np(q, kk, vv, g, beta, s0), l2)
    assert out.dtype == q.dtype and out.shape == (b, t, hv, v)
    assert state.dtype == torch.float32 and state.shape == (b, hv, k, v)
    assert _rel(out, want) < TOL[dtype]
    assert _rel(state, want_s) < (1e-5 if dtype == "float32" else 1e-3)
    out2, none = ops.recurrent_gated_delta_rule(q, kk, vv, g, beta, s0, False, l2)
    assert none is None and torch.equal(out2, out)


CHUNK_CASES = [  # ((B, T, H, HV, K, V), chunk_size, dtype, initial state, l2norm)
    ((1, 37, 1, 1, 12, 20), 16, "float32", True, False),  # three chunks, the last partial
    ((2, 21, 1, 2, 16, 24), 16, "float32", False, True),  # grouped heads, l2norm
    ((1, 70, 2, 2, 32, 16), 32, "float16", True, True),
    ((1, 18, 1, 2, 24, 40), 16, "bfloat16", True, False),
]


@pytest.mark.parametrize("case", CHUNK_CASES, ids=lambda c: "-".join(map(str, (*c[0], *c[1:]))))
def test_chunked_matches_the_reference_and_the_recurrent_form(case: tuple) -> None:
    (b, t, h, hv, k, v), cs, dtype, init, l2 = case
    q, kk, vv, g, beta, s0 = _inputs(b, t, h, hv, k, v, dtype, init, seed=1)
    out, state = ops.chunk_gated_delta_rule(q, kk, vv, g, beta, cs, s0, True, l2)
    want, want_s = chunk_reference(*_np(q, kk, vv, g, beta), cs, _np(s0)[0], l2)
    assert out.dtype == q.dtype and out.shape == (b, t, hv, v)
    assert state.dtype == torch.float32 and state.shape == (b, hv, k, v)
    assert _rel(out, want) < TOL[dtype]
    assert _rel(state, want_s) < (1e-5 if dtype == "float32" else 1e-3)
    rec, rec_s = ops.recurrent_gated_delta_rule(q, kk, vv, g, beta, s0, True, l2)
    assert _rel(out, rec.double().numpy()) < TOL[dtype]
    assert _rel(state, rec_s.double().numpy()) < (1e-5 if dtype == "float32" else 1e-3)


def test_numpy_and_fl_tensors_in_and_out() -> None:
    q, k, v, g, beta, s0 = (x.numpy() for x in _inputs(1, 9, 1, 1, 8, 8, "float32", True))
    want, want_s = recurrent_reference(q, k, v, g, beta, s0)
    out, state = ops.chunk_gated_delta_rule(q, k, v, g, beta, 16, s0, True)
    assert isinstance(out, np.ndarray) and isinstance(state, np.ndarray)
    assert _rel(out, want) < 1e-5 and _rel(state, want_s) < 1e-5
    fq, fk, fv, fg, fb = (fl.asarray(x) for x in (q, k, v, g, beta))
    out, state = ops.recurrent_gated_delta_rule(fq, fk, fv, fg, fb, None, True)
    assert isinstance(out, fl.Tensor) and isinstance(state, fl.Tensor)
    assert _rel(out.numpy(), recurrent_reference(q, k, v, g, beta)[0]) < 1e-5


def test_torch_operators_fake_kernels_and_compile() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v, g, beta, s0 = _inputs(1, 10, 1, 2, 8, 12, "float32", True)
    want, want_s = recurrent_reference(*_np(q, k, v, g, beta, s0))
    out, st = torch.ops.fearless.recurrent_gated_delta_rule(q, k, v, g, beta, s0, True)
    assert _rel(out, want) < 1e-5 and _rel(st, want_s) < 1e-5
    out, st = torch.ops.fearless.chunk_gated_delta_rule(q, k, v, g, beta, 16, s0, False)
    assert _rel(out, want) < 1e-5 and st.shape == (0,)
    with FakeTensorMode():
        fq, fv = torch.empty(2, 7, 2, 16, dtype=torch.bfloat16), torch.empty(2, 7, 4, 8)
        fg = torch.empty(2, 7, 4)
        out, st = torch.ops.fearless.chunk_gated_delta_rule(
            fq, fq, fv.bfloat16(), fg, fg, 64, None, True
        )
        assert out.shape == (2, 7, 4, 8) and out.dtype == torch.bfloat16
        assert st.shape == (2, 4, 16, 8) and st.dtype == torch.float32

    def block(q, k, v, g, beta, s0):  # type: ignore[no-untyped-def]
        return ops.chunk_gated_delta_rule(q, k, v, g, beta, 16, s0, True)

    out, st = torch.compile(block, fullgraph=True, backend="aot_eager")(q, k, v, g, beta, s0)
    assert _rel(out, want) < 1e-5 and _rel(st, want_s) < 1e-5


def test_refusals_are_fearless_errors() -> None:
    q, k, v, g, beta, s0 = _inputs(1, 6, 1, 2, 8, 8, "float32", True)
    rec, chunk = ops.recurrent_gated_delta_rule, ops.chunk_gated_delta_rule
    with pytest.raises(fl.KernelTypeError, match="has no backward yet"):
        rec(q, k, v.requires_grad_(), g, beta)
    with pytest.raises(fl.KernelTypeError, match="has no backward yet"):
        chunk(q, k, v, g, beta, initial_state=s0.requires_grad_())
    v, s0 = v.detach(), s0.detach()
    with torch.no_grad():
        assert chunk(q, k, v.requires_grad_(), g, beta)[0].shape == (1, 6, 2, 8)
    v = v.detach()
    with pytest.raises(fl.KernelTypeError, match=r"`chunk_size` .* must be one of 16, 32, 64, 128"):
        chunk(q, k, v, g, beta, 48)
    with pytest.raises(fl.KernelTypeError, match="dtypes"):
        rec(q, k.half(), v, g, beta)
    q2 = q.expand(1, 6, 2, 8).contiguous()  # H 2 over HV 1
    with pytest.raises(fl.KernelTypeError, match="HV a multiple of H"):
        rec(q2, q2, v[:, :, :1], g[..., :1], beta[..., :1])
    with pytest.raises(fl.KernelTypeError, match=r"`g` .* must have shape \(B, T, HV\)"):
        rec(q, k, v, g[..., :1], beta)
    with pytest.raises(fl.KernelTypeError, match=r"`initial_state` .* \(B, HV, K, V\)"):
        chunk(q, k, v, g, beta, 16, s0[:, :1])
    with pytest.raises(fl.KernelTypeError, match="takes f32, f16, bf16 tensors, but `beta`"):
        rec(q, k, v, g, beta.int())
    with pytest.raises(fl.KernelTypeError, match=r"`output_final_state` .* must be a bool"):
        rec(q, k, v, g, beta, None, 1)
    with pytest.raises(fl.KernelTypeError, match="at least one batch, step"):
        chunk(q[:, :0], k[:, :0], v[:, :0], g[:, :0], beta[:, :0])


@pytest.mark.parametrize("final", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_the_kernels_compile_through_tileiras(cubin: Callable[..., bytes], final: bool) -> None:
    dt, f32 = fl.bf16, fl.f32
    b, t, h, hv, k, v, cs = 1, 100, 2, 4, 64, 64, 64
    q, vv = fl.zeros((b, t, h, k), dtype=dt), fl.zeros((b, t, hv, v), dtype=dt)
    g, beta = fl.zeros((b, t, hv), dtype=f32), fl.zeros((b, t, hv), dtype=dt)
    s0 = fl.zeros((b, hv, k, v), dtype=f32)
    state = fl.empty((b, 1, hv, k, v), dtype=f32).partition((1, 1, 1, k, 64)) if final else None
    out = fl.empty((b, t, hv, 1, v), dtype=dt).partition((1, 128, 1, 1, 64))
    kernel = make_recurrent(dt, f32, dt, final, True, occupancy=2)
    assert cubin(kernel, out, state, q, q, vv, g, beta, s0, 0.125, 2, k)
    if not final:
        nc = 2
        parts = [
            fl.empty((b, hv, nc, cs, n), dtype=f32).partition((1, 1, 1, cs, n)) for n in (v, k, 1)
        ]
        assert cubin(make_chunk_prepare(dt, f32, dt, True), *parts, q, vv, g, beta, 2, 64)
        return
    u, w, gc = (fl.zeros((b, hv, 2, cs, n), dtype=f32) for n in (v, k, 1))
    kernel = make_chunk_inter(dt, True, True, occupancy=2)
    assert cubin(kernel, out, state, q, q, u, w, gc, s0, 0.125, 2, k, cs)
