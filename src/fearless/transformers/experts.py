"""The mixture-of-experts forward fearless.transformers puts into Hugging Face's stacked-expert
modules (`Qwen3MoeExperts`, and the same layout in `OlmoeExperts`, `Qwen3NextExperts`,
`DeepseekV2Experts` and `DeepseekV3Experts`): the routed tokens' SiLU-and-mul expert MLPs as one
`fearless.ops.fused_moe` call, in inference and in training (its backward, through torch
autograd, gives the gradients of the activations, of both expert weight Parameters and of the
routing weights, so the router trains too), the router staying Hugging Face's torch code.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import ops
from .layers import _FLOATS, _base_forward, has_silu


def experts_forward(
    self: Any,
    hidden_states: torch.Tensor,
    top_k_index: torch.Tensor,
    top_k_weights: torch.Tensor,
) -> torch.Tensor:
    """Hugging Face's `Qwen3MoeExperts.forward(hidden_states (T, H), top_k_index (T, k),
    top_k_weights (T, k))` through `fearless.ops.fused_moe`: its `gate_up_proj` (E, 2I, H),
    gate rows then up rows, and `down_proj` (E, H, I) are fused_moe's w1 and w2 as they are
    (the Parameters themselves, no copy or view, so autograd's weight gradients land on them).
    The module's own forward (its experts loop, or the `experts_implementation` the config
    names) runs for another activation, expert parallelism, or other dtypes or ranks."""
    w1, w2 = self.gate_up_proj, self.down_proj
    takes = (
        has_silu(self)
        # expert parallelism routes tokens of other ranks to the sentinel id E: the loop skips it
        and not getattr(self, "_is_expert_parallel", False)
        and hidden_states.dim() == 2
        and w1.dim() == w2.dim() == 3
        and hidden_states.dtype in _FLOATS
        and hidden_states.dtype == w1.dtype == w2.dtype
        and top_k_weights.dtype in _FLOATS
    )
    if not takes:
        return _base_forward(self, hidden_states, top_k_index, top_k_weights)  # type: ignore[no-any-return]
    return ops.fused_moe(hidden_states, w1, w2, top_k_weights, top_k_index)  # type: ignore[no-any-return]
