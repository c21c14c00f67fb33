"""The mixture-of-experts forward fearless.transformers puts into Hugging Face's stacked-expert
modules (`Qwen3MoeExperts`, and the same layout in `OlmoeExperts`, `Qwen3NextExperts`,
`DeepseekV2Experts` and `DeepseekV3Experts`): the routed tokens' SiLU-and-mul expert MLPs as one
`fearless.ops.fused_moe` call, the router staying Hugging Face's torch code. fused_moe is
forward only: in training (autograd recording the weights or the activations) the module's own
forward (its experts loop, or the `experts_implementation` the config names) runs instead.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import ops
from .layers import _FLOATS, _base_forward, wants_grad


def experts_forward(
    self: Any,
    hidden_states: torch.Tensor,
    top_k_index: torch.Tensor,
    top_k_weights: torch.Tensor,
) -> torch.Tensor:
    """Hugging Face's `Qwen3MoeExperts.forward(hidden_states (T, H), top_k_index (T, k),
    top_k_weights (T, k))` through `fearless.ops.fused_moe`: its `gate_up_proj` (E, 2I, H),
    gate rows then up rows, and `down_proj` (E, H, I) are fused_moe's w1 and w2 as they are."""
    w1, w2 = self.gate_up_proj, self.down_proj
    act = getattr(getattr(self, "config", None), "hidden_act", None)
    takes = (
        act in ("silu", "swish")
        # expert parallelism routes tokens of other ranks to the sentinel id E: the loop skips it
        and not getattr(self, "_is_expert_parallel", False)
        and hidden_states.dim() == 2
        and hidden_states.dtype in _FLOATS
        and hidden_states.dtype == w1.dtype == w2.dtype
        and top_k_weights.dtype in _FLOATS
        and not wants_grad(hidden_states, w1, w2, top_k_weights)
    )
    if not takes:
        return _base_forward(self, hidden_states, top_k_index, top_k_weights)  # type: ignore[no-any-return]
    return ops.fused_moe(hidden_states, w1, w2, top_k_weights, top_k_index)  # type: ignore[no-any-return]
