"""flash-attn's `flash_attn_func` (flash_attn/flash_attn_interface.py): attention in flash-attn's
own layout, q (B, L, H, D) and k, v (B, S, H_kv, D), returning (B, L, H, D), for code written
against flash-attn.

The kernels are `fmha`'s (ops/attention_variants.py, ops/kernels_attention.py), which read and
write that layout in place (`make_attention`'s `layout`): flash-attn's bottom-right causal
diagonal where L != S, its `window_size` (left, right) (-1 unbounded; causal sets right to
0), its `softcap` (0: none) on the scaled scores before the masks, grouped-query heads (H a
multiple of H_kv). A row that sees no key gives 0. In training (autograd records the call)
the call is `fmha`'s training forward over (B, H, L, D) views of the inputs, whose backward
gives dq, dk and dv; the output is then made dense, as flash-attn's is. Refused, each with a
fearless error at the caller's line: `dropout_p` other than 0, `alibi_slopes`, and
`return_attn_probs` (flash-attn's testing aid).
"""

from __future__ import annotations

from typing import Any

from ..runtime.location import argument_error
from ._arguments import flag, shape_of
from ._io import number
from ._replay import replayable
from ._route import torch_ops
from .attention_variants import attend
from .kvcache_attention import soft_cap, window_bounds

OP = "flash_attn_func"
_SEQ_MAJOR = (True, True)


@replayable()
def flash_attn_func(
    q: Any,
    k: Any,
    v: Any,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
) -> Any:
    """flash-attn's `flash_attn_func`: softmax(cap(q k^T * softmax_scale)) v of q (B, L, H, D)
    over k, v (B, S, H_kv, D), query i at i + S - L for `causal` and `window_size`; returns
    (B, L, H, D). `deterministic` is accepted: the forward is, and the backward follows
    `torch.use_deterministic_algorithms` as `scaled_dot_product_attention`'s does."""
    causal = flag(causal, OP, "causal")
    _refuse(dropout_p, alibi_slopes, return_attn_probs)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if len(shape_of(x)) != 4:
            raise argument_error(
                f"`fearless.ops.{OP}` takes q (B, L, H, D) and k, v (B, S, H_kv, D), flash-attn's "
                f"layout: `{name}` has shape {shape_of(x)}",
                help="for (B, H, L, D) tensors, use `fearless.ops.fmha` (the same kernels)",
            )
    (b, _, h, d), (bk, s, hk, dk), vs = shape_of(q), shape_of(k), shape_of(v)
    if bk != b or vs != (bk, s, hk, dk) or dk != d or not hk or h % hk:
        raise argument_error(  # in the caller's layout, before the (B, H, L, D) views
            f"`fearless.ops.{OP}` takes q (B, L, H, D) and k, v (B, S, H_kv, D), H a multiple "
            f"of H_kv, flash-attn's layout: got q {shape_of(q)}, k {shape_of(k)} and v {vs}",
        )
    left, right = window_bounds(window_size, causal, OP)
    cap = soft_cap(softcap, OP) or None
    bounds = (None if left < 0 else left, None if right < 0 else right, cap)
    if (t := torch_ops(q, k, v)) is not None:  # autograd or a compiled graph records it
        views = (x.transpose(1, 2) for x in (q, k, v))
        out = t.attention_window_lse(*views, OP, softmax_scale, causal, *bounds)[0]
        return out.transpose(1, 2).contiguous()
    return attend(OP, q, k, v, softmax_scale, causal, *bounds, layout=_SEQ_MAJOR)[0]


def _refuse(dropout_p: Any, alibi_slopes: Any, return_attn_probs: Any) -> None:
    """flash-attn's arguments fearless does not take, each a fearless error."""
    if number(dropout_p, OP, "dropout_p") != 0.0:
        raise argument_error(
            f"`fearless.ops.{OP}` has no attention dropout (dropout_p={dropout_p!r})",
            help="pass dropout_p=0.0 (inference, and most training of large models)",
        )
    if alibi_slopes is not None:
        raise argument_error(
            f"`fearless.ops.{OP}` has no ALiBi (`alibi_slopes`)",
            help="`fearless.ops.fmha_variant(..., bias_type='alibi')` takes ALiBi slopes, in "
            "(B, H, L, D) layout",
        )
    if return_attn_probs:
        raise argument_error(
            f"`fearless.ops.{OP}` does not return attention probabilities (return_attn_probs)",
            help="pass return_attn_probs=False: the output alone is returned",
        )
