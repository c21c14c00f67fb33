"""TileGym's attention with sinks (DESIGN 2c): `fearless.ops.attention_sink` (GPT-OSS's
prefill) and `attention_sink_decode` (one query per head), on the kernel of
ops/kernels_attention_sink.py and the split-KV decode kernels of
ops/kernels_attention_sink_decode.py.

What they take (TileGym's layouts, tilegym/ops/cutile/attention_sink.py): query of
(B, L, H_kv, G, D) (G query heads per KV head: query head h = kv * G + g reads KV head kv),
key and value of (B, S, H_kv, D), one dtype of f32, f16 or bf16; sinks of (H,) with
H = H_kv * G, any of those dtypes: a learned logit per query head that joins the softmax's
denominator and adds nothing to the output; `sm_scale` (default 0.125, TileGym's, not
1 / sqrt(D)); `start_q` (an int, or a one-element integer tensor, which the kernel reads where
it lives): query i sits at position start_q + i and sees keys j <= start_q + i (always causal,
top-left aligned at start_q); `sliding_window` W (None or 0: none) keeps keys
j > start_q + i - W. They return (B, L, H * D) in the query's dtype. A query that sees no key
gives 0 (all its weight is on the sink). attention_sink's backward (`attention_sink_backward`,
torch autograd's through ops/torch_ops_attention.py) gives query, key, value and sinks their
gradients on flash attention's backward kernels (ops/kernels_attention_ragged_backward.py);
attention_sink_decode is forward only: an input that requires grad is refused at the call
(ops/torch_ops.py), never detached.
"""

from __future__ import annotations

import sys
from typing import Any

from .. import dtypes
from ..runtime.location import argument_error
from ._arguments import integer, layout_error, shape_of
from ._attention_outputs import attention_output, gradient_outputs, gradient_results
from ._io import (
    FLOATS,
    Operand,
    cast,
    float_operands,
    full,
    number,
    operand,
    output,
    result,
    view,
    zeros_output,
)
from ._replay import replayable
from ._route import torch_ops
from .kernels_attention_ragged_backward import sink_attention_backward
from .kernels_attention_sink import attention_sink_tuned
from .kernels_attention_sink_decode import sink_decode_pinned, sink_decode_tuned
from .kernels_rows import sm_count

_I32 = (-(2**31), 2**31 - 1)
# what a layout_error says the operator needs
_LAYOUT = "query (B, L, H_kv, G, D) and key, value (B, S, H_kv, D) of one dtype"


@replayable()
def attention_sink(
    query: Any,
    key: Any,
    value: Any,
    sinks: Any,
    sm_scale: float = 0.125,
    sliding_window: int | None = None,
    start_q: Any = 0,
) -> Any:
    """TileGym's `attention_sink`: softmax over [sinks[h], q k^T * sm_scale] applied to
    [0, v], query of (B, L, H_kv, G, D) over key, value of (B, S, H_kv, D), query i at
    position start_q + i (causal; `sliding_window` W keeps the last W keys up to itself).
    Returns (B, L, H_kv * G * D). Its backward (torch autograd, `attention_sink_backward`)
    gives query, key, value and sinks their gradients."""
    if (t := torch_ops(query, key, value, sinks, start_q)) is not None:
        return t.attention_sink(
            query, key, value, sinks, sm_scale, sliding_window, _start_tensor(start_q, query)
        )
    return _attend("attention_sink", query, key, value, sinks, sm_scale, sliding_window, start_q)


@replayable()
def attention_sink_decode(
    query: Any,
    key: Any,
    value: Any,
    sinks: Any,
    sm_scale: float = 0.125,
    sliding_window: int | None = None,
    start_q: Any = 0,
    kv_len_per_split: int | None = None,
) -> Any:
    """TileGym's `attention_sink_decode`: `attention_sink` of one query token, query of
    (B, 1, H_kv, G, D) at position start_q; `sinks` may be None (no sink). Split-KV: a block
    per (batch, KV head, key split) takes the KV head's G query heads together, and a combine
    merges the splits and adds the sink once. kv_len_per_split (None, or a power of two) is
    TileGym's keys per split: None tunes the split (no split among the choices) to the batch
    and the GPU; a value pins it (below 16 it takes 16), counted from the first key the query
    sees. Returns (B, 1, H_kv * G * D). Forward only."""
    if (t := torch_ops(query, key, value, sinks, start_q)) is not None:
        return t.attention_sink_decode(
            query,
            key,
            value,
            sinks,
            sm_scale,
            sliding_window,
            _start_tensor(start_q, query),
            kv_len_per_split,
        )
    op = "attention_sink_decode"
    if kv_len_per_split is not None and (
        isinstance(kv_len_per_split, bool)
        or not isinstance(kv_len_per_split, int)
        or kv_len_per_split < 1
        or kv_len_per_split & (kv_len_per_split - 1)
    ):
        raise argument_error(
            f"`fearless.ops.{op}` needs kv_len_per_split None or a power of two, got "
            f"{kv_len_per_split!r}",
            help="pass None (the default), or e.g. 1024",
        )
    shape = shape_of(query)
    if len(shape) == 5 and shape[1] != 1:
        raise argument_error(
            f"`fearless.ops.{op}` takes one query token, query (B, 1, H_kv, G, D), got shape "
            f"{tuple(shape)}",
            help="for several query tokens call `fearless.ops.attention_sink`",
        )
    return _attend(
        op, query, key, value, sinks, sm_scale, sliding_window, start_q, kv_len_per_split
    )


def _start_tensor(start_q: Any, query: Any) -> Any:
    """start_q as the torch operator's one-element tensor (an int becomes an i32 tensor beside
    the query)."""
    torch = sys.modules["torch"]
    if isinstance(start_q, torch.Tensor):
        return start_q
    # a query that is no torch tensor: the dispatcher refuses it next
    device = query.device if isinstance(query, torch.Tensor) else "cpu"
    return torch.tensor([_start_int(start_q, "attention_sink")], dtype=torch.int32).to(device)


def _start_int(start_q: Any, op: str) -> int:
    s = integer(
        start_q,
        op,
        "start_q",
        "an int or a one-element integer tensor",
        help="pass the first query's position in the keys, e.g. `start_q=0`",
    )
    if not _I32[0] <= s <= _I32[1]:
        raise argument_error(
            f"`start_q` of `fearless.ops.{op}` must fit in 32 bits, got {s}",
        )
    return s


def _window(sliding_window: Any, op: str) -> int:
    if sliding_window is None:
        return 0
    if (
        isinstance(sliding_window, bool)
        or not isinstance(sliding_window, int)
        or sliding_window < 0
    ):
        raise argument_error(
            f"`fearless.ops.{op}` needs sliding_window None or an int of 0 or more, got "
            f"{sliding_window!r}",
            help="pass None (or 0) for no window; GPT-OSS's sliding layers use 128",
        )
    return sliding_window


def _start(start_q: Any, like: Operand, op: str) -> Any:
    """(the (1,) i32 tensor the kernel reads start_q from, its value where known on the host)."""
    if isinstance(start_q, int) or not hasattr(start_q, "shape"):
        s = _start_int(start_q, op)
        return full(like, (1,), s, dtypes.i32), s
    st = operand(start_q, op, "start_q", device=like.tensor.device)
    if st.dtype not in (dtypes.i32, dtypes.i64):
        raise argument_error(
            f"`start_q` of `fearless.ops.{op}` must be an int32 or int64 tensor, got "
            f"{st.dtype.name}",
            help="pass the first query's position as an integer, e.g. "
            "`torch.tensor([pos], dtype=torch.int32)`",
        )
    if st.tensor.size != 1:
        raise argument_error(
            f"`start_q` of `fearless.ops.{op}` must have one element, got shape {st.shape}",
            help="pass a tensor of shape (1,), e.g. `torch.tensor([pos], dtype=torch.int32)`",
        )
    return view(cast(st, dtypes.i32), (1,)), None


def _layout(op: str, qa: Operand, ka: Operand, va: Operand) -> tuple[int, int, int, int, int, int]:
    """(B, L, H_kv, G, D, S) of query (B, L, H_kv, G, D) and key, value (B, S, H_kv, D), else
    `layout_error`'s E0701."""
    if len(qa.shape) != 5 or len(ka.shape) != 4 or va.shape != ka.shape:
        raise layout_error(op, _LAYOUT, f"shapes {qa.shape}, {ka.shape} and {va.shape}")
    (b, lq, hk, g, d), (bk, s, hk2, dk) = qa.shape, ka.shape
    if bk != b or hk2 != hk or dk != d or not hk:
        raise layout_error(op, _LAYOUT, f"shapes {qa.shape}, {ka.shape} and {va.shape}")
    return b, lq, hk, g, d, s


def _scalars(
    op: str, qa: Operand, sm_scale: Any, sliding_window: Any, start_q: Any
) -> tuple[float, Any, int | None]:
    """(scale, the start_q tensor the kernels read, WL): WL the keys a query sees before its
    own position, or None for no window, also where the window would keep every key a row may
    see (which keeps WL in 32 bits)."""
    scale = number(sm_scale, op, "sm_scale")
    w = _window(sliding_window, op)
    start, known = _start(start_q, qa, op)
    last = None if known is None else known + qa.shape[1] - 1
    wl = None if not w or (last is not None and w - 1 >= last) else min(w - 1, _I32[1])
    return scale, start, wl


def _attend(
    op: str,
    query: Any,
    key: Any,
    value: Any,
    sinks: Any,
    sm_scale: Any,
    sliding_window: Any,
    start_q: Any,
    split: int | None = None,
) -> Any:
    """The checks, then the kernel (the decode's: `_decode`, `split` its kv_len_per_split)."""
    qa, ka, va = float_operands(op, query=query, key=key, value=value)
    if not qa.dtype == ka.dtype == va.dtype:
        raise layout_error(
            op, _LAYOUT, f"dtypes {qa.dtype.name}, {ka.dtype.name} and {va.dtype.name}"
        )
    b, lq, hk, g, d, s = _layout(op, qa, ka, va)
    h = hk * g
    if sinks is None and op == "attention_sink_decode":
        sk = full(qa, (max(h, 1),), float("-inf"), dtypes.f32)
    else:
        sa = operand(sinks, op, "sinks", FLOATS, device=qa.tensor.device)
        if sa.shape != (h,):
            raise argument_error(
                f"`sinks` of `fearless.ops.{op}` must have shape (H,) = ({h},), one logit per "
                f"query head (H_kv {hk} x G {g}), got {sa.shape}",
                help="GPT-OSS keeps them as `self.sinks`, a parameter of (num_attention_heads,)",
            )
        sk = sa.tensor
    scale, start, wl = _scalars(op, qa, sm_scale, sliding_window, start_q)
    out, ret = attention_output(qa, (b, lq, h * d), s)
    if s and out.size:
        if op == "attention_sink_decode":
            _decode(qa, ka, va, sk, start, out, scale, wl, split)
            return result(qa, out, ret)
        attention_sink_tuned(
            view(qa.tensor, (b, lq, h, d)),
            ka.tensor,
            va.tensor,
            sk,
            start,
            view(out, (b, lq, h, d)),
            scale,
            g,
            wl,
        )
    return result(qa, out, ret)


def _decode(
    qa: Operand,
    ka: Operand,
    va: Operand,
    sinks: Any,
    start: Any,
    out: Any,
    scale: float,
    wl: int | None,
    split: int | None,
) -> None:
    """The split-KV decode's launches: q and out viewed as (B, H_kv, G, D) (one query token),
    the sinks as (H_kv, G); the split tuned, or pinned to `split` keys."""
    b, _, hk, g, d = qa.shape
    q, o = view(qa.tensor, (b, hk, g, d)), view(out, (b, hk, g, d))
    args = (q, ka.tensor, va.tensor, view(sinks, (hk, g)), start, o, scale, wl)
    if split is None:
        sink_decode_tuned(*args, sm_count())
    else:
        sink_decode_pinned(*args, split)


@replayable()
def attention_sink_backward(
    dout: Any,
    query: Any,
    key: Any,
    value: Any,
    sinks: Any,
    out: Any,
    sm_scale: float = 0.125,
    sliding_window: int | None = None,
    start_q: Any = 0,
) -> tuple[Any, Any, Any, Any]:
    """(d query, d key, d value, d sinks) of `attention_sink(query, key, value, sinks,
    sm_scale, sliding_window, start_q)`, whose result was `out` (B, L, H * D), for the gradient
    `dout` of that result: flash attention's backward with each row's log-sum-exp holding its
    sink, and d sinks[h] = -sum over the rows of head h of P_sink * rowsum(dout * out)
    (ops/kernels_attention_ragged_backward.py derives it)."""
    op = "attention_sink_backward"
    qa, ga, ka, va, oa = float_operands(op, query=query, dout=dout, key=key, value=value, out=out)
    if len({x.dtype for x in (ga, qa, ka, va, oa)}) != 1:
        raise layout_error(
            op, _LAYOUT, "dtypes " + ", ".join(x.dtype.name for x in (ga, qa, ka, va, oa))
        )
    b, lq, hk, g, d, s = _layout(op, qa, ka, va)
    h = hk * g
    if ga.shape != (b, lq, h * d) or oa.shape != ga.shape:
        raise layout_error(op, _LAYOUT, f"dout {ga.shape} and out {oa.shape} for (B, L, H * D)")
    sa = operand(sinks, op, "sinks", FLOATS, device=qa.tensor.device)
    if sa.shape != (h,):
        raise argument_error(
            f"`sinks` of `fearless.ops.{op}` must have shape (H,) = ({h},), got {sa.shape}",
        )
    scale, start, wl = _scalars(op, qa, sm_scale, sliding_window, start_q)
    runs = bool(qa.tensor.size and s)  # else no query meets a key: only d sinks may be nonzero
    grads = gradient_outputs(runs, qa, ka, va)
    ds, ds_ret = output(sa, (h,)) if runs else zeros_output(sa, (h,))
    if runs:
        seq = (b, lq, h, d)
        sink_attention_backward(
            view(qa.tensor, seq),
            ka.tensor,
            va.tensor,
            sa.tensor,
            start,
            view(oa.tensor, seq),
            view(ga.tensor, seq),
            view(grads[0][0], seq),
            grads[1][0],
            grads[2][0],
            ds,
            scale,
            g,
            wl,
        )
    return (*gradient_results((qa, ka, va), grads), result(sa, ds, ds_ret))
