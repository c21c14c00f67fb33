"""The backward of `fearless.ops.fmha`, `swa_attention` and `gemma_attention` on the GPU at
TileGym-like shapes (its tests/ops attention tests: bf16, D 128, GQA, L == S and L != S, Mistral's
4096-key window, Gemma 2's soft cap 50 and window): torch autograd through the operators against
torch autograd of tests/support/attention_variants_ref.py's float64 reference on the GPU, from
the same bf16 inputs."""

from __future__ import annotations

from typing import Any

import pytest

from fearless import ops
from support.attention_variants_ref import bounds, variant_attention

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

OPS = {"fmha": ops.fmha, "swa": ops.swa_attention, "gemma": ops.gemma_attention}

CASES = [  # (op, (B, H, H_kv, L, S, D), kwargs)
    ("fmha", (2, 16, 4, 1024, 1024, 128), {}),
    ("fmha", (1, 8, 8, 500, 1500, 128), {}),  # bottom-right diagonal
    ("fmha", (1, 8, 2, 1500, 700, 64), {"is_causal": False}),
    ("swa", (2, 8, 2, 2048, 2048, 128), {"window_size": 512}),
    ("swa", (1, 8, 2, 700, 1300, 128), {"window_size": 4096}),
    ("gemma", (2, 8, 4, 1024, 1024, 256), {"soft_cap": 50.0}),
    ("gemma", (1, 8, 4, 900, 1200, 128), {"soft_cap": 50.0, "window_size": 256}),
    ("gemma", (1, 4, 4, 800, 600, 128), {"window_size": 100, "is_causal": False}),
]


def _rel(got: Any, want: Any) -> float:
    return float((got.float() - want).norm() / want.norm())


@pytest.mark.parametrize("atomic", [False, True], ids=["three-kernels", "atomic-dq"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{'-'.join(map(str, c[1]))}")
def test_gradients_match_torch_autograd(
    case: tuple, atomic: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also with FlashAttention-2's dQ (`DQ_BY_ATOMICS_UP_TO`: relaxed f32 atomics on the GPU)."""
    from fearless.ops import kernels_attention_backward as KB

    monkeypatch.setattr(KB, "DQ_BY_ATOMICS_UP_TO", 1 << 16 if atomic else 0)
    name, (b, h, hk, lq, s, d), kw = case
    g = torch.Generator(device="cuda").manual_seed(lq + s)

    def make(*shape: int) -> Any:
        return torch.randn(*shape, device="cuda", generator=g).to(torch.bfloat16)

    q, k, v = make(b, h, lq, d).requires_grad_(), make(b, hk, s, d), make(b, hk, s, d)
    k.requires_grad_()
    v.requires_grad_()
    dout = make(b, h, lq, d)
    out = OPS[name](q, k, v, **kw)
    out.backward(dout)
    ref = [t.detach().float().requires_grad_() for t in (q, k, v)]
    want = variant_attention(*ref, kw.get("scaling"), **bounds(name, kw)).float()
    want.backward(dout.float())
    assert _rel(out, want) < 2e-2
    for got, w in zip((q, k, v), ref, strict=True):
        assert got.grad is not None and got.grad.dtype == torch.bfloat16
        assert torch.isfinite(got.grad).all() and _rel(got.grad, w.grad) < 3e-2
