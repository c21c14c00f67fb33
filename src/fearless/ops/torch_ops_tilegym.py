"""The other operators of DESIGN 2c as torch operators (TileGym's and Liger's names): the fused
linear cross-entropy (its forward computes the gradients, Liger's way, its backward scales
them), MoE (fused_moe with autograd), the block-scaled fp8 GEMM, the gated delta rule, persistent_layer_norm,
Liger's fused add + rms_norm (with autograd), Mamba-2's
scan (with autograd) and the mHC operators; each `torch.ops.fearless.<name>` with its fake
kernel, on the helpers of ops/torch_ops.py, registered with those when torch_library.py
registers fearless.ops. The attention family is in ops/torch_ops_attention.py. A torch operator
returns tensors only: where a Python operator gives None (the delta rule's final state when
not asked for), the torch one gives an empty (0,) tensor.
"""

from typing import Any, Optional

import torch
from torch import Tensor

import fearless.ops.add_norm as AN
import fearless.ops.delta_rule as DR
import fearless.ops.fp8_block_matmul as FP8
import fearless.ops.linear_cross_entropy as LCE
import fearless.ops.linear_gluact as GLU
import fearless.ops.mamba2 as M2
import fearless.ops.mhc as MHC
import fearless.ops.moe as MOE
import fearless.ops.moe_actgrad as MAG
import fearless.ops.persistent_norm as PN

from ..runtime.location import argument_error
from .torch_ops import (
    OPS,
    Ctx,
    _autograd,
    _define,
    _derive,
    _input,
    _like_first,
    _new,
    _nothing,
    _or_empty,
    _rms_eps,
    _shaped_as,
    first_order_error,
)

# ------------------------------------------------------ fused linear cross-entropy (DESIGN 2c)
# `fearless::fused_linear_cross_entropy` returns (loss, grad_hidden, grad_weight, grad_bias):
# the forward computes the gradients for an incoming gradient of 1 (Liger's way), and
# autograd's backward scales them by the loss's gradient. reduction="none" has a gradient per
# token, which the forward cannot know: it returns empty gradients and its backward runs the
# chunk loop again with them (`fused_linear_cross_entropy_backward`). An empty (0,) tensor
# stands for a gradient not computed (no bias, or "none"). The three gradients are values, not
# differentiable outputs (a loss through them is refused by autograd). `scale_in_place`: the
# backward scales them in place (Liger's way: no second weight-sized buffer at the backward),
# for a caller that drops them, as `fearless.ops.fused_linear_cross_entropy` does (it returns
# the loss alone); False, the default, scales copies, leaving the tensors the caller holds as
# they were returned.


def _lce_fake(
    hidden_states: Tensor,
    weight: Tensor,
    target: Tensor,
    bias: Tensor | None,
    reduction: str,
    **__: Any,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    h, none = hidden_states, reduction == "none"
    return (
        _new(h, tuple(target.shape) if none else ()),
        _new(h, (0,) if none else h.shape),
        _new(weight, (0,) if none else weight.shape),
        _new(h, (0,) if none or bias is None else bias.shape),
    )


@_define("fused_linear_cross_entropy", _lce_fake, by_name=True)
def fused_linear_cross_entropy(
    hidden_states: Tensor,
    weight: Tensor,
    target: Tensor,
    bias: Optional[Tensor] = None,  # noqa: UP045
    ignore_index: int = -100,
    chunk_size: int = 4096,
    reduction: str = "mean",
    accum_dtype: Optional[torch.dtype] = None,  # noqa: UP045
    scale_in_place: bool = False,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    grads = reduction in ("mean", "sum")
    loss, dh, dw, db = LCE.forward(
        hidden_states, weight, target, bias, ignore_index, chunk_size, reduction, grads,
        accum_dtype,
    )  # fmt: skip
    return loss, *(_or_empty(g, hidden_states) for g in (dh, dw, db))  # distinct: no aliases


def _lce_ctx(ctx: Ctx, inputs: tuple, output: tuple) -> None:
    h, w, target, bias, ignore_index, chunk_size, reduction, accum_dtype, in_place = inputs
    ctx.reduction = reduction  # type: ignore[attr-defined]
    ctx.in_place = in_place  # type: ignore[attr-defined]
    ctx.has_bias = bias is not None  # type: ignore[attr-defined]
    ctx.args = (ignore_index, chunk_size, accum_dtype)  # type: ignore[attr-defined]
    # the gradients returned beside the loss are values: a loss through them is refused by
    # autograd, and their own gradients are never made (no zero tensors of h's and W's size)
    ctx.mark_non_differentiable(*output[1:])
    ctx.set_materialize_grads(False)
    if reduction == "none":
        ctx.save_for_backward(h, w, target, bias)
    else:
        ctx.save_for_backward(*output[1:])


@_autograd(fused_linear_cross_entropy, _lce_ctx)
def _lce_bwd(ctx: Any, dloss: Tensor | None, *_: Tensor | None) -> tuple:
    if dloss is None:  # no gradient reached the loss (set_materialize_grads(False))
        return (None,) * 9
    if torch.is_grad_enabled():  # create_graph=True: a gradient to differentiate again
        raise first_order_error("fused_linear_cross_entropy_backward")
    if ctx.reduction == "none":
        h, w, target, bias = ctx.saved_tensors
        dh, dw, db = OPS.fused_linear_cross_entropy_backward(dloss, h, w, target, bias, *ctx.args)
    elif not ctx.in_place:  # the caller may hold the returned gradients: scale copies
        dh, dw, db = (g * dloss for g in ctx.saved_tensors)
    else:
        # in place, as Liger's backward: no second grad_weight of the weight's size at the
        # start of the backward (a training step's memory peak); the saved gradients are this
        # node's alone (the caller dropped them), so a second backward through them
        # (retain_graph) is refused, here rather than by torch's version check on reading them
        if getattr(ctx, "spent", False):
            raise argument_error(
                "a second backward through `fearless.ops.fused_linear_cross_entropy`'s loss "
                "(retain_graph=True): its first backward scaled the gradients the forward "
                "computed, in place, as Liger-Kernel's does, to spare a weight-sized buffer",
                help="compute the loss again for another backward, or take "
                "reduction='none' and reduce it yourself (its backward recomputes)",
            )
        ctx.spent = True  # type: ignore[attr-defined]
        dh, dw, db = (g.mul_(dloss) for g in ctx.saved_tensors)
    return dh, dw, None, (db if ctx.has_bias else None), None, None, None, None, None


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
    accum_dtype: Optional[torch.dtype] = None,  # noqa: UP045
) -> tuple[Tensor, Tensor, Tensor]:
    dh, dw, db = LCE.backward(
        grad_output, hidden_states, weight, target, bias, ignore_index, chunk_size, accum_dtype
    )
    return dh, dw, _or_empty(db, hidden_states)


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


def _moe_grads(dy: Tensor, x: Tensor, w1: Tensor, w2: Tensor, weights: Tensor, *_: Any) -> tuple:
    """The fake kernel of fused_moe_backward: the gradients shaped as the four float inputs."""
    return _shaped_as(x, w1, w2, weights)


@_define("fused_moe_backward", _moe_grads)
def fused_moe_backward(
    grad_output: Tensor,
    hidden_states: Tensor,
    w1: Tensor,
    w2: Tensor,
    topk_weights: Tensor,
    topk_ids: Tensor,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(d hidden_states, d w1, d w2, d topk_weights) (ops/moe.py)."""
    return MOE.fused_moe_backward(  # type: ignore[return-value]
        grad_output, hidden_states, w1, w2, topk_weights, topk_ids
    )


def _save_moe(ctx: Ctx, inputs: tuple, output: Tensor) -> None:
    """Only the inputs: the backward aligns the slots again and recomputes the gate and up
    pre-activations."""
    ctx.save_for_backward(*inputs)


@_autograd(fused_moe, _save_moe)
def _fused_moe_bwd(ctx: Any, dy: Tensor) -> tuple:
    return (*OPS.fused_moe_backward(dy.contiguous(), *ctx.saved_tensors), None)


# ------------------------------------------------------------- block-scaled fp8 GEMM (DESIGN 2c)


def _fp8_fake(
    A: Tensor, B: Tensor, As: Tensor, Bs: Tensor, bs: Any = None, dt: Any = None
) -> Tensor:
    """A (..., K) and B (N, K) give (..., N) in output_dtype (f32 for None)."""
    return A.new_empty((*A.shape[:-1], B.shape[0]), dtype=dt or torch.float32)


@_define("w8a8_block_fp8_matmul", _fp8_fake, forward_only=True)
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


# ---------------------------------------------------------------------- gated delta rule


def _delta_fake(
    query: Tensor, value: Tensor, output_final_state: bool, **__: Any
) -> tuple[Tensor, Tensor]:
    """output (B, T, HV, V) in the query's dtype; the final state (B, HV, K, V) f32 when
    `output_final_state`, else (0,)."""
    b, t, _, k = query.shape
    hv, v = value.shape[2:]
    state = (b, hv, k, v) if output_final_state else (0,)
    return _new(query, (b, t, hv, v)), query.new_empty(state, dtype=torch.float32)


@_define("recurrent_gated_delta_rule", _delta_fake, by_name=True, forward_only=True)
def recurrent_gated_delta_rule(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    g: Tensor,
    beta: Tensor,
    initial_state: Optional[Tensor] = None,  # noqa: UP045
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
) -> tuple[Tensor, Tensor]:
    out, state = DR.recurrent_gated_delta_rule(
        query, key, value, g, beta, initial_state, output_final_state, use_qk_l2norm_in_kernel
    )
    return out, _or_empty(state, query, torch.float32)


@_define("chunk_gated_delta_rule", _delta_fake, by_name=True, forward_only=True)
def chunk_gated_delta_rule(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    g: Tensor,
    beta: Tensor,
    chunk_size: int = 64,
    initial_state: Optional[Tensor] = None,  # noqa: UP045
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
) -> tuple[Tensor, Tensor]:
    out, state = DR.chunk_gated_delta_rule(
        query,
        key,
        value,
        g,
        beta,
        chunk_size,
        initial_state,
        output_final_state,
        use_qk_l2norm_in_kernel,
    )
    return out, _or_empty(state, query, torch.float32)


# ------------------------------------------------------------ persistent layer norm (DESIGN 2c)


def _pln_fake(
    input: Tensor, weight: Any, bias: Any, eps: float, mean: Any = None, rstd: Any = None
) -> tuple[Tensor, Tensor, Tensor]:
    """y like the input; mean and rstd f32 (rows,), or (0,) when given (the Python operator
    returns the given ones: a torch operator may not return its inputs)."""
    rows = input.numel() // max(input.shape[-1], 1) if mean is None else 0
    stat = input.new_empty((rows,), dtype=torch.float32)
    return _new(input, input.shape), stat, input.new_empty((rows,), dtype=torch.float32)


@_define("persistent_layer_norm", _pln_fake, forward_only=True)
def persistent_layer_norm(
    input: Tensor,
    weight: Optional[Tensor],  # noqa: UP045
    bias: Optional[Tensor],  # noqa: UP045
    eps: float,
    mean: Optional[Tensor] = None,  # noqa: UP045
    rstd: Optional[Tensor] = None,  # noqa: UP045
) -> tuple[Tensor, Tensor, Tensor]:
    y, m, r, _, _ = PN.persistent_layer_norm(input, None, weight, bias, eps, mean, rstd)
    if mean is not None:
        m, r = (input.new_empty((0,), dtype=torch.float32) for _ in range(2))
    return y, m, r


# ------------------------------------------------------ Liger's fused add + rms_norm


def _add_norm_fake(x: Tensor, *_: Any) -> tuple[Tensor, Tensor]:
    """y and s, both shaped as x."""
    return _new(x, x.shape), _new(x, x.shape)


@_define("fused_add_rms_norm", _add_norm_fake)
def fused_add_rms_norm(
    x: Tensor,
    residual: Tensor,
    weight: Optional[Tensor] = None,  # noqa: UP045
    eps: Optional[float] = None,  # noqa: UP045
) -> tuple[Tensor, Tensor]:
    """(rms_norm(x + residual) * weight, x + residual) (ops/add_norm.py)."""
    return AN.fused_add_rms_norm(x, residual, weight, eps)  # type: ignore[no-any-return]


def _save_add_norm(ctx: Ctx, inputs: tuple, output: tuple[Tensor, Tensor]) -> None:
    """The sum s (the norm's input) and the weight; eps as the forward took it."""
    x, _, weight, eps = inputs
    ctx.save_for_backward(output[1], weight)
    ctx.eps = _rms_eps(x, eps)  # type: ignore[attr-defined]


@_autograd(fused_add_rms_norm, _save_add_norm)
def _fused_add_rms_norm_bwd(ctx: Any, dy: Tensor, ds: Tensor) -> tuple:
    """rms_norm's backward on s, plus s's own gradient: both x and residual get the sum."""
    s, weight = ctx.saved_tensors
    dx, dw = OPS.rms_norm_backward(dy.contiguous(), s, weight, ctx.eps)
    total = dx + ds
    return total, total, (dw if weight is not None else None), None


# ------------------------------------------------------------------ Mamba-2's SSD scan


def _state_dtype(state: Optional[Tensor]) -> torch.dtype:  # noqa: UP045
    return torch.float32 if state is None else state.dtype


def _m2_fake(
    x: Tensor,
    b: Tensor,
    init_state: Tensor | None,
    **__: Any,
) -> tuple[Tensor, Tensor]:
    bsz, _, h, p = x.shape
    state = x.new_empty((bsz, h, p, b.shape[3]), dtype=_state_dtype(init_state))
    return _new(x, x.shape), state


@_define("mamba2_chunk_forward", _m2_fake, by_name=True)
def mamba2_chunk_forward(
    x: Tensor,
    a: Tensor,
    b: Tensor,
    c: Tensor,
    d: Tensor,
    dt: Tensor,
    init_state: Optional[Tensor],  # noqa: UP045
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor]:
    out, state = M2.mamba2_chunk_forward(x, a, b, c, d, dt, init_state, chunk_size)
    return out, state


def _m2_ctx(ctx: Ctx, inputs: tuple, output: tuple) -> None:
    *tensors, chunk_size = inputs
    ctx.save_for_backward(*tensors)
    ctx.chunk_size = chunk_size  # type: ignore[attr-defined]


@_autograd(mamba2_chunk_forward, _m2_ctx)
def _m2_bwd(ctx: Any, dy: Optional[Tensor], dfinal: Optional[Tensor]) -> tuple:  # noqa: UP045
    x, a, b, c, d, dt, init = ctx.saved_tensors
    dy = torch.zeros_like(x) if dy is None else dy.contiguous()
    dfinal = None if dfinal is None else dfinal.contiguous()
    dx, da, db, dc, dd, ddt, dinit = OPS.mamba2_chunk_backward(
        x, a, b, c, d, dt, init, dy, dfinal, ctx.chunk_size
    )
    dinit = None if init is None else dinit.to(init.dtype)
    return dx, da.to(a.dtype), db, dc, dd.to(d.dtype), ddt, dinit, None


def _m2_bwd_fake(
    x: Tensor,
    a: Tensor,
    b: Tensor,
    dt: Tensor,
    dfinal_state: Tensor | None,
    **__: Any,
) -> tuple[Tensor, ...]:
    bsz, _, h, p = x.shape
    f32 = torch.float32
    return (
        _new(x, x.shape),
        a.new_empty((h,), dtype=f32),
        _new(b, b.shape),
        _new(b, b.shape),
        a.new_empty((h,), dtype=f32),
        _new(dt, dt.shape),
        x.new_empty((bsz, h, p, b.shape[3]), dtype=_state_dtype(dfinal_state)),
    )


def _m2_backward(*inputs: Any) -> tuple[Tensor, ...]:
    return tuple(M2.mamba2_chunk_backward(*inputs))


# mamba2_chunk_forward's inputs with the gradients of its two outputs before chunk_size: (x, a,
# b, c, d, dt, init_state, dout, dfinal_state, chunk_size) -> (dx, da, db, dc, dd, ddt, dinit)
mamba2_chunk_backward = _derive(
    "mamba2_chunk_backward",
    _m2_bwd_fake,
    _m2_backward,
    "mamba2_chunk_forward",
    tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor],
    {7: (_input("dout"), _input("dfinal_state", Optional[Tensor]))},  # noqa: UP045
    by_name=True,
)


# ------------------------------------------------ TileGym's experimental mHC (DESIGN 2c)


def _mhc_gemm_fake(
    x: Tensor, w: Tensor, n: int, a_pre: float, a_post: float, a_res: float, bias: Tensor
) -> tuple[Tensor, Tensor]:
    """y (M, N) in bias's dtype, r (M, 1) f32."""
    y = x.new_empty((x.shape[0], w.shape[1]), dtype=bias.dtype)
    return y, x.new_empty((x.shape[0], 1), dtype=torch.float32)


@_define("mhc_gemm_rms_scale", _mhc_gemm_fake, forward_only=True)
def mhc_gemm_rms_scale(
    x: Tensor,
    w: Tensor,
    n: int,
    alpha_pre: float,
    alpha_post: float,
    alpha_res: float,
    bias: Tensor,
) -> tuple[Tensor, Tensor]:
    return MHC.mhc_gemm_rms_scale(x, w, n, alpha_pre, alpha_post, alpha_res, bias)  # type: ignore[no-any-return]


@_define("mhc_apply_residual", _like_first, forward_only=True)
def mhc_apply_residual(x: Tensor, f_out: Tensor, y: Tensor, n: int) -> Tensor:
    return MHC.mhc_apply_residual(x, f_out, y, n)  # type: ignore[no-any-return]


# mhc_sinkhorn writes y in place (a mutating op, as splitk_reduce): an input that requires grad
# is refused by the body (ops/_io.py's refuse_grad).


@_define("mhc_sinkhorn", _nothing, mutates=("y",))
def mhc_sinkhorn(y: Tensor, n: int) -> None:
    MHC.mhc_sinkhorn(y, n)


# ------------------------------------------------------ TileGym's fused GLU MLP (DESIGN 2c)


def _gluact_fake(
    input: Tensor, weight_act: Tensor, weight_noact: Tensor, weight2: Tensor, act: str = "silu"
) -> Tensor:
    """input (*, in_features) gives (*, final_features) in its dtype."""
    return _new(input, (*input.shape[:-1], weight2.shape[0]))


@_define("linear_gluact_linear", _gluact_fake, forward_only=True)
def linear_gluact_linear(
    input: Tensor,
    weight_act: Tensor,
    weight_noact: Tensor,
    weight2: Tensor,
    act_type: str = "silu",
) -> Tensor:
    """act(input @ weight_act^T) * (input @ weight_noact^T) @ weight2^T
    (ops/linear_gluact.py)."""
    return GLU.linear_gluact_linear(input, weight_act, weight_noact, weight2, act_type)  # type: ignore[no-any-return]


# ------------------------------------- MoE down-projection activation-gradient backward (2c)
# moe_actgrad_bwd writes dh, ds (adding to it) and a_prime in place, as TileGym's: a mutating
# op that returns nothing, refusing inputs that require grad in its body (ops/_io.py's
# refuse_grad). b2 and db2 are accepted and unused, as TileGym's.


@_define("moe_actgrad_bwd", _nothing, mutates=("dh", "ds", "a_prime"))
def moe_actgrad_bwd(
    dout: Tensor,
    h: Tensor,
    w2: Tensor,
    dh: Tensor,
    ds: Tensor,
    b2: Optional[Tensor],  # noqa: UP045
    db2: Optional[Tensor],  # noqa: UP045
    a_prime: Tensor,
    topk_scores: Tensor,
    expert_frequency_offset: Tensor,
    x_gather_idx: Tensor,
    s_scatter_idx: Tensor,
    activation_type: str,
    max_tokens_per_expert: Optional[int] = None,  # noqa: UP045
) -> None:
    MAG.moe_actgrad_bwd(
        dout, h, w2, dh, ds, b2, db2, a_prime, topk_scores, expert_frequency_offset,
        x_gather_idx, s_scatter_idx, activation_type, max_tokens_per_expert,
    )  # fmt: skip
