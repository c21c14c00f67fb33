"""`fearless.ops.scaled_dot_product_attention`: torch's signature, a flash-attention Tile kernel
(ops/kernels_attention.py), autotuned per shape.

What it takes: q of (B, H, L, D) and k, v of (B, H_kv, S, D), or the same without the head
axis; f32, f16 or bf16, one dtype; `attn_mask` of (L, S), (1 or B, 1 or H, L, S), bool (True:
the key takes part, as torch) or the queries' dtype (added to the scores); `is_causal` (torch's:
query i sees keys 0..i); `scale` (default 1 / sqrt(D)); `enable_gqa` (H a multiple of H_kv,
query head h reading KV head h // (H / H_kv), as torch). What it refuses, each with a fearless
error at the caller's line: a mask broadcast along L or S, `dropout_p` other than 0, a value
head size other than D, and (autograd, ops/torch_ops.py) an additive `attn_mask` that itself
requires grad. A decode step (one query per head, no mask, not causal) takes the split-KV
kernels of ops/kernels_attention_decode.py (TileGym's fmha_decode form). The backward (`scaled_dot_product_attention_backward`,
torch autograd's through ops/torch_ops.py) is flash attention's: kernels_attention_backward.py's
three kernels (in training the forward is `scaled_dot_product_attention_lse`, which keeps the
rows' lse, so that the backward recomputes only delta in its first kernel), with the forward's mask applied to the recomputed scores (a row whose every key
is masked: zero gradients, as its output is 0; the mask gets no gradient). Both
replay on the GPU from their second call with a key (ops/_replay.py; the third where the first
tuned): the Python between a decode step's two launches costs more than its kernels.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..runtime.location import argument_error
from ._arguments import flag, layout_error, shape_of
from ._attention_checks import (
    attention_scale,
    broadcasts_over_heads,
    kept,
    kept_lse,
    lse_operand,
    sequence_layout,
)
from ._attention_outputs import attention_output, decode_views, qkv_backward
from ._io import FLOATS, float_operands, heads_major, number, operand, result, view
from ._replay import replayable
from ._route import torch_ops, training
from .kernels_attention import attention_tuned
from .kernels_attention_backward import attention_backward, forward_with_backward_ahead
from .kernels_attention_decode import attention_decode
from .kernels_rows import sm_count

# what a layout_error says the operator needs
_LAYOUT = "q (B, H, L, D) and k, v (B, H_kv, S, D) of one dtype"


@replayable()
def scaled_dot_product_attention(
    q: Any,
    k: Any,
    v: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    dropout_p: float = 0.0,
) -> Any:
    """`torch.nn.functional.scaled_dot_product_attention` of q (B, H, L, D) over k and v
    (B, H_kv, S, D): softmax(q k^T * scale) v, the probabilities never stored (flash
    attention)."""
    is_causal, enable_gqa = _flags("scaled_dot_product_attention", is_causal, enable_gqa)
    op = "scaled_dot_product_attention"
    if number(dropout_p, op, "dropout_p") != 0.0:
        raise argument_error(
            f"`fearless.ops.{op}` has no attention dropout (dropout_p={dropout_p!r})",
            help="pass dropout_p=0.0 (inference), or apply `fearless.ops.dropout` elsewhere",
        )
    # the mask too: one that requires grad reaches the autograd formula's refusal, which
    # says the operator gives it no gradient
    if (t := torch_ops(q, k, v, attn_mask)) is not None:
        args = (q, k, v, attn_mask, is_causal, scale, enable_gqa)
        if training(q, k, v):  # the forward that keeps lse for the backward (fewer recomputes)
            return t.scaled_dot_product_attention_lse(*args)[0]
        return t.scaled_dot_product_attention(*args)
    return _forward(op, q, k, v, attn_mask, is_causal, scale, enable_gqa, False)[0]


@replayable()
def scaled_dot_product_attention_lse(
    q: Any,
    k: Any,
    v: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> tuple[Any, Any]:
    """(out, lse): `scaled_dot_product_attention`'s output and its rows' log2-sum-exp of the
    scaled scores, (B, H, L) f32 (+inf for a row that sees no key): what its backward takes
    (`lse=`) instead of recomputing it, as flash attention's forward keeps its softmax_lse
    (base 2 here, the kernels' own)."""
    is_causal, enable_gqa = _flags("scaled_dot_product_attention_lse", is_causal, enable_gqa)
    op = "scaled_dot_product_attention_lse"
    args = (q, k, v, attn_mask, is_causal, scale, enable_gqa)
    if (t := torch_ops(q, k, v, attn_mask)) is not None:
        return t.scaled_dot_product_attention_lse(*args)  # type: ignore[no-any-return]
    return _forward(op, *args, True)  # type: ignore[return-value]


def _forward(
    op: str,
    q: Any,
    k: Any,
    v: Any,
    attn_mask: Any,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
    keep_lse: bool,
) -> tuple[Any, Any]:
    """The checks, then the kernels: (out, lse), lse None unless `keep_lse`."""
    decode = not keep_lse and is_decode(q, attn_mask, is_causal)  # one query: split-KV kernels
    layout, (q, k, v) = sequence_layout(q, k, v, keep_lse or decode)
    qa, ka, va = float_operands(op, q=q, k=k, v=v)
    if not qa.dtype == ka.dtype == va.dtype:
        raise layout_error(
            op, _LAYOUT, f"dtypes {qa.dtype.name}, {ka.dtype.name} and {va.dtype.name}"
        )
    nd = len(qa.shape)
    if nd not in (3, 4) or len(ka.shape) != nd or len(va.shape) != nd:
        raise layout_error(
            op,
            _LAYOUT,
            f"shapes {qa.shape}, {ka.shape} and {va.shape} (each (B, H, L, D) or (B, L, D))",
        )
    qs, ks, vs = (s if nd == 4 else (s[0], 1, *s[1:]) for s in (qa.shape, ka.shape, va.shape))
    q_seq, kv_seq = layout
    qs, ks, vs = heads_major(qs, q_seq), heads_major(ks, kv_seq), heads_major(vs, kv_seq)
    (b, h, _, d), (bk, hk, s, dk) = qs, ks
    if bk != b or vs[:3] != ks[:3] or dk != d or vs[3] != d:
        raise layout_error(op, _LAYOUT, f"shapes {qs}, {ks} and {vs}")
    if hk != h and not (enable_gqa and hk and h % hk == 0):
        raise layout_error(
            op,
            _LAYOUT,
            f"{h} query heads and {hk} key/value heads"
            + ("" if enable_gqa else " (pass enable_gqa=True for grouped-query attention)"),
        )
    dims = (b, h, qs[2], s)
    mask = None if attn_mask is None else _mask(attn_mask, op, qa.dtype, dims, qa.tensor.device)
    lse, lse_ret = kept_lse(qa, s, keep_lse)  # (B, H, L), or (B, L) as q is (B, L, D)
    out, ret = attention_output(qa, qa.shape, s)  # no keys: torch's SDPA gives zeros
    if s and out.size:
        sc = attention_scale(scale, d, op, "scale")
        q4, k4, v4, o4 = (
            view(x, heads_major(shape, seq))
            for x, shape, seq in (
                (qa.tensor, qs, q_seq),
                (ka.tensor, ks, kv_seq),
                (va.tensor, vs, kv_seq),
                (out, qs, q_seq),
            )
        )
        if decode:
            qd, od = decode_views(qa.tensor, out, qs, hk)
            attention_decode(qd, k4, v4, od, sc, sm_count())
        else:
            l4 = None if lse is None else view(lse, qs[:3])
            group = h // hk
            forward = partial(
                attention_tuned, q4, k4, v4, mask, o4, sc, bool(is_causal), group, l4, layout
            )
            if l4 is None:
                forward()
            else:  # training: the backward's kernels compile beside the forward's
                forward_with_backward_ahead(forward, q4, k4, v4, o4, l4, mask, sc, is_causal, group)
    returned = result(qa, out, ret)
    return (returned.transpose(1, 2) if q_seq else returned), kept(qa, lse, lse_ret)


def _flags(op: str, is_causal: Any, enable_gqa: Any) -> tuple[bool, bool]:
    """`is_causal` and `enable_gqa` as bools (an array in their place is E0701)."""
    return flag(is_causal, op, "is_causal"), flag(enable_gqa, op, "enable_gqa")


def is_decode(q: Any, attn_mask: Any, is_causal: bool) -> bool:
    """Whether the call takes the split-KV decode kernels: one query per head, no mask, not
    causal (the inference form; the training forward never does)."""
    shape = shape_of(q)
    return len(shape) > 1 and shape[-2] == 1 and attn_mask is None and not is_causal


def _mask(attn_mask: Any, op: str, dt: DType, full: tuple[int, int, int, int], device: int) -> Any:
    """torch's `attn_mask` as an fl.Tensor of (1 or B, 1 or H, L, S): bool (True: the key takes
    part) or the queries' dtype (added to the scores)."""
    m = operand(attn_mask, op, "attn_mask", (dtypes.bool_, dt), device=device)
    shape = (1,) * (4 - len(m.shape)) + tuple(m.shape)
    b, h, lq, s = full
    if not broadcasts_over_heads(shape, b, h, lq, s):  # more than 4 axes too
        raise argument_error(
            f"`attn_mask` of `fearless.ops.{op}` has shape {m.shape}: fearless takes masks of "
            f"(L, S) = {(lq, s)}, broadcast over batch and heads or not ((B, H, L, S) = {full})",
            help="expand the mask along L or S first (`mask.expand(...)`)",
        )
    return view(m.tensor, shape)


@replayable()
def scaled_dot_product_attention_backward(
    dout: Any,
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    attn_mask: Any = None,
    lse: Any = None,
) -> tuple[Any, Any, Any]:
    """(dq, dk, dv) of `scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale,
    enable_gqa)`, whose result was `out`, for the gradient `dout` of that result (flash
    attention's backward: the probabilities are recomputed, never stored; `attn_mask` as the
    forward takes it, and it gets no gradient). `lse`: None, or the rows' lse that
    `scaled_dot_product_attention_lse` returned with `out` (f32, q's shape without D): the
    backward then does not recompute it."""
    is_causal, enable_gqa = _flags("scaled_dot_product_attention_backward", is_causal, enable_gqa)
    op = "scaled_dot_product_attention_backward"
    names = ("dout", "q", "k", "v", "out")
    ga, qa, ka, va, oa = (
        operand(x, op, n, FLOATS) for x, n in zip((dout, q, k, v, out), names, strict=True)
    )
    same = ga.shape == qa.shape == oa.shape
    if len({x.dtype for x in (ga, qa, ka, va, oa)}) != 1 or not same:
        raise layout_error(
            op, _LAYOUT, f"dout {ga.shape}, q {qa.shape}, out {oa.shape} of one dtype"
        )
    nd = len(qa.shape)
    shapes = [s if nd == 4 else (s[0], 1, *s[1:]) for s in (qa.shape, ka.shape, va.shape)]
    (b, h, lq, d), (_, hk, s, _) = shapes[0], shapes[1]
    if hk != h and not (enable_gqa and hk and h % hk == 0):
        raise layout_error(op, _LAYOUT, f"{h} query heads and {hk} key/value heads")
    dims, dev = (b, h, lq, s), qa.tensor.device
    mask = None if attn_mask is None else _mask(attn_mask, op, qa.dtype, dims, dev)
    rows = lse_operand(lse, op, qa)
    sc = attention_scale(scale, d, op, "scale")

    def launch(*tensors: Any) -> None:
        # q, k, v, out, dout, dq, dk, dv, a 3-D (B, L, D) one as (B, 1, L, D)
        q4, k4, v4, o4, g4, dq4, dk4, dv4 = (
            view(t, shape)
            for t, shape in zip(tensors, (*shapes, shapes[0], shapes[0], *shapes), strict=True)
        )
        attention_backward(
            q4, k4, v4, o4, g4, dq4, dk4, dv4, sc, is_causal, h // hk, mask=mask, lse=rows
        )

    return qkv_backward(qa, ka, va, oa, ga, s, launch)
