"""The NumPy (float64) reference of TileGym's attention with sinks (its test's torch reference,
tests/ops/test_attention_sink.py, restated): what tests/test_ops_attention_sink.py and its GPU
test compare `fearless.ops.attention_sink` and `attention_sink_decode` with."""

from __future__ import annotations

from typing import Any

import numpy as np


def attention_sink_reference(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    sinks: np.ndarray | None,
    sm_scale: float = 0.125,
    sliding_window: int | None = None,
    start_q: int = 0,
) -> np.ndarray:
    """(B, L, H_kv * G * D), float64: query (B, L, H_kv, G, D) at positions start_q + i sees
    keys j <= start_q + i (and j > start_q + i - W with a window W); the sink logit of head
    kv * G + g joins the denominator; a row with no key is 0 (TileGym's reference gives NaN
    there only when the sink is -inf). `sinks` None: no sink."""
    b, lq, hk, g, d = query.shape
    s = key.shape[1]
    q = query.astype(np.float64)
    k, v = key.astype(np.float64), value.astype(np.float64)
    pos_k = np.arange(s)[None, :]
    pos_q = np.arange(lq)[:, None] + start_q
    drop = pos_k > pos_q
    if sliding_window:
        drop |= pos_k < pos_q - sliding_window + 1
    logits = np.einsum("bqhmd,bkhd->bhmqk", q, k) * sm_scale
    logits = np.where(drop, -np.inf, logits)
    sk = np.full(hk * g, -np.inf) if sinks is None else sinks.astype(np.float64)
    sk = sk.reshape(1, hk, g, 1, 1)
    top = np.maximum(sk, logits.max(-1, keepdims=True, initial=-np.inf))
    top = np.where(np.isinf(top), 0.0, top)
    e = np.exp(logits - top)
    z = e.sum(-1, keepdims=True) + np.exp(sk - top)
    p = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
    out = np.einsum("bhmqk,bkhd->bqhmd", p, v)
    return out.reshape(b, lq, hk * g * d)


def attention_sink_torch(
    query: Any,
    key: Any,
    value: Any,
    sinks: Any,
    sm_scale: float = 0.125,
    sliding_window: int | None = None,
    start_q: int = 0,
) -> Any:
    """`attention_sink_reference` in torch, differentiable (for the backward's tests: torch
    autograd of it in float64): softmax over [the scores, the head's sink] with the sink's
    column dropped. Sinks must be finite."""
    import torch

    b, lq, hk, g, d = query.shape
    s = key.shape[1]
    pos_k = torch.arange(s, device=query.device)[None, :]
    pos_q = torch.arange(lq, device=query.device)[:, None] + start_q
    drop = pos_k > pos_q
    if sliding_window:
        drop |= pos_k < pos_q - sliding_window + 1
    logits = torch.einsum("bqhmd,bkhd->bhmqk", query, key) * sm_scale
    logits = logits.masked_fill(drop, -torch.inf)
    sk = sinks.to(logits.dtype).reshape(1, hk, g, 1, 1).expand(b, hk, g, lq, 1)
    p = torch.softmax(torch.cat([logits, sk], -1), -1)[..., :-1]
    return torch.einsum("bhmqk,bkhd->bqhmd", p, value).reshape(b, lq, hk * g * d)
