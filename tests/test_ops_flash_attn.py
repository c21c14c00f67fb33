"""`fearless.ops.flash_attn_func` on the simulator: flash-attn's layout (q (B, L, H, D), k and v
(B, S, H_kv, D)), its bottom-right causal diagonal where L != S, `window_size`, `softcap` and
grouped-query heads, against the float64 reference of TileGym's variants; a dense (B, L, H, D)
output; strided inputs (a packed qkv's views), NumPy inputs; gradients in training against
torch autograd; torch.compile; and the refusals."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config, ops
from support.attention_variants_ref import variant_attention

torch = pytest.importorskip("torch")

B, L, S, H, HK, D = 2, 40, 56, 4, 2, 16


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")


def _qkv(lq: int = L, s: int = S, seed: int = 0) -> tuple[Any, Any, Any]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, n, h, D, generator=g) for b, n, h in ((B, lq, H), (B, s, HK), (B, s, HK)))  # type: ignore[return-value]  # fmt: skip


def _reference(q: Any, k: Any, v: Any, **kw: Any) -> Any:
    """The float64 reference over (B, H, L, D) views, back in flash-attn's layout."""
    views = (x.transpose(1, 2) for x in (q, k, v))
    return variant_attention(*views, **kw).transpose(1, 2)


@pytest.mark.parametrize(
    "kw,ref",
    [
        ({}, {"causal": False}),
        ({"causal": True}, {"causal": True}),
        ({"causal": True, "window_size": (10, -1)}, {"causal": True, "left": 10}),
        ({"window_size": (6, 3)}, {"causal": False, "left": 6, "right": 3}),
        ({"causal": True, "softcap": 5.0}, {"causal": True, "cap": 5.0}),
        ({"softmax_scale": 0.3}, {"causal": False, "scaling": 0.3}),
    ],
)
@pytest.mark.parametrize("lq", [L, S, 24])
def test_matches_flash_attn_semantics(kw: dict[str, Any], ref: dict[str, Any], lq: int) -> None:
    q, k, v = _qkv(lq)
    out = ops.flash_attn_func(q, k, v, **kw)
    assert out.shape == (B, lq, H, D) and out.is_contiguous()
    assert (out.double() - _reference(q, k, v, **ref)).abs().max() < 2e-5


def test_strided_and_numpy_inputs() -> None:
    """q, k, v as views of one packed qkv tensor (strided: copied in), and NumPy arrays."""
    qkv = torch.randn(B, L, 3, H, D, generator=torch.Generator().manual_seed(3))
    q, k, v = qkv.unbind(2)
    out = ops.flash_attn_func(q, k, v, causal=True)
    want = _reference(q, k, v, causal=True)
    assert (out.double() - want).abs().max() < 2e-5
    got = ops.flash_attn_func(*(x.contiguous().numpy() for x in (q, k, v)), causal=True)
    assert isinstance(got, np.ndarray) and np.abs(got - want.numpy()).max() < 2e-5


def test_gradients_match_torch_autograd() -> None:
    leaves = [x.requires_grad_() for x in _qkv(seed=5)]
    out = ops.flash_attn_func(*leaves, causal=True, window_size=(12, -1))
    assert out.is_contiguous()
    out.square().sum().backward()
    ref = [x.detach().double().requires_grad_() for x in leaves]
    _reference(*ref, causal=True, left=12).square().sum().backward()
    for got, want in zip(leaves, ref, strict=True):
        assert (got.grad.double() - want.grad).abs().max() < 1e-4


def test_torch_compile_traces_it() -> None:
    q, k, v = _qkv(seed=7)

    def layer(q: Any, k: Any, v: Any) -> Any:
        return ops.flash_attn_func(q, k, v, causal=True).reshape(B, L, H * D)

    got = torch.compile(layer, fullgraph=True, backend="aot_eager")(q, k, v)
    want = _reference(q, k, v, causal=True).reshape(B, L, H * D)
    assert (got.double() - want).abs().max() < 2e-5


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"dropout_p": 0.1}, "no attention dropout"),
        ({"alibi_slopes": torch.ones(H)}, "no ALiBi"),
        ({"return_attn_probs": True}, "does not return attention probabilities"),
        ({"window_size": (3,)}, "must be two ints"),
        ({"window_size": (-2, 0)}, "-1 \\(unbounded\\) or more"),
        ({"softcap": -1.0}, "must be 0 \\(none\\) or above"),
    ],
)
def test_refusals(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(fl.FearlessError, match=match):
        ops.flash_attn_func(*_qkv(), **kw)


def test_heads_major_tensors_are_refused_with_the_way_out() -> None:
    q, k, v = _qkv()
    with pytest.raises(fl.FearlessError, match="flash-attn's layout") as err:
        ops.flash_attn_func(q[0], k[0], v[0])
    assert "fearless.ops.fmha" in str(err.value)


def test_mismatched_heads_are_said_in_the_callers_layout() -> None:
    """Heads that do not divide (3 over 2) are named in flash-attn's (B, L, H, D) layout, the
    shapes as passed (not the (B, H, L, D) views the kernels take)."""
    q = torch.randn(1, 4, 3, 16)
    k = v = torch.randn(1, 4, 2, 16)
    with pytest.raises(fl.KernelTypeError, match=r"got q \(1, 4, 3, 16\), k \(1, 4, 2, 16\)"):
        ops.flash_attn_func(q, k, v)
