"""What fearless.transformers puts into Hugging Face's Gemma, Gemma 2 and Gemma 3 besides the
Llama-like parts of layers.py: the forwards of their RMSNorm, whose scale is (1 + weight), and of
their GELU-gated MLP, and Gemma 2's soft-capped eager attention, on fearless.ops, each falling
back to Hugging Face's code for an input the op does not take. (Gemma 3's sliding-window
attention is layers.py's `_windowed`, on `fearless.ops.gemma_attention` in inference and
training.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .. import ops
from .layers import (
    _FLOATS,
    AttentionCall,
    _attention,
    _base_forward,
    is_attention_layout,
    is_causal_mask,
    is_window,
    stand_in,
)


def gelu_approximate(act_fn: object) -> str | None:
    """fearless's gelu `approximate` for the activation module a Gemma MLP calls (its
    `act_fn`, whichever config key chose it: Gemma's `hidden_act`, Gemma 2's and 3's
    `hidden_activation`): Hugging Face's GELUTanh (gelu_pytorch_tanh) is "tanh", its
    GELUActivation over torch's exact gelu is "none"; any other activation None."""
    name = type(act_fn).__name__
    if name in ("GELUTanh", "PytorchGELUTanh"):
        return "tanh"
    if name == "GELUActivation" and getattr(act_fn, "act", None) is torch.nn.functional.gelu:
        return "none"
    return None


def gemma_rms_norm_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """`Gemma3RMSNorm.forward` (and Gemma 2's), normalize(x) * (1 + weight) in f32 cast back to x's dtype, as
    `fearless.ops.rms_norm` of the weight 1 + weight (a differentiable torch add, so the
    weight's gradient flows). f32 activations: exactly Hugging Face's product. f16/bf16: the
    kernel takes the weight in x's dtype, so 1 + weight is rounded there first (Hugging Face
    keeps it in f32): within one unit in the last place of the result."""
    w = self.weight
    if x.dtype not in _FLOATS or w.dtype not in _FLOATS:
        return _base_forward(self, x)  # type: ignore[no-any-return]
    scale = (w.float() + 1.0).to(x.dtype)
    return ops.rms_norm(x, (w.shape[0],), scale, self.eps)  # type: ignore[no-any-return]


def gemma_mlp_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """Gemma's MLP, down(gelu(gate(x)) * up(x)), with the product as `fearless.ops.geglu` of
    [up, gate] (geglu is first half * gelu(second half)), for the tanh-approximated or exact
    GELU the module's `act_fn` computes; another activation or mixed dtypes run Hugging Face's
    code."""
    approximate = gelu_approximate(getattr(self, "act_fn", None))
    gate, up = self.gate_proj(x), self.up_proj(x)
    if approximate is None or gate.dtype not in _FLOATS or gate.dtype != up.dtype:
        return self.down_proj(self.act_fn(gate) * up)  # type: ignore[no-any-return]
    return self.down_proj(ops.geglu(torch.cat((up, gate), -1), approximate=approximate))  # type: ignore[no-any-return]


@stand_in
def capped_attention_function(original: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in for Gemma 2's `eager_attention_forward(module, query, key, value,
    attention_mask, dropout=0.0, scaling=None, softcap=None, **kwargs)` (the attention Gemma 2
    runs: Hugging Face gives it no `sdpa`, whose kernel has no soft cap): softmax(cap *
    tanh(q k^T * scaling / cap) + mask) v through `fearless.ops.gemma_attention` when
    `_capped_attention` takes the call; with no cap (`attn_logit_softcapping` None) and another
    mask (padding), fearless's masked `scaled_dot_product_attention` (layers.py's path); else
    `original`, Hugging Face's eager code (a padded batch with a cap among them)."""

    def eager_attention_forward(
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        dropout: float = 0.0,
        scaling: float | None = None,
        softcap: float | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        config = getattr(module, "config", None)
        weights = kwargs.get("output_attentions") or getattr(config, "output_attentions", False)
        call = AttentionCall(module, query, key, value, attention_mask, dropout, scaling, kwargs)
        if not weights:  # the fearless kernels make no attention weights
            out = _capped_attention(call, softcap)
            if out is None and softcap is None and attention_mask is not None:
                rest = {k: v for k, v in kwargs.items() if k != "sliding_window"}
                out = _attention(call._replace(kwargs=rest), None)
            if out is not None:
                return out, None
        return call.fall_back(original, softcap=softcap)  # type: ignore[no-any-return]

    return eager_attention_forward


def _capped_attention(call: AttentionCall, softcap: float | None) -> torch.Tensor | None:
    """Gemma 2's attention, a global layer's or a sliding-window layer's (`sliding_window` W),
    as (batch, seq, heads, head_dim) from `fearless.ops.gemma_attention(q, k, v, scaling,
    window_size, soft_cap, is_causal=True)`, or None where that is not Hugging Face's result:
    dropout, a non-causal module, another layout, a cap that is not a positive number, or a
    mask that is not exactly the causal (windowed) pattern of a prefill or decode without
    padding (`is_causal_mask`). With grad too (its autograd backward gives dq, dk, dv through
    the cap). The window as in layers.py's `_windowed`: window_size = W - 1."""
    module, q, k, v, mask, dropout, scaling, kwargs = call
    if (
        dropout
        or kwargs.get("position_bias") is not None
        or not getattr(module, "is_causal", False)
    ):
        return None
    window = kwargs.get("sliding_window")
    if window is not None and not is_window(window, least=2):
        return None  # W = 1: gemma_attention's window_size 0 means no window
    if softcap is not None and (
        isinstance(softcap, bool) or not isinstance(softcap, (int, float)) or not softcap > 0
    ):
        return None
    if not is_attention_layout(q, k, v):
        return None
    lq, s = q.shape[2], k.shape[2]
    if not lq or not s or not is_causal_mask(mask, lq, s, window):
        return None
    cap = None if softcap is None else float(softcap)
    size = 0 if window is None else window - 1
    out = ops.gemma_attention(q, k, v, scaling, window_size=size, soft_cap=cap, is_causal=True)
    return out.transpose(1, 2).contiguous()  # type: ignore[no-any-return]
