"""The attention family of DESIGN 2c as torch operators: TileGym's attention forwards (fmha,
swa_attention, gemma_attention, fmha_varlen and attention_sink with their backward; fmha_decode,
gemma_attention_decode and attention_sink_decode), flash-attn's
flash_attn_with_kvcache, DeepSeek's MLA forms and sparse_mla, and splitk_reduce; each
`torch.ops.fearless.<name>` with its fake kernel, on the helpers of ops/torch_ops.py, registered
with those when torch_library.py registers fearless.ops. A forward-only operator refuses an
input that requires grad at the call (`_define`'s `forward_only`), never cuts it from the graph.
"""

from collections.abc import Callable
from typing import Any, Optional

import torch
from torch import Tensor

import fearless.ops.attention_mla as MLA
import fearless.ops.attention_mla_sparse as MLAS
import fearless.ops.attention_sinks as AS
import fearless.ops.attention_splitk as SPLITK
import fearless.ops.attention_variants as AV
import fearless.ops.attention_varlen as AVL
import fearless.ops.kvcache_attention as KV

from .torch_ops import (
    OPS,
    Ctx,
    _define,
    _derive,
    _input,
    _kept_lse,
    _like_first,
    _like_q,
    _new,
    _nothing,
    _qkv_grads,
    _shaped_as,
    _with_lse,
    register_autograd,
)

_QKV_GRADS = tuple[Tensor, Tensor, Tensor]
_DOUT = (_input("dout"),)  # an attention backward's first input, then its forward's tensors
_OUT = (_input("out"),)  # the forward's output, after its tensors, before its settings

# ------------------------------------------------------ TileGym's attention forwards (DESIGN 2c)


@_define("fmha", _like_q)
def fmha(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scaling: Optional[float] = None,  # noqa: UP045
    is_causal: bool = True,
) -> Tensor:
    return AV.fmha(q, k, v, scaling, is_causal)  # type: ignore[no-any-return]


@_define("swa_attention", _like_q)
def swa_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    window_size: int,
    scaling: Optional[float] = None,  # noqa: UP045
    is_causal: bool = True,
) -> Tensor:
    return AV.swa_attention(q, k, v, window_size, scaling, is_causal)  # type: ignore[no-any-return]


@_define("gemma_attention", _like_q)
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


def _qkv_backward(forward: str, impl: Callable[..., Any]) -> Any:
    """`fearless::<forward>_backward(dout, q, k, v, out, *the forward's settings) -> (dq, dk,
    dv)` over `impl`: the forward's inputs, as `_attention_autograd` passes them, `_derive`d
    from the forward's schema."""
    return _derive(
        f"{forward}_backward", _qkv_grads, impl, forward, _QKV_GRADS, {0: _DOUT, 3: _OUT}
    )


fmha_backward = _qkv_backward("fmha", AV.fmha_backward)
swa_attention_backward = _qkv_backward("swa_attention", AV.swa_attention_backward)
gemma_attention_backward = _qkv_backward("gemma_attention", AV.gemma_attention_backward)


@_define("attention_window_lse", _with_lse)
def attention_window_lse(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    op: str,
    scaling: Optional[float],  # noqa: UP045
    is_causal: bool,
    left: Optional[int],  # noqa: UP045
    right: Optional[int],  # noqa: UP045
    cap: Optional[float],  # noqa: UP045
) -> tuple[Tensor, Tensor]:
    """fmha, swa_attention and gemma_attention in training (their autograd'd calls): the
    output and the kept lse (ops/attention_variants.py)."""
    return AV.attention_window_lse(q, k, v, op, scaling, is_causal, left, right, cap)  # type: ignore[no-any-return]


# (dout, q, k, v, out, lse, op, *settings): attention_window_lse's inputs and outputs
attention_window_backward = _derive(
    "attention_window_backward",
    _qkv_grads,
    AV.attention_window_backward,
    "attention_window_lse",
    _QKV_GRADS,
    {0: _DOUT, 3: (*_OUT, _input("lse"))},
)


def _window_lse_ctx(ctx: Ctx, inputs: tuple, output: tuple[Tensor, Tensor]) -> None:
    """q, k, v, out and the kept lse saved (lse non-differentiable: a loss through it is
    refused by autograd), the settings kept, the backward's name for its errors."""
    q, k, v, op, *settings = inputs
    out, kept = _kept_lse(ctx, output)
    ctx.save_for_backward(q, k, v, out, *kept)
    ctx.args = (f"{op}_backward", *settings)  # type: ignore[attr-defined]


def _window_lse_backward(ctx: Any, dy: Tensor | None, _dlse: Tensor | None) -> tuple:
    """q, k and v's gradients; none where none reached the output (None: `_kept_lse` turns
    off autograd's zero-filling), and none for op and the settings."""
    if dy is None:
        return (None, None, None, *(None for _ in ctx.args))
    grads = OPS.attention_window_backward(dy, *ctx.saved_tensors, *ctx.args)
    return (*grads, *(None for _ in ctx.args))


register_autograd(attention_window_lse, _window_lse_backward, _window_lse_ctx)


def _attention_autograd(forward: Any, name: str, n_grads: int = 3, n_saved: int = 0) -> None:
    """`forward`'s autograd formula: its first `n_grads` inputs (q, k, v; attention_sink's
    query, key, value, sinks), the output and its last `n_saved` inputs (fmha_varlen's lengths,
    tensors or None) saved, the other inputs (the settings) kept, and
    `fearless::<name>_backward(dy, *those inputs, output, *settings, *the saved last ones)` for
    their gradients."""

    def setup(ctx: Ctx, inputs: tuple, output: Tensor) -> None:
        end = len(inputs) - n_saved
        ctx.save_for_backward(*inputs[:n_grads], output, *inputs[end:])
        ctx.args = inputs[n_grads:end]  # type: ignore[attr-defined]

    def backward(ctx: Any, dy: Tensor) -> tuple:
        saved = ctx.saved_tensors
        last = saved[n_grads + 1 :]
        grads = getattr(OPS, f"{name}_backward")(dy, *saved[: n_grads + 1], *ctx.args, *last)
        return (*grads, *(None for _ in (*ctx.args, *last)))

    register_autograd(forward, backward, setup)


for _op, _name in (
    (fmha, "fmha"),
    (swa_attention, "swa_attention"),
    (gemma_attention, "gemma_attention"),
):
    _attention_autograd(_op, _name)


# gemma_attention's inputs but is_causal (a decode's query is the last position), then the split
gemma_attention_decode = _derive(
    "gemma_attention_decode",
    _like_first,
    AV.gemma_attention_decode,
    "gemma_attention",
    Tensor,
    {7: (_input("kv_len_per_split", Optional[int], None),)},  # noqa: UP045
    drop=("is_causal",),
    forward_only=True,
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


fmha_varlen_backward = _qkv_backward("fmha_varlen", AVL.fmha_varlen_backward)
# the lengths (tensors or None) saved, after the settings in the backward's inputs
_attention_autograd(fmha_varlen, "fmha_varlen", n_saved=2)


@_define("fmha_decode", _like_first, forward_only=True)
def fmha_decode(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    sm_scale: Optional[float],  # noqa: UP045
    kv_len_per_split: Optional[int] = None,  # noqa: UP045
) -> Tensor:
    return AVL.fmha_decode(q, k, v, sm_scale, kv_len_per_split)  # type: ignore[no-any-return]


def _start(start_q: Tensor | None) -> Tensor | int:
    """The sink operators' start_q as ops/attention_sinks.py takes it: None (the schema's
    default) is position 0."""
    return 0 if start_q is None else start_q


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
        query, key, value, sinks, sm_scale, sliding_window, _start(start_q)
    )


def _sink_grads(
    dout: Tensor, query: Tensor, key: Tensor, value: Tensor, sinks: Tensor, *_: Any, **__: Any
) -> tuple:
    """The fake kernel of attention_sink_backward: gradients shaped as query, key, value, sinks."""
    return _shaped_as(query, key, value, sinks)


def _sink_backward(*inputs: Any) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """attention_sink_backward's body: its inputs in order, start_q (the last) as `_start`'s."""
    backward: Callable[..., tuple[Tensor, Tensor, Tensor, Tensor]] = AS.attention_sink_backward
    return backward(*inputs[:-1], _start(inputs[-1]))


# (dout, query, key, value, sinks, out, *attention_sink's settings)
attention_sink_backward = _derive(
    "attention_sink_backward",
    _sink_grads,
    _sink_backward,
    "attention_sink",
    tuple[Tensor, Tensor, Tensor, Tensor],
    {0: _DOUT, 4: _OUT},
)


# start_q (a tensor or None) is kept with the settings, not saved
_attention_autograd(attention_sink, "attention_sink", n_grads=4)


@_define("attention_sink_decode", _sink_out, forward_only=True)
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
        query, key, value, sinks, sm_scale, sliding_window, _start(start_q), kv_len_per_split
    )


@_define("flash_attn_with_kvcache", _like_first, forward_only=True)
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


# ------------------------------------------------------------ multi-head latent attention


@_define("mla", _like_first, forward_only=True)
def mla(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    qpe: Tensor,
    kpe: Tensor,
    is_causal: bool,
    scaling: Optional[float] = None,  # noqa: UP045
) -> Tensor:
    """q (B, H, L, D) gives (B, H, L, D)."""
    return MLA.mla(q, k, v, qpe, kpe, is_causal, scaling)  # type: ignore[no-any-return]


def _decoding_fake(q: Tensor, *_: object, **__: object) -> tuple[Tensor, Tensor]:
    """q (B, H, D) gives o (B, H, D) and an f32 lse (B, H)."""
    return _new(q, q.shape), q.new_empty(tuple(q.shape[:2]), dtype=torch.float32)


@_define("mla_decoding", _decoding_fake, forward_only=True)
def mla_decoding(
    q: Tensor,
    qpe: Tensor,
    kv: Tensor,
    kpe: Tensor,
    sm_scale: Optional[float] = None,  # noqa: UP045
    transpose: bool = True,
) -> tuple[Tensor, Tensor]:
    return MLA.mla_decoding(q, qpe, kv, kpe, sm_scale, transpose)  # type: ignore[no-any-return]


@_define("mla_decoding_split_kv", _like_first, forward_only=True)
def mla_decoding_split_kv(
    q: Tensor,
    qpe: Tensor,
    kv: Tensor,
    kpe: Tensor,
    sm_scale: Optional[float] = None,  # noqa: UP045
    kv_len_per_split: Optional[int] = None,  # noqa: UP045
) -> Tensor:
    return MLA.mla_decoding_split_kv(  # type: ignore[no-any-return]
        q, qpe, kv, kpe, sm_scale, kv_len_per_split
    )


@_define("sparse_mla", _like_first, forward_only=True)
def sparse_mla(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    indices: Tensor,
    qpe: Tensor,
    kpe: Tensor,
    is_causal: bool = True,
    scaling: Optional[float] = None,  # noqa: UP045
) -> Tensor:
    """q (B, H, S, D) gives (B, H, S, D)."""
    return MLAS.sparse_mla(q, k, v, indices, qpe, kpe, is_causal, scaling)  # type: ignore[no-any-return]


# --------------------------------------------------- split-KV reduction (DESIGN 2c, in place)
# It writes attn_out, as TileGym's: torch knows the op mutates it (functionalised under
# torch.compile) and returns nothing. torch takes no autograd formula for a mutating op; an
# input that requires grad is refused by the body (ops/_io.py's operand).


@_define("splitk_reduce", _nothing, mutates=("attn_out",))
def splitk_reduce(
    attn_splitk_out: Tensor, lse_splitk_out: Tensor, attn_out: Tensor, S_kv: int
) -> None:
    SPLITK.splitk_reduce(attn_splitk_out, lse_splitk_out, attn_out, S_kv)
