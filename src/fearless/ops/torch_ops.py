"""fearless.ops as torch operators: `torch.ops.fearless.<name>`, with fake (meta) kernels for
torch.compile and torch.export, and autograd formulas whose backward runs fearless kernels.

Importing this module imports torch and registers everything (torch_library.py does it once,
on first need). Each operator is a `torch.library.custom_op` over the function of the same name
in functional.py (`_define`: the typed signature below is the op's schema; its body runs under
`kernels_only`, so it never dispatches again); its fake kernel gives the output's shape, dtype
and device without running anything; `register_autograd` saves what the backward needs and
calls the backward operators (`fearless::softmax_backward`, ...), themselves custom ops, so
that torch.compile traces the backward graph too. Every operator has a backward except
scaled_dot_product_attention with an `attn_mask` and TileGym's attention forwards (fmha,
swa_attention, gemma_attention, fmha_varlen, fmha_decode, attention_sink,
attention_sink_decode, flash_attn_with_kvcache, fused_moe, w8a8_block_fp8_matmul, and the
gated delta rule and MLA of ops/torch_ops_delta_rule.py and torch_ops_mla.py): not yet; an
input that requires grad where no gradient can
flow (rope's cos and sin, a masked or forward-only attention's inputs) is refused at the
call, never detached.

dropout returns its mask's seed beside its output (a 0-d int64 CPU tensor): the seed is drawn
inside the operator, at run time, so a compiled graph draws a new mask per call, and the
backward replays the same mask from it.
"""

import functools
import secrets
from collections.abc import Callable
from typing import Any, Optional

import torch
from torch import Tensor

import fearless.ops.attention as A
import fearless.ops.attention_sinks as AS
import fearless.ops.attention_variants as AV
import fearless.ops.attention_varlen as AVL
import fearless.ops.backward_activation as bwa
import fearless.ops.backward_rows as bwr
import fearless.ops.fp8_block_matmul as FP8
import fearless.ops.functional as F
import fearless.ops.kvcache_attention as KV
import fearless.ops.linear_cross_entropy as LCE
import fearless.ops.moe as MOE

from ..runtime.location import argument_error
from ._route import kernels_only

NS = "fearless"
Ctx = torch.autograd.function.FunctionCtx
OPS: Any = torch.ops.fearless  # filled by the definitions below


def _new(x: Tensor, shape: tuple[int, ...] | list[int]) -> Tensor:
    """A contiguous tensor like `x` (dtype, device) of `shape`: what every operator returns."""
    return x.new_empty(tuple(shape))


def _like_first(first: Tensor, *_: Any, **__: Any) -> Tensor:
    """The fake kernel of an operator whose output is shaped as its first argument."""
    return _new(first, first.shape)


def _like_second(_: Tensor, second: Tensor, *__: Any, **___: Any) -> Tensor:
    """The fake kernel of a backward op (dy, x, ...) whose gradient is shaped as x."""
    return _new(second, second.shape)


def _halved(x: Tensor, *_: Any, **__: Any) -> Tensor:
    """The fake kernel of a gated operator: the last axis halved."""
    return _new(x, (*x.shape[:-1], x.shape[-1] // 2))


def _define(name: str, fake: Callable[..., Any]) -> Callable[[Callable[..., Any]], Any]:
    """Register the decorated typed function as `fearless::<name>`, its body run under
    `kernels_only`, with `fake` as its fake kernel."""

    def define(body: Callable[..., Any]) -> Any:
        @functools.wraps(body)
        def run(*args: Any, **kwargs: Any) -> Any:
            with kernels_only():
                return body(*args, **kwargs)

        op = torch.library.custom_op(f"{NS}::{name}", run, mutates_args=())
        op.register_fake(fake)
        return op

    return define


def _autograd(op: Any, setup: Callable[..., Any] | None) -> Callable[[Callable[..., Any]], Any]:
    """Register the decorated function as `op`'s backward, after `setup` (its setup_context)."""

    def register(backward: Callable[..., Any]) -> Any:
        op.register_autograd(backward, setup_context=setup)
        return backward

    return register


def _save_tensors(ctx: Ctx, inputs: tuple, output: Any) -> None:
    """Save the tensor inputs; keep the others (approximate, dim, eps) as `ctx.args`."""
    ctx.save_for_backward(*(i for i in inputs if isinstance(i, Tensor)))
    ctx.args = [i for i in inputs if not isinstance(i, Tensor)]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------ rows


@_define("softmax", _like_first)
def softmax(x: Tensor, dim: int = -1) -> Tensor:
    return F.softmax(x, dim)  # type: ignore[no-any-return]


def _save_output(ctx: Ctx, inputs: tuple, output: Tensor) -> None:
    ctx.save_for_backward(output)
    ctx.dim = inputs[1]  # type: ignore[attr-defined]


@_autograd(softmax, _save_output)
def _softmax_bwd(ctx: Any, dy: Tensor) -> tuple:
    (y,) = ctx.saved_tensors
    return OPS.softmax_backward(y, dy, ctx.dim), None


@_define("softmax_backward", _like_first)
def softmax_backward(y: Tensor, dy: Tensor, dim: int = -1) -> Tensor:
    return bwr.softmax_backward(y, dy, dim)  # type: ignore[no-any-return]


@_define("rms_norm", _like_first)
def rms_norm(
    x: Tensor, normalized_shape: list[int], weight: Tensor | None = None, eps: float | None = None
) -> Tensor:
    return F.rms_norm(x, normalized_shape, weight, eps)  # type: ignore[no-any-return]


def _rms_norm_ctx(ctx: Ctx, inputs: tuple, output: Tensor) -> None:
    x, _, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = float(eps) if eps is not None else torch.finfo(x.dtype).eps  # type: ignore[attr-defined]


@_autograd(rms_norm, _rms_norm_ctx)
def _rms_norm_bwd(ctx: Any, dy: Tensor) -> tuple:
    x, weight = ctx.saved_tensors
    dx, dw = OPS.rms_norm_backward(dy, x, weight, ctx.eps)
    return dx, None, (dw if weight is not None else None), None


def _norm_grads_fake(dy: Tensor, x: Tensor, *params: Any) -> tuple[Tensor, ...]:
    """dx, then one gradient per parameter: (n,), or (0,) for a parameter that is None."""
    n = (x.shape[-1],)
    return (_new(x, x.shape), *(_new(x, n if p is not None else (0,)) for p in params[:-1]))


@_define("rms_norm_backward", _norm_grads_fake)
def rms_norm_backward(
    dy: Tensor, x: Tensor, weight: Tensor | None, eps: float
) -> tuple[Tensor, Tensor]:
    dx, dw = bwr.rms_norm_backward(dy, x, weight, eps)
    return dx, (dw if dw is not None else x.new_empty((0,)))


@_define("layer_norm", _like_first)
def layer_norm(
    x: Tensor,
    normalized_shape: list[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    return F.layer_norm(x, normalized_shape, weight, bias, eps)  # type: ignore[no-any-return]


def _layer_norm_ctx(ctx: Ctx, inputs: tuple, output: Tensor) -> None:
    x, _, weight, bias, eps = inputs
    ctx.save_for_backward(x, weight, bias)
    ctx.eps = float(eps)  # type: ignore[attr-defined]


@_autograd(layer_norm, _layer_norm_ctx)
def _layer_norm_bwd(ctx: Any, dy: Tensor) -> tuple:
    x, weight, bias = ctx.saved_tensors
    dx, dw, db = OPS.layer_norm_backward(dy, x, weight, bias, ctx.eps)
    return dx, None, (dw if weight is not None else None), (db if bias is not None else None), None


@_define("layer_norm_backward", _norm_grads_fake)
def layer_norm_backward(
    dy: Tensor, x: Tensor, weight: Tensor | None, bias: Tensor | None, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    dx, dw, db = bwr.layer_norm_backward(dy, x, weight, bias, eps)
    none = x.new_empty((0,))
    return dx, (dw if dw is not None else none), (db if db is not None else none)


# ------------------------------------------------------------------------------------ GEMM


@_define("matmul", lambda a, b: _new(a, (a.shape[0], b.shape[1])))
def matmul(a: Tensor, b: Tensor) -> Tensor:
    return F.matmul(a, b)  # type: ignore[no-any-return]


def _gemm_grads(needs: Any, a: Tensor, b: Tensor, dy: Tensor, mm: Any) -> tuple:
    """(dA, dB) of A @ B: dY @ B^T and A^T @ dY, each only where an input needs it."""
    t = OPS.transpose
    return (mm(dy, t(b)) if needs[0] else None), (mm(t(a), dy) if needs[1] else None)


@_autograd(matmul, _save_tensors)
def _matmul_bwd(ctx: Any, dy: Tensor) -> tuple:
    a, b = ctx.saved_tensors
    return _gemm_grads(ctx.needs_input_grad, a, b, dy, OPS.matmul)


@_define("bmm", lambda a, b: _new(a, (a.shape[0], a.shape[1], b.shape[2])))
def bmm(a: Tensor, b: Tensor) -> Tensor:
    return F.bmm(a, b)  # type: ignore[no-any-return]


@_autograd(bmm, _save_tensors)
def _bmm_bwd(ctx: Any, dy: Tensor) -> tuple:
    a, b = ctx.saved_tensors
    return _gemm_grads(ctx.needs_input_grad, a, b, dy, OPS.bmm)


@_define(
    "group_gemm",
    lambda As, Bs: [_new(a, (a.shape[0], b.shape[1])) for a, b in zip(As, Bs, strict=True)],
)
def group_gemm(As: list[Tensor], Bs: list[Tensor]) -> list[Tensor]:
    return F.group_gemm(As, Bs)


def _group_gemm_ctx(ctx: Ctx, inputs: tuple, output: list[Tensor]) -> None:
    As, Bs = inputs
    ctx.needs = [(a.requires_grad, b.requires_grad) for a, b in zip(As, Bs, strict=True)]  # type: ignore[attr-defined]
    ctx.save_for_backward(*As, *Bs)


@_autograd(group_gemm, _group_gemm_ctx)
def _group_gemm_bwd(ctx: Any, dys: list[Tensor]) -> tuple:
    saved, n = ctx.saved_tensors, len(ctx.needs)
    grads = [
        _gemm_grads(ctx.needs[i], saved[i], saved[n + i], dys[i], OPS.matmul) for i in range(n)
    ]
    return [g[0] for g in grads], [g[1] for g in grads]


# ----------------------------------------------------------------------------- activations


def _activation(name: str, fake: Callable[..., Any]) -> tuple[Any, Any]:
    """`fearless::<name>(x)` over functional.py's `<name>` and `fearless::<name>_backward(dy, x)`
    over backward_activation.py's, registered as the first's autograd formula: the operators
    of an activation of x alone (none with a setting, such as gelu's `approximate`)."""
    forward, backward = getattr(F, name), getattr(bwa, f"{name}_backward")

    def op(x: Tensor) -> Tensor:
        return forward(x)  # type: ignore[no-any-return]

    def op_backward(dy: Tensor, x: Tensor) -> Tensor:
        return backward(dy, x)  # type: ignore[no-any-return]

    defined = _define(name, fake)(op)
    defined_backward = _define(f"{name}_backward", _like_second)(op_backward)

    @_autograd(defined, _save_tensors)
    def _bwd(ctx: Any, dy: Tensor) -> tuple:
        return (getattr(OPS, f"{name}_backward")(dy, *ctx.saved_tensors),)

    return defined, defined_backward


relu, relu_backward = _activation("relu", _like_first)


@_define("gelu", _like_first)
def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    return F.gelu(x, approximate)  # type: ignore[no-any-return]


@_define("gelu_backward", _like_second)
def gelu_backward(dy: Tensor, x: Tensor, approximate: str = "none") -> Tensor:
    return bwa.gelu_backward(dy, x, approximate)  # type: ignore[no-any-return]


@_autograd(gelu, _save_tensors)
def _gelu_bwd(ctx: Any, dy: Tensor) -> tuple:
    return OPS.gelu_backward(dy, *ctx.saved_tensors, *ctx.args), None


silu_and_mul, silu_and_mul_backward = _activation("silu_and_mul", _halved)


@_define("geglu", _halved)
def geglu(x: Tensor, dim: int = -1, approximate: str = "none") -> Tensor:
    return F.geglu(x, dim, approximate)  # type: ignore[no-any-return]


@_define("geglu_backward", _like_second)
def geglu_backward(dy: Tensor, x: Tensor, approximate: str = "none") -> Tensor:
    return bwa.geglu_backward(dy, x, approximate)  # type: ignore[no-any-return]


@_autograd(geglu, _save_tensors)
def _geglu_bwd(ctx: Any, dy: Tensor) -> tuple:
    _, approximate = ctx.args
    return OPS.geglu_backward(dy, *ctx.saved_tensors, approximate), None, None


@_define("swiglu", _like_first)
def swiglu(a: Tensor, b: Tensor) -> Tensor:
    return F.swiglu(a, b)  # type: ignore[no-any-return]


@_define("swiglu_backward", lambda dy, a, b: (_new(a, a.shape), _new(b, b.shape)))
def swiglu_backward(dy: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    return bwa.swiglu_backward(dy, a, b)  # type: ignore[no-any-return]


@_autograd(swiglu, _save_tensors)
def _swiglu_bwd(ctx: Any, dy: Tensor) -> tuple:
    return tuple(OPS.swiglu_backward(dy, *ctx.saved_tensors))


@_define("dropout", lambda x, p, seed=None: (_new(x, x.shape), torch.empty((), dtype=torch.int64)))
def dropout(x: Tensor, p: float, seed: int | None = None) -> tuple[Tensor, Tensor]:
    s = secrets.randbits(63) if seed is None else int(seed)
    out = F.dropout(x, p, True, s)
    return (out if out is not x else x.clone()), torch.tensor(s, dtype=torch.int64)


@_define("dropout_backward", _like_first)
def dropout_backward(dy: Tensor, seed: Tensor, p: float) -> Tensor:
    dx = F.dropout(dy, p, True, int(seed))
    return dx if dx is not dy else dy.clone()  # type: ignore[no-any-return]


def _dropout_ctx(ctx: Ctx, inputs: tuple, output: tuple) -> None:
    ctx.save_for_backward(output[1])
    ctx.p = inputs[1]  # type: ignore[attr-defined]


@_autograd(dropout, _dropout_ctx)
def _dropout_bwd(ctx: Any, dy: Tensor, _dseed: Tensor) -> tuple:
    (seed,) = ctx.saved_tensors
    return OPS.dropout_backward(dy, seed, ctx.p), None, None


# ---------------------------------------------------------------------------------- layout


@_define("transpose", lambda x: _new(x, (*x.shape[:-2], x.shape[-1], x.shape[-2])))
def transpose(x: Tensor) -> Tensor:
    return F.transpose(x)  # type: ignore[no-any-return]


@_autograd(transpose, None)
def _transpose_bwd(ctx: Any, dy: Tensor) -> tuple:
    return (OPS.transpose(dy),)


def _rotated_fake(q: Tensor, k: Tensor, *_: Any) -> tuple[Tensor, Tensor]:
    return _new(q, q.shape), _new(k, k.shape)


@_define("rope", _rotated_fake)
def rope(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    return F.rope(q, k, cos, sin)  # type: ignore[no-any-return]


@_define("rope_backward", _rotated_fake)
def rope_backward(dq: Tensor, dk: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    return F.rope_backward(dq, dk, cos, sin)  # type: ignore[no-any-return]


def _rope_ctx(ctx: Ctx, inputs: tuple, output: tuple) -> None:
    _, _, cos, sin = inputs
    for t, name in ((cos, "cos"), (sin, "sin")):
        if t.requires_grad:
            raise argument_error(
                f"`{name}` of `fearless.ops.rope` requires grad, but rope has no gradient "
                "for its cos and sin tables: it would be cut from the autograd graph",
                help=f"pass `{name}.detach()` (position tables are constants in training)",
            )
    ctx.save_for_backward(cos, sin)


@_autograd(rope, _rope_ctx)
def _rope_bwd(ctx: Any, dq: Tensor, dk: Tensor) -> tuple:
    cos, sin = ctx.saved_tensors
    return (*OPS.rope_backward(dq, dk, cos, sin), None, None)


# ------------------------------------------------------------------------------- attention


@_define("scaled_dot_product_attention", lambda q, *_, **__: _new(q, q.shape))
def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Optional[Tensor] = None,  # noqa: UP045  (torch's schema inference reads it)
    is_causal: bool = False,
    scale: Optional[float] = None,  # noqa: UP045
    enable_gqa: bool = False,
) -> Tensor:
    return A.scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale, enable_gqa)  # type: ignore[no-any-return]


@_define(
    "scaled_dot_product_attention_backward",
    lambda dout, q, k, v, *_, **__: (_new(q, q.shape), _new(k, k.shape), _new(v, v.shape)),
)
def scaled_dot_product_attention_backward(
    dout: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    is_causal: bool = False,
    scale: Optional[float] = None,  # noqa: UP045
    enable_gqa: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    return A.scaled_dot_product_attention_backward(  # type: ignore[no-any-return]
        dout, q, k, v, out, is_causal, scale, enable_gqa
    )


def _attention_ctx(ctx: Ctx, inputs: tuple, output: Tensor) -> None:
    q, k, v, attn_mask, is_causal, scale, enable_gqa = inputs
    if attn_mask is not None:
        raise argument_error(
            "`fearless.ops.scaled_dot_product_attention` has no backward with an `attn_mask` "
            "yet: its result would be cut from the autograd graph",
            help="for a causal mask pass `is_causal=True`; else call it under "
            "`torch.no_grad()` (inference), or use torch's own for training",
        )
    ctx.save_for_backward(q, k, v, output)
    ctx.args = (is_causal, scale, enable_gqa)  # type: ignore[attr-defined]


@_autograd(scaled_dot_product_attention, _attention_ctx)
def _attention_bwd(ctx: Any, dy: Tensor) -> tuple:
    q, k, v, out = ctx.saved_tensors
    dq, dk, dv = OPS.scaled_dot_product_attention_backward(dy, q, k, v, out, *ctx.args)
    return dq, dk, dv, None, None, None, None


# ------------------------------------------------------ TileGym's attention forwards (DESIGN 2c)


# What trains where a forward-only operator does not (its backward is flash attention's): only
# where it computes the same thing.
_TRAIN_WITH = {
    "fmha": ", or `fearless.ops.scaled_dot_product_attention` for training (its causal mask is "
    "top-left: fmha's when L == S)"
}


def _forward_only(name: str) -> Callable[..., None]:
    """The setup_context of a forward-only operator: an input that requires grad is refused at
    the call, not cut from the autograd graph."""

    also = _TRAIN_WITH.get(name, "")

    def refuse(ctx: Ctx, inputs: tuple, output: Tensor) -> None:
        raise argument_error(
            f"`fearless.ops.{name}` has no backward yet (forward only): its result would be cut "
            "from the autograd graph",
            help=f"call it under `torch.no_grad()` (inference){also}",
        )

    return refuse


def _no_backward(ctx: Any, *_: Any) -> tuple:
    raise AssertionError("unreachable: the setup_context refuses first")


@_define("fmha", _like_first)
def fmha(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scaling: Optional[float] = None,  # noqa: UP045
    is_causal: bool = True,
) -> Tensor:
    return AV.fmha(q, k, v, scaling, is_causal)  # type: ignore[no-any-return]


@_define("swa_attention", _like_first)
def swa_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    window_size: int,
    scaling: Optional[float] = None,  # noqa: UP045
    is_causal: bool = True,
) -> Tensor:
    return AV.swa_attention(q, k, v, window_size, scaling, is_causal)  # type: ignore[no-any-return]


@_define("gemma_attention", _like_first)
def gemma_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scaling: Optional[float] = None,  # noqa: UP045
    window_size: int = 0,
    soft_cap: Optional[float] = None,  # noqa: UP045
    is_causal: bool = True,
) -> Tensor:
    return AV.gemma_attention(  # type: ignore[no-any-return]
        q, k, v, scaling, window_size, soft_cap, is_causal
    )


@_define("fmha_varlen", _like_first)
def fmha_varlen(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scaling: Optional[float] = None,  # noqa: UP045
    is_causal: bool = True,
    q_lens: Optional[Tensor] = None,  # noqa: UP045
    kv_lens: Optional[Tensor] = None,  # noqa: UP045
) -> Tensor:
    return AVL.fmha_varlen(  # type: ignore[no-any-return]
        q, k, v, scaling, is_causal, q_lens, kv_lens
    )


@_define("fmha_decode", _like_first)
def fmha_decode(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    sm_scale: Optional[float],  # noqa: UP045
    kv_len_per_split: Optional[int] = None,  # noqa: UP045
) -> Tensor:
    return AVL.fmha_decode(q, k, v, sm_scale, kv_len_per_split)  # type: ignore[no-any-return]


def _sink_out(query: Tensor, *_: Any, **__: Any) -> Tensor:
    """The fake kernel of attention_sink(_decode): query (B, L, H_kv, G, D) gives
    (B, L, H_kv * G * D)."""
    b, lq, hk, g, d = query.shape
    return _new(query, (b, lq, hk * g * d))


@_define("attention_sink", _sink_out)
def attention_sink(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    sinks: Tensor,
    sm_scale: float = 0.125,
    sliding_window: Optional[int] = None,  # noqa: UP045
    start_q: Optional[Tensor] = None,  # noqa: UP045
) -> Tensor:
    return AS.attention_sink(  # type: ignore[no-any-return]
        query, key, value, sinks, sm_scale, sliding_window, 0 if start_q is None else start_q
    )


@_define("attention_sink_decode", _sink_out)
def attention_sink_decode(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    sinks: Optional[Tensor],  # noqa: UP045
    sm_scale: float = 0.125,
    sliding_window: Optional[int] = None,  # noqa: UP045
    start_q: Optional[Tensor] = None,  # noqa: UP045
    kv_len_per_split: Optional[int] = None,  # noqa: UP045
) -> Tensor:
    return AS.attention_sink_decode(  # type: ignore[no-any-return]
        query,
        key,
        value,
        sinks,
        sm_scale,
        sliding_window,
        0 if start_q is None else start_q,
        kv_len_per_split,
    )


@_define("flash_attn_with_kvcache", _like_first)
def flash_attn_with_kvcache(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    cache_seqlens: Optional[Tensor] = None,  # noqa: UP045
    block_table: Optional[Tensor] = None,  # noqa: UP045
    softmax_scale: Optional[float] = None,  # noqa: UP045
    causal: bool = False,
    window_size: Optional[list[int]] = None,  # noqa: UP045
    softcap: float = 0.0,
) -> Tensor:
    """flash-attn's (no append): q (B, L, H, D) gives (B, L, H, D); an int cache_seqlens
    arrives as a (B,) int32 tensor (ops/kvcache_attention.py)."""
    window = (-1, -1) if window_size is None else (window_size[0], window_size[1])
    return KV.flash_attn_with_kvcache(  # type: ignore[no-any-return]
        q, k_cache, v_cache, cache_seqlens, block_table, softmax_scale, causal, window, softcap
    )


for _op, _name in (
    (flash_attn_with_kvcache, "flash_attn_with_kvcache"),
    (fmha, "fmha"),
    (swa_attention, "swa_attention"),
    (gemma_attention, "gemma_attention"),
    (fmha_varlen, "fmha_varlen"),
    (fmha_decode, "fmha_decode"),
    (attention_sink, "attention_sink"),
    (attention_sink_decode, "attention_sink_decode"),
):
    _op.register_autograd(_no_backward, setup_context=_forward_only(_name))


# ------------------------------------------------------ fused linear cross-entropy (DESIGN 2c)
# `fearless::fused_linear_cross_entropy` returns (loss, grad_hidden, grad_weight, grad_bias):
# the forward computes the gradients for an incoming gradient of 1 (Liger's way), and
# autograd's backward scales them by the loss's gradient. reduction="none" has a gradient per
# token, which the forward cannot know: it returns empty gradients and its backward runs the
# chunk loop again with them (`fused_linear_cross_entropy_backward`). An empty (0,) tensor
# stands for a gradient not computed (no bias, or "none").


def _lce_fake(
    h: Tensor,
    w: Tensor,
    target: Tensor,
    bias: Tensor | None = None,
    ignore_index: int = -100,
    chunk_size: int = 4096,
    reduction: str = "mean",
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    none = reduction == "none"
    return (
        _new(h, tuple(target.shape) if none else ()),
        _new(h, (0,) if none else h.shape),
        _new(w, (0,) if none else w.shape),
        _new(h, (0,) if none or bias is None else bias.shape),
    )


@_define("fused_linear_cross_entropy", _lce_fake)
def fused_linear_cross_entropy(
    hidden_states: Tensor,
    weight: Tensor,
    target: Tensor,
    bias: Optional[Tensor] = None,  # noqa: UP045
    ignore_index: int = -100,
    chunk_size: int = 4096,
    reduction: str = "mean",
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    grads = reduction in ("mean", "sum")
    loss, dh, dw, db = LCE.forward(
        hidden_states, weight, target, bias, ignore_index, chunk_size, reduction, grads
    )
    none = [hidden_states.new_empty((0,)) for _ in range(3)]  # distinct: no aliased outputs
    return loss, *(g if g is not None else e for g, e in zip((dh, dw, db), none, strict=True))


def _lce_ctx(ctx: Ctx, inputs: tuple, output: tuple) -> None:
    h, w, target, bias, ignore_index, chunk_size, reduction = inputs
    ctx.reduction = reduction  # type: ignore[attr-defined]
    ctx.has_bias = bias is not None  # type: ignore[attr-defined]
    ctx.args = (ignore_index, chunk_size)  # type: ignore[attr-defined]
    if reduction == "none":
        ctx.save_for_backward(h, w, target, bias)
    else:
        ctx.save_for_backward(*output[1:])


@_autograd(fused_linear_cross_entropy, _lce_ctx)
def _lce_bwd(ctx: Any, dloss: Tensor, *_: Tensor) -> tuple:
    if ctx.reduction == "none":
        h, w, target, bias = ctx.saved_tensors
        dh, dw, db = OPS.fused_linear_cross_entropy_backward(dloss, h, w, target, bias, *ctx.args)
    else:
        dh, dw, db = (g * dloss for g in ctx.saved_tensors)
    return dh, dw, None, (db if ctx.has_bias else None), None, None, None


@_define(
    "fused_linear_cross_entropy_backward",
    lambda dy, h, w, target, bias, *_: (
        _new(h, h.shape),
        _new(w, w.shape),
        _new(h, bias.shape if bias is not None else (0,)),
    ),
)
def fused_linear_cross_entropy_backward(
    grad_output: Tensor,
    hidden_states: Tensor,
    weight: Tensor,
    target: Tensor,
    bias: Optional[Tensor],  # noqa: UP045
    ignore_index: int,
    chunk_size: int,
) -> tuple[Tensor, Tensor, Tensor]:
    dh, dw, db = LCE.backward(
        grad_output, hidden_states, weight, target, bias, ignore_index, chunk_size
    )
    return dh, dw, (db if db is not None else hidden_states.new_empty((0,)))


# ------------------------------------------------------------------ mixture of experts (DESIGN 2c)


def _align_fake(topk_ids: Tensor, block_size: int, num_experts: int) -> tuple:
    """TileGym's five int32 tensors (ops/moe.py): their lengths follow from the shapes."""
    n = topk_ids.numel()
    length = n + num_experts * (block_size - 1)
    sizes = (length, -(-length // block_size), 1, num_experts + 1, 1)
    return tuple(topk_ids.new_empty((size,), dtype=torch.int32) for size in sizes)


@_define("moe_align_block_size", _align_fake)
def moe_align_block_size(
    topk_ids: Tensor, block_size: int, num_experts: int
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    return MOE.moe_align_block_size(topk_ids, block_size, num_experts)  # type: ignore[return-value]


@_define("fused_moe", _like_first)
def fused_moe(
    hidden_states: Tensor, w1: Tensor, w2: Tensor, topk_weights: Tensor, topk_ids: Tensor
) -> Tensor:
    """hidden_states (T, H) gives (T, H) (ops/moe.py)."""
    return MOE.fused_moe(hidden_states, w1, w2, topk_weights, topk_ids)  # type: ignore[no-any-return]


fused_moe.register_autograd(_no_backward, setup_context=_forward_only("fused_moe"))


# ------------------------------------------------------------- block-scaled fp8 GEMM (DESIGN 2c)


def _fp8_fake(
    A: Tensor, B: Tensor, As: Tensor, Bs: Tensor, bs: Any = None, dt: Any = None
) -> Tensor:
    """A (..., K) and B (N, K) give (..., N) in output_dtype (f32 for None)."""
    return A.new_empty((*A.shape[:-1], B.shape[0]), dtype=dt or torch.float32)


@_define("w8a8_block_fp8_matmul", _fp8_fake)
def w8a8_block_fp8_matmul(
    A: Tensor,
    B: Tensor,
    As: Tensor,
    Bs: Tensor,
    block_size: Optional[list[int]] = None,  # noqa: UP045
    output_dtype: Optional[torch.dtype] = None,  # noqa: UP045
) -> Tensor:
    """DeepSeek-V3's block-scaled fp8 GEMM (ops/fp8_block_matmul.py)."""
    return FP8.w8a8_block_fp8_matmul(A, B, As, Bs, block_size, output_dtype)  # type: ignore[no-any-return]


w8a8_block_fp8_matmul.register_autograd(
    _no_backward, setup_context=_forward_only("w8a8_block_fp8_matmul")
)
