"""The backward of `fearless.ops.scaled_dot_product_attention` with an `attn_mask` on the GPU
at training shapes (bf16, D 64 and 128, grouped-query heads): Hugging Face's left-padded causal
batch as a bool mask (the padded queries see no key: zero gradients), an additive bias with
is_causal and ragged L != S, a random bool mask per head; torch autograd through the operator
against torch autograd of tests/support/attention_mask_ref.py's reference in f32 on the GPU,
from the same bf16 inputs."""

from __future__ import annotations

from typing import Any

import pytest

from fearless import ops
from support.attention_mask_ref import masked_attention

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

CASES = [  # ((B, H, H_kv, L, S, D), mask form, causal)
    ((4, 16, 4, 1024, 1024, 128), "padding", False),  # causal and padding in the bool mask
    ((2, 8, 2, 700, 900, 64), "bias", True),  # (1, H, L, S) bf16 bias, ragged tiles
    ((1, 8, 8, 1500, 700, 128), "bool", False),  # (B, H, L, S) random
]


def _rel(got: Any, want: Any) -> float:
    return float((got.detach().float() - want).norm() / want.norm())


def _mask(form: str, b: int, h: int, lq: int, s: int, g: Any) -> Any:
    if form == "padding":  # row r's first pads[r] tokens are padding (Hugging Face's left pad)
        keep = torch.ones(lq, s, dtype=torch.bool, device="cuda").tril().repeat(b, 1, 1, 1)
        for r, pad in enumerate((0, 100, 517, 1000)[:b]):
            keep[r, :, :, :pad] = False
        return keep
    if form == "bias":
        return torch.randn(1, h, lq, s, device="cuda", generator=g).to(torch.bfloat16)
    keep = torch.rand(b, h, lq, s, device="cuda", generator=g) > 0.3
    keep[..., 0] = True
    return keep


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[1]}-{'-'.join(map(str, c[0]))}")
def test_gradients_match_torch_autograd(case: tuple) -> None:
    (b, h, hk, lq, s, d), form, causal = case
    g = torch.Generator(device="cuda").manual_seed(lq + s)

    def make(*shape: int) -> Any:
        return torch.randn(*shape, device="cuda", generator=g).to(torch.bfloat16)

    q, k, v = (make(b, x, n, d).requires_grad_() for x, n in ((h, lq), (hk, s), (hk, s)))
    mask = _mask(form, b, h, lq, s, g)
    dout = make(b, h, lq, d)
    out = ops.scaled_dot_product_attention(q, k, v, mask, causal, enable_gqa=hk != h)
    out.backward(dout)
    ref = [t.detach().float().requires_grad_() for t in (q, k, v)]
    want = masked_attention(*ref, mask, causal)
    want.backward(dout.float())
    assert _rel(out, want) < 2e-2
    for got, w in zip((q, k, v), ref, strict=True):
        assert got.grad is not None and got.grad.dtype == torch.bfloat16
        assert torch.isfinite(got.grad).all() and _rel(got.grad, w.grad) < 3e-2
    if form == "padding":  # the padded queries and keys of row 3 take no gradient
        assert q.grad is not None and k.grad is not None
        assert not q.grad[3, :, :1000].any() and not k.grad[3, :, :1000].any()
