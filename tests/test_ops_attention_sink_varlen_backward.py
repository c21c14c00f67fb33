"""The backward of `fearless.ops.attention_sink` and `fmha_varlen`: torch autograd through
`torch.ops.fearless.attention_sink_backward` / `fmha_varlen_backward` (flash attention's backward
kernels in their ragged forms, ops/kernels_attention_ragged_backward.py) against torch autograd
of the float64 references, on the simulator at ragged shapes with small tiles: GQA, the window
and start_q (as an int and as a tensor), the sinks' gradient, rows that see no key, zero-length
sequences, f32 tight and bf16 loose; the Python forms; opcheck; a kernel through tileiras."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops import kernels_attention_backward as KB
from fearless.ops import kernels_attention_ragged_backward as KR
from support.attention_sink_ref import attention_sink_torch
from support.attention_varlen_ref import fmha_varlen_torch

torch = pytest.importorskip("torch")

TOL = {"float32": 2e-5, "bfloat16": 3e-2}


def _rel(got: Any, want: Any) -> float:
    want = want.detach()
    return float((got.detach().double() - want).norm() / max(float(want.norm()), 1e-30))


def _compare(got: list, want: list, dtype: str, names: tuple) -> None:
    for what, g, w in zip(names, got, want, strict=True):
        assert g.shape == w.shape, what
        assert torch.isfinite(g).all(), what
        assert _rel(g, w) < TOL[dtype] * (1 if what == "out" else 2), (what, _rel(g, w))


# ------------------------------------------------------------------------------------ sinks


def _sink_inputs(b: int, lq: int, s: int, hk: int, g: int, d: int, dtype: str) -> list[Any]:
    gen = torch.Generator().manual_seed(lq * 1000 + s)
    shapes = ((b, lq, hk, g, d), (b, s, hk, d), (b, s, hk, d), (hk * g,), (b, lq, hk * g * d))
    xs = [torch.randn(*x, generator=gen) for x in shapes]
    xs[3] = xs[3] * 2  # sinks that matter
    return [x.to(getattr(torch, dtype)) for x in xs]


def _sink_grads(shape: tuple, dtype: str, scale: float, w: Any, start: Any) -> tuple:
    """((out, dq, dk, dv, dsinks) of the operator, the same of the float64 reference)."""
    q, k, v, sinks, dout = _sink_inputs(*shape, dtype)
    leaves = [t.requires_grad_() for t in (q, k, v, sinks)]
    out = ops.attention_sink(*leaves, scale, w, start)
    out.backward(dout)
    ref = [t.detach().double().requires_grad_() for t in leaves]
    st = int(start) if isinstance(start, int) else int(start.item())
    want = attention_sink_torch(*ref, scale, w, st)
    want.backward(dout.double())
    return [out, *(t.grad for t in leaves)], [want, *(t.grad for t in ref)]


SINK_CASES = [  # ((B, L, S, H_kv, G, D), (query rows, keys) per tile, dtype, scale, window, start)
    ((1, 37, 70, 2, 2, 16), (16, 32), "float32", 0.125, None, 0),  # GQA, ragged
    ((2, 30, 45, 2, 2, 16), (16, 16), "float32", 0.25, 4, 15),  # window of 4, start_q
    ((1, 40, 20, 1, 3, 16), (32, 16), "float32", 0.2, None, -5),  # 5 rows see no key
    ((1, 33, 50, 1, 4, 24), (16, 16), "float32", 0.3, 8, "t17"),  # start_q a tensor, D 24
    ((1, 45, 64, 2, 2, 16), (64, 64), "bfloat16", 0.125, 6, 19),
]


@pytest.mark.parametrize("case", SINK_CASES, ids=lambda c: "-".join(map(str, (*c[0], *c[2:]))))
def test_sink_gradients_match_autograd_of_the_reference(
    case: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    shape, tiles, dtype, scale, w, start = case
    monkeypatch.setattr(KB, "BACKWARD_TILES", tiles)
    if isinstance(start, str):
        start = torch.tensor([int(start[1:])], dtype=torch.int32)
    got, want = _sink_grads(shape, dtype, scale, w, start)
    _compare(got, want, dtype, ("out", "dq", "dk", "dv", "dsinks"))
    assert got[4].dtype == getattr(torch, dtype)


def test_the_sink_gradient_is_minus_p_sink_times_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    """d sinks[h] = -sum over the batch and the rows of head h of P_sink * rowsum(dO * O), with
    P_sink = exp(sink - lse) (lse holding the sink); rows that see no key (start_q = -6) add
    nothing, and their dq is exactly 0."""
    monkeypatch.setattr(KB, "BACKWARD_TILES", (16, 16))
    q, k, v, sinks, dout = _sink_inputs(2, 26, 30, 2, 2, 16, "float32")
    leaves = [t.requires_grad_() for t in (q, k, v, sinks)]
    out = ops.attention_sink(*leaves, 0.25, 5, -6)
    out.backward(dout)
    b, lq, hk, g, d = q.shape
    qd, kd = q.detach().double(), k.double()
    logits = torch.einsum("bqhmd,bkhd->bhmqk", qd, kd) * 0.25
    pos = torch.arange(lq)[:, None] - 6
    keys = torch.arange(k.shape[1])[None, :]
    logits = logits.masked_fill((keys > pos) | (keys < pos - 4), -torch.inf)
    sk = sinks.detach().double().reshape(1, hk, g, 1)
    lse = torch.logaddexp(torch.logsumexp(logits, -1), sk)  # (B, H_kv, G, L)
    o = out.detach().double().reshape(b, lq, hk, g, d)
    delta = torch.einsum("bqhmd,bqhmd->bhmq", dout.double().reshape(o.shape), o)
    want = -(torch.exp(sk - lse) * delta).sum((0, 3)).reshape(-1)
    assert sinks.grad is not None and _rel(sinks.grad, want) < 2e-5
    assert q.grad is not None
    assert torch.equal(q.grad[:, :6], torch.zeros_like(q.grad[:, :6]))
    assert not torch.equal(q.grad[:, 6], torch.zeros_like(q.grad[:, 6]))


# ----------------------------------------------------------------------------------- varlen


def _varlen_inputs(b: int, h: int, hk: int, lq: int, s: int, d: int, dtype: str) -> list[Any]:
    gen = torch.Generator().manual_seed(lq * 1000 + s + 7)
    shapes = ((b, h, lq, d), (b, hk, s, d), (b, hk, s, d), (b, h, lq, d))
    return [torch.randn(*x, generator=gen).to(getattr(torch, dtype)) for x in shapes]


VARLEN_CASES = [  # ((B, H, H_kv, L, S, D), tiles, dtype, causal, q_lens, kv_lens)
    ((3, 4, 2, 37, 50, 16), (16, 16), "float32", True, [37, 0, 20], [50, 33, 5]),  # LQ 0; LQ > LK
    ((2, 2, 1, 30, 20, 16), (16, 32), "float32", False, [30, 7], [0, 20]),  # LK 0
    ((2, 2, 2, 20, 40, 24), (32, 16), "float32", True, "tensor", [10, 40]),  # lengths as tensor
    ((2, 4, 1, 33, 33, 16), (16, 16), "float32", True, None, None),  # no lengths: fmha
    ((2, 4, 2, 45, 70, 16), (64, 64), "bfloat16", True, [40, 45], [70, 13]),
]


@pytest.mark.parametrize("case", VARLEN_CASES, ids=lambda c: "-".join(map(str, (*c[0], *c[2:4]))))
def test_varlen_gradients_match_autograd_of_the_reference(
    case: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Padded rows and keys past each sequence get zero gradients (the reference's too)."""
    shape, tiles, dtype, causal, ql, kl = case
    monkeypatch.setattr(KB, "BACKWARD_TILES", tiles)
    q, k, v, dout = _varlen_inputs(*shape, dtype)
    if ql == "tensor":
        ql = [shape[3], shape[3] - 3]
        lens = torch.tensor(ql, dtype=torch.int32), torch.tensor(kl, dtype=torch.int64)
    else:
        lens = ql, kl
    leaves = [t.requires_grad_() for t in (q, k, v)]
    out = ops.fmha_varlen(*leaves, 0.3, causal, *lens)
    out.backward(dout)
    ref = [t.detach().double().requires_grad_() for t in leaves]
    want = fmha_varlen_torch(*ref, 0.3, causal, ql, kl)
    want.backward(dout.double())
    got = [out, *(t.grad for t in leaves)]
    _compare(got, [want, *(t.grad for t in ref)], dtype, ("out", "dq", "dk", "dv"))
    nqs, nks = ql or [shape[3]] * shape[0], kl or [shape[4]] * shape[0]
    for bi, (nq, nk) in enumerate(zip(nqs, nks, strict=True)):
        assert torch.equal(got[1][bi, :, nq:], torch.zeros_like(got[1][bi, :, nq:]))
        for dkv in got[2:]:
            assert torch.equal(dkv[bi, :, nk:], torch.zeros_like(dkv[bi, :, nk:]))


# ------------------------------------------------------------------- forms, opcheck, compile


def test_the_backward_functions_take_numpy_and_fl_tensors() -> None:
    """Called directly: NumPy and fl.Tensor operands give NumPy and fl.Tensor gradients, equal
    to torch autograd's (through the operators)."""
    q, k, v, sinks, dout = _sink_inputs(1, 12, 20, 2, 2, 16, "float32")
    leaves = [t.clone().requires_grad_() for t in (q, k, v, sinks)]
    out = ops.attention_sink(*leaves, 0.2, 4, 3)
    out.backward(dout)
    arrays = [t.numpy() for t in (dout, q, k, v, sinks, out.detach())]
    qv, kv_, vv, dv = _varlen_inputs(2, 2, 1, 10, 12, 16, "float32")
    vleaves = [t.clone().requires_grad_() for t in (qv, kv_, vv)]
    vout = ops.fmha_varlen(*vleaves, None, True, [10, 4], [3, 12])
    vout.backward(dv)
    varrays = [t.numpy() for t in (dv, qv, kv_, vv, vout.detach())]
    for form in (lambda a: a, fl.asarray):
        grads = ops.attention_sinks.attention_sink_backward(*map(form, arrays), 0.2, 4, 3)
        vgrads = ops.attention_varlen.fmha_varlen_backward(
            *map(form, varrays), None, True, [10, 4], [3, 12]
        )
        for got, leaf in zip((*grads, *vgrads), (*leaves, *vleaves), strict=True):
            assert isinstance(got, type(form(arrays[0])))
            arr = got if isinstance(got, np.ndarray) else got.numpy()
            np.testing.assert_allclose(arr, leaf.grad.numpy(), rtol=1e-5, atol=1e-5)


def _opcheck_cases() -> list[tuple[str, Callable[[], tuple]]]:
    def sink(grad: bool) -> Callable[[], tuple]:
        def make() -> tuple:
            q, k, v, sinks, dout = _sink_inputs(1, 10, 13, 2, 2, 16, "float32")
            ins = [t.requires_grad_(grad) for t in (q, k, v, sinks)]
            st = torch.tensor([2], dtype=torch.int32)
            if grad:
                return (*ins, 0.2, 3, st)
            return (dout, *ins, torch.randn(dout.shape), 0.2, 3, st)

        return make

    def varlen(grad: bool) -> Callable[[], tuple]:
        def make() -> tuple:
            q, k, v, dout = _varlen_inputs(2, 4, 2, 10, 13, 16, "float32")
            ins = [t.requires_grad_(grad) for t in (q, k, v)]
            lens = torch.tensor([10, 4], dtype=torch.int32), torch.tensor([3, 13])
            if grad:
                return (*ins, None, True, *lens)
            return (dout, *ins, torch.randn(q.shape), 0.3, False, *lens)

        return make

    return [
        ("attention_sink", sink(True)),
        ("attention_sink_backward", sink(False)),
        ("fmha_varlen", varlen(True)),
        ("fmha_varlen_backward", varlen(False)),
    ]


@pytest.mark.parametrize(
    ("name", "make"), _opcheck_cases(), ids=lambda c: c if isinstance(c, str) else ""
)
def test_torch_library_opcheck(name: str, make: Callable[[], tuple]) -> None:
    """torch's checker of custom ops: schema, fake kernel, autograd registration and AOT
    dispatch, whose gradients it compares with eager's."""
    torch.library.opcheck(getattr(torch.ops.fearless, name).default, make())


def _ragged_launches(sink: bool) -> list[tuple[Callable[..., Any], tuple, tuple]]:
    """(factory, its arguments after dt, the kernel's arguments): bf16 at 64 x 64 tiles, q of
    (2, 4, 256, 64), k / v of (2, 2, 200, 64)."""
    lq, s = 256, 200
    q = fl.zeros((2, 4, lq, 64), dtype=fl.bf16)
    kv = fl.zeros((2, 2, s, 64), dtype=fl.bf16)
    stats = fl.zeros((2, 4, lq))
    lse, delta = (fl.empty((2, 4, lq)).partition((1, 1, 64)) for _ in range(2))
    dk, dv = (fl.empty((2, 2, s, 64), dtype=fl.bf16).partition((1, 1, 64, 64)) for _ in range(2))
    dq = fl.empty((2, 4, lq, 64), dtype=fl.bf16).partition((1, 1, 64, 64))
    if sink:
        aux = (fl.zeros((4,), dtype=fl.bf16), fl.zeros((1,), dtype=fl.i32))
        variant, extra = (False, True, False, False, ("sink", fl.bf16)), (127, 0, 1.0)
    else:
        aux = (fl.zeros((2,), dtype=fl.i32), fl.zeros((2,), dtype=fl.i32))
        variant, extra = (False, False, False, False, ("varlen", fl.i32)), (0, 0, 1.0)
    flags = (True, True, variant)
    return [
        (KB.make_attention_stats, flags, (lse, delta, q, kv, q, q, *aux, None, 0.125, *extra, 64, 64, 2)),
        (KB.make_attention_dkdv, flags, (dk, dv, None, q, kv, kv, q, stats, stats, *aux, None, 0.125, *extra, 64, 2)),
        (KB.make_attention_dq, flags, (dq, q, kv, kv, q, stats, stats, *aux, None, 0.125, *extra, 64, 2)),
    ]  # fmt: skip


def test_the_sink_stats_kernel_compiles_through_tileiras(cubin: Callable[..., bytes]) -> None:
    """One compile here (the kernel with the most new code: the start offset, the window and
    the sink in the log-sum-exp); the others are the slow test's."""
    make, flags, args = _ragged_launches(True)[0]
    assert cubin(make(fl.bf16, *flags), *args)


@pytest.mark.slow
@pytest.mark.parametrize("sink", [True, False])
def test_the_ragged_backward_kernels_compile_through_tileiras(
    cubin: Callable[..., bytes], sink: bool
) -> None:
    for make, flags, args in _ragged_launches(sink)[(1 if sink else 0) :]:
        assert cubin(make(fl.bf16, *flags), *args), make.__name__
    if sink:
        x = fl.zeros((2, 256, 4, 64), dtype=fl.bf16)
        out = fl.empty((2, 4, 256, 64), dtype=fl.bf16).partition((1, 1, 64, 64))
        assert cubin(KR.make_swap(fl.bf16, True), out, x)
        ds = fl.empty((4,), dtype=fl.bf16).partition((1,))
        stats = fl.zeros((2, 4, 256))
        assert cubin(
            KR.make_sink_grads(fl.bf16), ds, fl.zeros((4,), dtype=fl.bf16), stats, stats, 64
        )
