"""GPT-OSS's attention with sinks on fearless.ops: a stand-in for its modeling module's
`eager_attention_forward` (the attention GPT-OSS runs: it has no `sdpa`) that calls
`fearless.ops.attention_sink` where that computes what Hugging Face's eager code does, in
inference and in training alike (its autograd backward, `attention_sink_backward`, gives
Hugging Face's query, key and value and the `sinks` Parameter their gradients), and Hugging
Face's code everywhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch

from .. import ops
from .layers import _FLOATS, AttentionCall, is_attention_layout, is_causal_mask, is_window, stand_in


@stand_in
def sink_attention_function(original: Callable[..., Any]) -> Callable[..., Any]:
    """GPT-OSS's `eager_attention_forward(module, query, key, value, attention_mask, scaling,
    dropout=0.0, **kwargs)`: softmax over [q k^T * scaling + mask, module.sinks[h]] with the
    sink's share dropped, times v; through `fearless.ops.attention_sink` when `_sink_attention`
    takes the call."""

    def eager_attention_forward(
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        scaling: float,
        dropout: float = 0.0,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        call = AttentionCall(module, query, key, value, attention_mask, dropout, scaling, kwargs)
        out = _sink_attention(call)
        if out is not None:
            return out, None
        return call.fall_back(original)  # type: ignore[no-any-return]

    return eager_attention_forward


def _sink_attention(call: AttentionCall) -> torch.Tensor | None:
    """The attention as (batch, seq, heads, head_dim), or None where attention_sink would not
    give Hugging Face's result: dropout, attention weights asked for, other layouts or dtypes,
    or a mask that is not exactly the causal (or sliding-window, W keys up to itself) pattern
    of a prefill or decode without padding. With grad too: the op's backward reaches q, k, v
    and `module.sinks` (the views below are differentiable; nothing is detached). Query i sits
    at key index start_q + i, start_q = S - L (0 for a prefill)."""
    module, q, k, v, mask, dropout, scaling, kwargs = call
    sinks = getattr(module, "sinks", None)
    if dropout or kwargs.get("output_attentions") or not isinstance(sinks, torch.Tensor):
        return None
    if not is_attention_layout(q, k, v):
        return None
    (b, h, lq, d), hk, s = q.shape, k.shape[1], k.shape[2]
    if not lq or not s:
        return None
    if sinks.shape != (h,) or sinks.dtype not in _FLOATS:
        return None
    window = kwargs.get("sliding_window")
    if window is not None and not is_window(window, least=1):
        return None
    if not is_causal_mask(mask, lq, s, window):
        return None
    # Hugging Face's query head h reads KV head h // G: attention_sink's (kv, g) = divmod(h, G).
    # transpose, reshape (a copy where q is not contiguous so) and view stay in the autograd
    # graph, so the op's gradients flow back to Hugging Face's q, k, v
    query = q.transpose(1, 2).reshape(b, lq, hk, h // hk, d)
    out = ops.attention_sink(
        query,
        k.transpose(1, 2),
        v.transpose(1, 2),
        sinks,
        sm_scale=cast(float, scaling),  # GPT-OSS's eager_attention_forward requires a scale
        sliding_window=window,
        start_q=s - lq,
    )
    return out.view(b, lq, h, d)  # type: ignore[no-any-return]
