"""TileGym's attention forwards (DESIGN 2c): `fearless.ops.fmha`, `swa_attention` and
`gemma_attention`, on the flash-attention kernel of ops/kernels_attention.py with its
`variant` flags, and `gemma_attention_decode` (one query token), on the split-KV decode
kernels with Gemma's flags (ops/kernels_attention_gemma.py).

What they take: q of (B, H, L, D) and k, v of (B, H_kv, S, D), H a multiple of H_kv (query head
h reads KV head h // (H / H_kv)); f32, f16 or bf16, one dtype; `scaling` (default 1 / sqrt(D)).
Where they differ from `scaled_dot_product_attention`: TileGym's (and flash-attn's) causal mask
is bottom-right aligned, so query i sits at position i' = i + S - L and sees keys j <= i' (with
L > S the first L - S queries see no key). A query that sees no key gives 0, and no gradient.
Their backward (`fmha_backward`, `swa_attention_backward`, `gemma_attention_backward`: torch
autograd's through ops/torch_ops_attention.py) is flash attention's, kernels_attention_backward.py's
three kernels with the same `variant` as the forward.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from ..dtypes import DType
from ..runtime.location import argument_error
from ._arguments import flag
from ._attention_checks import (
    FP8_INFERENCE,
    attention_scale,
    kept,
    kept_lse,
    lse_operand,
    qkv_mismatch,
    qkv_operands,
    sequence_layout,
    split_len,
)
from ._attention_outputs import attention_output, qkv_backward
from ._io import float_operands, heads_major, number, result, view
from ._replay import replayable
from ._route import torch_ops, training
from .attention_varlen import grouped_decode
from .kernels_attention import attention_tuned, attention_variant_tuned
from .kernels_attention_backward import attention_backward, forward_with_backward_ahead
from .kernels_attention_gemma import gemma_decode, gemma_decode_split
from .kernels_rows import sm_count

_I32_MAX = 2**31 - 1


@replayable()
def fmha(q: Any, k: Any, v: Any, scaling: float | None = None, is_causal: bool = True) -> Any:
    """TileGym's `fmha` (prefill): softmax(q k^T * scaling) v of q (B, H, L, D) over k, v
    (B, H_kv, S, D). `is_causal`: query i sees keys j <= i + S - L (bottom-right aligned, as
    flash-attn; torch's `is_causal` is top-left)."""
    is_causal = flag(is_causal, "fmha", "is_causal")
    if (t := torch_ops(q, k, v)) is not None:
        if training(q, k, v):
            return _train(t, "fmha", q, k, v, scaling, is_causal, (None, None, None))
        return t.fmha(q, k, v, scaling, is_causal)
    return attend("fmha", q, k, v, scaling, is_causal, None, None, None, kinds=FP8_INFERENCE)[0]


@replayable()
def swa_attention(
    q: Any,
    k: Any,
    v: Any,
    window_size: int,
    scaling: float | None = None,
    is_causal: bool = True,
) -> Any:
    """TileGym's `swa_attention` (sliding window, Mistral's): as `fmha`, query i (at i' =
    i + S - L) sees keys j with i' - window_size < j (the last `window_size` keys up to itself
    when causal: j <= i' too; no upper bound when not causal, as TileGym). window_size 0: no
    window (TileGym's "non-positive W means full"); below 0: an error."""
    is_causal = flag(is_causal, "swa_attention", "is_causal")
    if (t := torch_ops(q, k, v)) is not None:
        if training(q, k, v):
            bounds = _swa(window_size)
            return _train(t, "swa_attention", q, k, v, scaling, is_causal, bounds)
        return t.swa_attention(q, k, v, window_size, scaling, is_causal)
    return attend("swa_attention", q, k, v, scaling, is_causal, *_swa(window_size))[0]


@replayable()
def gemma_attention(
    q: Any,
    k: Any,
    v: Any,
    scaling: float | None = None,
    window_size: int = 0,
    soft_cap: float | None = None,
    is_causal: bool = True,
) -> Any:
    """TileGym's `gemma_attention` (Gemma 2's): as `fmha`, with the scores soft-capped,
    soft_cap * tanh(scores / soft_cap) (scores = q k^T * scaling), before the masks, and a
    window (0: none) that is TileGym's: query i (at i' = i + S - L) sees keys j with
    |j - i'| <= window_size (window_size + 1 keys up to itself when causal). soft_cap None: no
    cap; it must be above 0."""
    is_causal = flag(is_causal, "gemma_attention", "is_causal")
    if (t := torch_ops(q, k, v)) is not None:
        if training(q, k, v):
            bounds = _gemma(window_size, soft_cap, is_causal)
            return _train(t, "gemma_attention", q, k, v, scaling, is_causal, bounds)
        return t.gemma_attention(q, k, v, scaling, window_size, soft_cap, is_causal)
    bounds = _gemma(window_size, soft_cap, is_causal)
    return attend("gemma_attention", q, k, v, scaling, is_causal, *bounds)[0]


@replayable()
def fmha_backward(
    dout: Any,
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    scaling: float | None = None,
    is_causal: bool = True,
) -> tuple[Any, Any, Any]:
    """(dq, dk, dv) of `fmha(q, k, v, scaling, is_causal)`, whose result was `out`, for the
    gradient `dout` of that result (flash attention's backward: the probabilities recomputed)."""
    causal = flag(is_causal, "fmha_backward", "is_causal")
    return _backward("fmha_backward", dout, q, k, v, out, scaling, causal, None, None, None)


@replayable()
def swa_attention_backward(
    dout: Any,
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    window_size: int,
    scaling: float | None = None,
    is_causal: bool = True,
) -> tuple[Any, Any, Any]:
    """(dq, dk, dv) of `swa_attention(q, k, v, window_size, scaling, is_causal)`, whose result
    was `out`, for the gradient `dout` of that result."""
    is_causal = flag(is_causal, "swa_attention_backward", "is_causal")
    op = "swa_attention_backward"
    return _backward(op, dout, q, k, v, out, scaling, is_causal, *_swa(window_size, op))


@replayable()
def gemma_attention_backward(
    dout: Any,
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    scaling: float | None = None,
    window_size: int = 0,
    soft_cap: float | None = None,
    is_causal: bool = True,
) -> tuple[Any, Any, Any]:
    """(dq, dk, dv) of `gemma_attention(q, k, v, scaling, window_size, soft_cap, is_causal)`,
    whose result was `out`, for the gradient `dout` of that result (through the cap:
    d(cap tanh(x / cap)) = 1 - tanh(x / cap)^2)."""
    is_causal = flag(is_causal, "gemma_attention_backward", "is_causal")
    op = "gemma_attention_backward"
    bounds = _gemma(window_size, soft_cap, is_causal, op)
    return _backward(op, dout, q, k, v, out, scaling, is_causal, *bounds)


def _train(
    t: Any, op: str, q: Any, k: Any, v: Any, scaling: Any, causal: bool, bounds: tuple
) -> Any:
    """A training forward through torch (autograd records it): `attention_window_lse`, whose
    kept lse its backward takes instead of recomputing it; the output alone returned."""
    return t.attention_window_lse(q, k, v, op, scaling, causal, *bounds)[0]


def attention_window_lse(
    q: Any,
    k: Any,
    v: Any,
    op: str,
    scaling: Any,
    causal: bool,
    left: int | None,
    right: int | None,
    cap: float | None,
) -> tuple[Any, Any]:
    """(out, lse) of the forward `op` (fmha, swa_attention or gemma_attention) at its bounds
    (`attend`'s): the output, and the rows' base-2 log-sum-exp of the scores (B, H, L) f32
    (+inf for a row that sees no key), which `attention_window_backward` takes."""
    return attend(op, q, k, v, scaling, causal, left, right, cap, keep_lse=True)


def attention_window_backward(
    dout: Any,
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    lse: Any,
    op: str,
    scaling: Any,
    causal: bool,
    left: int | None,
    right: int | None,
    cap: float | None,
) -> tuple[Any, Any, Any]:
    """(dq, dk, dv) of `attention_window_lse`'s forward (`op` its backward's name in errors),
    from the lse that forward kept."""
    return _backward(op, dout, q, k, v, out, scaling, causal, left, right, cap, lse)


def _swa(window_size: Any, op: str = "swa_attention") -> tuple[int | None, None, None]:
    """(left, right, cap) of swa_attention's window: the last `window_size` keys."""
    w = _window(window_size, op)
    return (None if w == 0 else w - 1), None, None


def _gemma(
    window_size: Any, soft_cap: Any, causal: bool, op: str = "gemma_attention"
) -> tuple[int | None, int | None, float | None]:
    """(left, right, cap) of gemma_attention's window (|j - i'| <= window_size) and cap."""
    w = _window(window_size, op)
    cap = _soft_cap(soft_cap, op)
    left = right = None
    if w:
        left = w
        right = None if causal else w
    return left, right, cap


@replayable()
def gemma_attention_decode(
    q: Any,
    k: Any,
    v: Any,
    scaling: float | None = None,
    window_size: int = 0,
    soft_cap: float | None = None,
    kv_len_per_split: int | None = None,
) -> Any:
    """TileGym's `gemma_attention_decode` (Gemma 2's decode of one token): q (B, H, 1, D) over
    every key of k, v (B, H_kv, S, D), as `gemma_attention` of one query at position S - 1:
    scores = q k^T * scaling (default 1 / sqrt(D)), soft-capped (soft_cap None: no cap; else
    above 0), and a window (0: none) of the keys j >= S - 1 - window_size. On the split-KV
    decode kernels: kv_len_per_split (TileGym's keyword; a power of two, 16 or more) keys per
    split, or None to choose the split from the batch and the GPU; only the window's keys are
    split. Returns (B, H, 1, D). Forward only (no backward yet)."""
    op = "gemma_attention_decode"
    w = _window(window_size, op)
    cap = _soft_cap(soft_cap, op)
    split = split_len(kv_len_per_split, op)
    if (t := torch_ops(q, k, v)) is not None:
        return t.gemma_attention_decode(q, k, v, scaling, w, cap, split)

    def launch(qd: Any, k4: Any, v4: Any, od: Any, sc: float, s: int) -> None:
        lo = max(0, s - 1 - w) if w else 0
        if split is None:
            gemma_decode(qd, k4, v4, od, sc, cap, lo, sm_count())
        else:
            gemma_decode_split(qd, k4, v4, od, sc, cap, lo, split)

    return grouped_decode(op, q, k, v, "gemma_attention", scaling, "scaling", launch)


def _soft_cap(soft_cap: Any, op: str) -> float | None:
    if soft_cap is None:
        return None
    cap = number(soft_cap, op, "soft_cap")
    if not cap > 0.0 or math.isinf(cap):
        raise argument_error(
            f"`fearless.ops.{op}` needs soft_cap above 0 and finite, got {soft_cap!r}",
            help="pass soft_cap=None for no cap (Gemma 2 uses 50.0)",
        )
    return cap


def _window(window_size: Any, op: str) -> int:
    if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 0:
        raise argument_error(
            f"`fearless.ops.{op}` needs window_size an int of 0 or more, got {window_size!r}",
            help="pass 0 for no window",
        )
    return window_size


def attend(
    op: str,
    q: Any,
    k: Any,
    v: Any,
    scaling: Any,
    causal: bool,
    left: int | None,
    right: int | None,
    cap: float | None,
    keep_lse: bool = False,
    layout: tuple[bool, bool] | None = None,
    kinds: tuple[DType, ...] = (),
) -> tuple[Any, Any]:
    """The checks, then the kernel: (out, lse), lse None unless `keep_lse`. `left` / `right`
    (None: no bound) how far before / after its position a query sees, `cap` the soft cap
    (None: none). `layout` (q_seq, kv_seq): q, k and v as the kernel takes them (flash-attn's
    (B, L, H, D) where True), the output as q is and returned so; None: heads-major tensors,
    the sequence-major views among them read in place (`sequence_layout`), the output
    returned heads-major. `kinds`: the dtypes q, k and v may have (FLOATS by default)."""
    given = layout is not None
    if layout is None:
        layout, (q, k, v) = sequence_layout(q, k, v, keep_lse)
    qa, ka, va = qkv_operands(op, q, k, v, layout, kinds)
    q_seq, kv_seq = layout
    (_, h, lq, d), (_, hk, s, _) = heads_major(qa.shape, q_seq), heads_major(ka.shape, kv_seq)
    sc = attention_scale(scaling, d, op, "scaling")
    lse, lse_ret = kept_lse(qa, s, keep_lse)
    out, ret = attention_output(qa, qa.shape, s)  # no keys: every row is 0; q's layout
    if s and out.size:
        q4, k4, v4 = (view(x.tensor, x.shape) for x in (qa, ka, va))
        o4 = view(out, qa.shape)
        plan, group = _variant(lq, s, causal, left, right, cap), h // hk
        if plan is None:  # the plain kernels
            forward = partial(attention_tuned, q4, k4, v4, None, o4, sc, causal, group, lse, layout)
        else:
            forward = partial(
                attention_variant_tuned, q4, k4, v4, o4, sc, causal, group, *plan, lse, layout
            )
        if lse is None:
            forward()
        else:  # training: the backward's kernels compile beside the forward's
            bounds = plan or (None, 0, 0, 1.0)
            forward_with_backward_ahead(
                forward, q4, k4, v4, o4, lse, None, sc, causal, group, *bounds
            )
    returned = result(qa, out, ret)
    heads = q_seq and not given  # a base read in place: its (B, H, L, D) view goes back
    return (returned.transpose(1, 2) if heads else returned), kept(qa, lse, lse_ret)


def _variant(
    lq: int, s: int, causal: bool, left: int | None, right: int | None, cap: float | None
) -> tuple[tuple[bool, bool, bool, bool], int, int, float] | None:
    """The kernels' (variant, WL, WR, CAP), or None where the plain kernels compute it (no
    window, no cap, and a diagonal that is torch's: L == S or not causal)."""
    bounded = left is not None or right is not None
    bottom_right = lq != s and (causal or bounded)
    if not (bottom_right or bounded or cap is not None):
        return None
    variant = (bottom_right, left is not None, right is not None, cap is not None)
    wl, wr = (min(x or 0, s + lq, _I32_MAX) for x in (left, right))
    return variant, wl, wr, cap or 1.0


def _backward(
    op: str,
    dout: Any,
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    scaling: Any,
    causal: bool,
    left: int | None,
    right: int | None,
    cap: float | None,
    lse: Any = None,
) -> tuple[Any, Any, Any]:
    """The checks, then the backward kernels with `attend`'s bounds: (dq, dk, dv), each in the
    form (torch, NumPy, fl.Tensor) of q, k, v; `lse` the forward's kept lse, or None."""
    qa, ga, ka, va, oa = float_operands(op, q=q, dout=dout, k=k, v=v, out=out)
    if len({x.dtype for x in (ga, qa, ka, va, oa)}) != 1:
        raise qkv_mismatch(op, "dtypes " + ", ".join(x.dtype.name for x in (ga, qa, ka, va, oa)))
    if not (len(qa.shape) == len(ka.shape) == 4 and ga.shape == qa.shape == oa.shape):
        raise qkv_mismatch(op, f"dout {ga.shape}, q {qa.shape}, k {ka.shape} and out {oa.shape}")
    (b, h, lq, d), (bk, hk, s, dk) = qa.shape, ka.shape
    if bk != b or va.shape != ka.shape or dk != d or not hk or h % hk:
        raise qkv_mismatch(op, f"shapes {qa.shape}, {ka.shape} and {va.shape}")
    sc = attention_scale(scaling, d, op, "scaling")

    def launch(q4: Any, k4: Any, v4: Any, o4: Any, g4: Any, dq4: Any, dk4: Any, dv4: Any) -> None:
        variant, wl, wr, c = _variant(lq, s, causal, left, right, cap) or (None, 0, 0, 1.0)
        rows = lse_operand(lse, op, qa)
        attention_backward(
            q4, k4, v4, o4, g4, dq4, dk4, dv4, sc, causal, h // hk, variant, wl, wr, c, lse=rows
        )

    return qkv_backward(qa, ka, va, oa, ga, s, launch)
