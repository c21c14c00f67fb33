"""A differentiable float64 torch reference of TileGym's attention variants (fmha, swa_attention,
gemma_attention): the bottom-right causal diagonal, a left/right window and the logit soft cap;
a row that sees no key gives 0 (and no gradient). What tests/test_ops_attention_variants.py
compares the forward with, and (by torch autograd) tests/test_ops_attention_variants_backward.py
the gradients."""

from __future__ import annotations

from typing import Any

import torch


def variant_attention(
    q: Any,
    k: Any,
    v: Any,
    scaling: float | None = None,
    causal: bool = True,
    left: int | None = None,
    right: int | None = None,
    cap: float | None = None,
    aligned: bool = True,
) -> Any:
    """softmax(S) v in float64 of q (B, H, L, D) over k, v (B, H_kv, S, D): S = q k^T * scaling,
    soft-capped cap * tanh(S / cap) before the masks; query i at i' = i + S - L (i when not
    `aligned`) sees keys j with (causal) j <= i', (left) j >= i' - left, (right) j <= i' + right."""
    _, h, lq, d = q.shape
    s = k.shape[2]
    group = h // k.shape[1]
    k, v = (x.double().repeat_interleave(group, 1) for x in (k, v))
    sc = q.double() @ k.transpose(-1, -2) * (d**-0.5 if scaling is None else scaling)
    if cap is not None:
        sc = cap * torch.tanh(sc / cap)
    i = torch.arange(lq, device=q.device)[:, None] + (s - lq if aligned else 0)
    j = torch.arange(s, device=q.device)[None, :]
    keep = torch.ones(lq, s, dtype=torch.bool, device=q.device)
    if causal:
        keep &= j <= i
    if left is not None:
        keep &= j >= i - left
    if right is not None:
        keep &= j <= i + right
    seen = keep.any(-1, keepdim=True)  # a row with no key: scores 0, then weights 0
    sc = sc.masked_fill(~keep, -torch.inf).masked_fill(~seen, 0.0)
    return (torch.softmax(sc, -1) * seen) @ v


def bounds(name: str, kw: dict[str, Any]) -> dict[str, Any]:
    """The reference's (causal, left, right, cap) for operator `name` ("fmha", "swa",
    "gemma") called with `kw` (TileGym's window conventions: swa's last W keys, gemma's
    |j - i'| <= W)."""
    causal = kw.get("is_causal", True)
    if name == "fmha":
        return {"causal": causal}
    w = kw.get("window_size", 0)
    if name == "swa":
        return {"causal": causal, "left": w - 1 if w else None}
    want: dict[str, Any] = {"causal": causal, "cap": kw.get("soft_cap")}
    if w:
        want.update(left=w, right=None if causal else w)
    return want
