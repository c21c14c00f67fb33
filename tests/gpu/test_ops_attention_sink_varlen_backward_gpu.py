"""The backward of `fearless.ops.attention_sink` and `fmha_varlen` on the GPU at GPT-OSS-like
shapes (64 query heads over 8 KV heads, D 64, sm_scale 0.125, learned sinks, the sliding
layers' 128-key window, start_q for a chunk after a prefix) and ragged padded batches: torch
autograd through the operators against torch autograd of the float64 references
(tests/support/attention_sink_ref.py's and attention_varlen_ref.py's torch forms) on the GPU,
from the same inputs, in f32 (tight) and bf16 (loose)."""

from __future__ import annotations

from typing import Any

import pytest

from fearless import ops
from support.attention_sink_ref import attention_sink_torch
from support.attention_varlen_ref import fmha_varlen_torch

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

TOL = {"float32": 1e-4, "bfloat16": 3e-2}


def _rel(got: Any, want: Any) -> float:
    want = want.detach()
    return float((got.detach().double() - want).norm() / max(float(want.norm()), 1e-30))


SINK_CASES = [  # ((B, L, S, H_kv, G, D), window, start_q, dtype)
    ((1, 2048, 2048, 8, 8, 64), None, 0, "bfloat16"),  # GPT-OSS's full layers
    ((1, 2048, 2048, 8, 8, 64), 128, 0, "bfloat16"),  # its sliding layers
    ((2, 1000, 1500, 8, 8, 64), 128, 500, "float32"),  # a chunk after a prefix
    ((1, 777, 1200, 8, 8, 64), None, "tensor", "float32"),  # start_q a GPU tensor (423)
]


@pytest.mark.parametrize("case", SINK_CASES, ids=lambda c: "-".join(map(str, (*c[0], *c[1:]))))
def test_attention_sink_gradients_match_torch_autograd(case: tuple) -> None:
    (b, lq, s, hk, g, d), w, start, dtype = case
    gen = torch.Generator(device="cuda").manual_seed(lq + s)

    def make(*shape: int) -> Any:
        return torch.randn(*shape, device="cuda", generator=gen).to(getattr(torch, dtype))

    q, k, v = make(b, lq, hk, g, d), make(b, s, hk, d), make(b, s, hk, d)
    sinks, dout = make(hk * g) * 2, make(b, lq, hk * g * d)
    st = torch.tensor([s - lq], dtype=torch.int32, device="cuda") if start == "tensor" else start
    leaves = [t.requires_grad_() for t in (q, k, v, sinks)]
    out = ops.attention_sink(*leaves, 0.125, w, st)
    out.backward(dout)
    ref = [t.detach().double().requires_grad_() for t in leaves]
    want = attention_sink_torch(*ref, 0.125, w, s - lq if start == "tensor" else start)
    want.backward(dout.double())
    assert _rel(out, want) < TOL[dtype]
    for got, r in zip(leaves, ref, strict=True):
        assert got.grad is not None and got.grad.dtype == got.dtype
        assert torch.isfinite(got.grad).all() and _rel(got.grad, r.grad) < 2 * TOL[dtype]


VARLEN_CASES = [  # ((B, H, H_kv, L, S, D), causal, q_lens, kv_lens, dtype)
    ((4, 32, 8, 1024, 1024, 128), True, [1024, 700, 1, 0], [1024, 900, 513, 20], "bfloat16"),
    ((3, 16, 4, 600, 800, 64), False, [600, 333, 17], [0, 800, 64], "float32"),
    ((2, 16, 16, 512, 512, 64), True, None, None, "float32"),
]


@pytest.mark.parametrize("case", VARLEN_CASES, ids=lambda c: "-".join(map(str, (*c[0], c[1]))))
def test_fmha_varlen_gradients_match_torch_autograd(case: tuple) -> None:
    (b, h, hk, lq, s, d), causal, ql, kl, dtype = case
    gen = torch.Generator(device="cuda").manual_seed(lq + s + 1)

    def make(*shape: int) -> Any:
        return torch.randn(*shape, device="cuda", generator=gen).to(getattr(torch, dtype))

    q, k, v, dout = make(b, h, lq, d), make(b, hk, s, d), make(b, hk, s, d), make(b, h, lq, d)
    lens = [None if x is None else torch.tensor(x, device="cuda") for x in (ql, kl)]
    leaves = [t.requires_grad_() for t in (q, k, v)]
    out = ops.fmha_varlen(*leaves, None, causal, *lens)
    out.backward(dout)
    ref = [t.detach().double().requires_grad_() for t in leaves]
    want = fmha_varlen_torch(*ref, None, causal, ql, kl)
    want.backward(dout.double())
    assert _rel(out, want) < TOL[dtype]
    for got, r in zip(leaves, ref, strict=True):
        assert got.grad is not None and got.grad.dtype == got.dtype
        assert torch.isfinite(got.grad).all() and _rel(got.grad, r.grad) < 2 * TOL[dtype]
