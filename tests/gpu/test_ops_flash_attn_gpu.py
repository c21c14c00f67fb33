"""`fearless.ops.flash_attn_func` on the GPU (tests/test_ops_flash_attn.py has the simulator's
side): bf16 and f16 at prefill shapes in flash-attn's (B, L, H, D) layout, causal square against
torch's SDPA, L != S with a window and a soft cap against the float64 reference of TileGym's
variants, and a training step's gradients against torch autograd of SDPA."""

from __future__ import annotations

from typing import Any

import pytest

from fearless import ops
from support.attention_variants_ref import variant_attention

torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _data(*shape: int, dtype: Any = torch.bfloat16) -> Any:
    return torch.randn(*shape, device="cuda", dtype=dtype)


def _rel(got: Any, want: Any) -> float:
    return float((got.double() - want.double()).norm() / want.double().norm())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("b,length,h,hk", [(2, 2048, 32, 8), (1, 1000, 16, 16)])
def test_causal_matches_sdpa(dtype: Any, b: int, length: int, h: int, hk: int) -> None:
    q, k, v = _data(b, length, h, 128, dtype=dtype), _data(b, length, hk, 128, dtype=dtype), _data(b, length, hk, 128, dtype=dtype)  # fmt: skip
    with torch.no_grad():
        out = ops.flash_attn_func(q, k, v, causal=True)
        views = (x.transpose(1, 2) for x in (q, k, v))
        want = F.scaled_dot_product_attention(*views, is_causal=True, enable_gqa=hk != h)
    assert out.shape == q.shape and out.is_contiguous()
    assert _rel(out, want.transpose(1, 2)) < 1e-2


def test_window_and_soft_cap_with_fewer_queries() -> None:
    q, k, v = _data(2, 300, 16, 128), _data(2, 1024, 8, 128), _data(2, 1024, 8, 128)
    with torch.no_grad():
        out = ops.flash_attn_func(q, k, v, causal=True, window_size=(256, -1), softcap=30.0)
    views = (x.transpose(1, 2) for x in (q, k, v))
    want = variant_attention(*views, causal=True, left=256, cap=30.0).transpose(1, 2)
    assert _rel(out, want) < 1e-2


def test_training_gradients_match_sdpa() -> None:
    leaves = [_data(2, 512, n, 64).requires_grad_() for n in (8, 4, 4)]
    ops.flash_attn_func(*leaves, causal=True).float().square().sum().backward()
    ref = [x.detach().clone().requires_grad_() for x in leaves]
    views = (x.transpose(1, 2) for x in ref)
    out = F.scaled_dot_product_attention(*views, is_causal=True, enable_gqa=True)
    out.transpose(1, 2).float().square().sum().backward()
    for got, want in zip(leaves, ref, strict=True):
        assert _rel(got.grad, want.grad) < 2e-2
