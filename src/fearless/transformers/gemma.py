"""What fearless.transformers puts into Hugging Face's Gemma 3 besides the Llama-like parts of
layers.py: the forwards of its RMSNorm, whose scale is (1 + weight), and of its GELU-gated MLP,
on fearless.ops, each falling back to Hugging Face's code for an input the op does not take.
(Its sliding-window attention is layers.py's `_windowed`, on `fearless.ops.gemma_attention` in
inference and training.)
"""

from __future__ import annotations

from typing import Any

import torch

from .. import ops
from .layers import _FLOATS, _base_forward

# Hugging Face's activation names -> fearless's gelu `approximate`
_GELU = {"gelu_pytorch_tanh": "tanh", "gelu": "none"}


def gemma_rms_norm_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """`Gemma3RMSNorm.forward`, normalize(x) * (1 + weight) in f32 cast back to x's dtype, as
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
    GELU; another activation or mixed dtypes run Hugging Face's code."""
    act = getattr(getattr(self, "config", None), "hidden_activation", None)
    approximate = _GELU.get(act) if isinstance(act, str) else None
    gate, up = self.gate_proj(x), self.up_proj(x)
    if approximate is None or gate.dtype not in _FLOATS or gate.dtype != up.dtype:
        return self.down_proj(self.act_fn(gate) * up)  # type: ignore[no-any-return]
    return self.down_proj(ops.geglu(torch.cat((up, gate), -1), approximate=approximate))  # type: ignore[no-any-return]
