"""A differentiable torch reference of `fearless.ops.scaled_dot_product_attention` with an
`attn_mask` (bool or additive, broadcast over batch and heads or not), grouped-query heads and
torch's top-left `is_causal`, for gradients by torch autograd; a row whose every key is masked
gives 0 and no gradient (fearless's and torch's forward). Computed in the inputs' dtype (f64
on the CPU, f32 on the GPU)."""

from __future__ import annotations

from typing import Any

import torch


def masked_attention(q: Any, k: Any, v: Any, mask: Any, causal: bool = False) -> Any:
    """softmax(q k^T / sqrt(D) + mask) v of q (B, H, L, D), k, v (B, H_kv, S, D) and a mask
    of (L, S) or (1 or B, 1 or H, L, S)."""
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if mask.dtype == torch.bool:
        add = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(~mask, -torch.inf)
    else:
        add = mask.to(q.dtype)
    if causal:
        tril = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril()
        add = add.masked_fill(~tril, -torch.inf)
    s = s + add
    dead = (s == -torch.inf).all(-1, keepdim=True)
    p = torch.where(dead, 0.0, torch.softmax(torch.where(dead, 0.0, s), -1))
    return p @ v
