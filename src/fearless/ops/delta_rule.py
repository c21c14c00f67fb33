"""Qwen3-Next's gated delta rule (DESIGN 2c, linear attention): `fearless.ops.
recurrent_gated_delta_rule` and `fearless.ops.chunk_gated_delta_rule`, on the kernels of
ops/kernels_delta_rule.py.

The layouts and meanings are TileGym 1.5.1's (`tilegym/ops/ops.py`, its cuTile
`recurrent_gated_delta_rule.py` and `chunk_gated_delta_rule.py`, and the torch references of
`tests/ops/test_{recurrent,chunk}_gated_delta_rule.py`, Hugging Face's Qwen3-Next code):
query and key (B, T, H, K), value (B, T, HV, V) of one dtype (f32, f16 or bf16), with HV a
multiple of H (value head hv reads query/key head hv // (HV // H), as TileGym's recurrent
kernel; its chunked kernel has H = HV only, fearless takes the grouping in both); g (B, T, HV)
the log decay and beta (B, T, HV) the update gate, each any float dtype; initial_state None
(zeros) or (B, HV, K, V), any float dtype, used in f32. Per head, with the state S (K, V):
    S = S * exp(g_t);  S = S + k_t (beta_t (v_t - S^T k_t))^T;  o_t = S^T (q_t / sqrt(K))
q_t and k_t first scaled to unit length (x * rsqrt(sum x^2 + 1e-6)) when
use_qk_l2norm_in_kernel. Both return (output (B, T, HV, V) in the query's dtype, the final
state (B, HV, K, V) in f32 when output_final_state, else None). The recurrent form walks the
steps one by one; the chunked form (chunk_size: a power of two, 16 to 128) does the same
algebra a chunk at a time (the reference's WY / UT form), and agrees with it to rounding.
Forward only: an input that requires grad is refused at the call (ops/torch_ops.py), never
detached.
"""

from __future__ import annotations

from typing import Any

from .. import dtypes
from ..autotune_ahead import compile_ahead_once
from ..errors import KernelTypeError
from ..runtime.location import argument_error
from ..runtime.tensor import Tensor
from ._arguments import is_one_of
from ._io import FLOATS, Operand, cast, empty_beside, float_operands, operand, output, result, view
from ._replay import replayable
from ._route import torch_ops
from .kernels_delta_rule import chunk_inter_tuned, chunk_prepare_launch, recurrent_tuned
from .kernels_rows import size_class

CHUNK_SIZES = (16, 32, 64, 128)


@replayable()
def recurrent_gated_delta_rule(
    query: Any,
    key: Any,
    value: Any,
    g: Any,
    beta: Any,
    initial_state: Any = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
) -> tuple[Any, Any]:
    """TileGym's `recurrent_gated_delta_rule`: the gated delta rule one time step after
    another (see the module docstring). Returns (output (B, T, HV, V), the final state
    (B, HV, K, V) f32 or None). Forward only."""
    op = "recurrent_gated_delta_rule"
    final = _flag(output_final_state, op, "output_final_state")
    l2 = _flag(use_qk_l2norm_in_kernel, op, "use_qk_l2norm_in_kernel")
    if (t := torch_ops(query, key, value, g, beta, initial_state)) is not None:
        out, state = t.recurrent_gated_delta_rule(
            query, key, value, g, beta, initial_state, final, l2
        )
        return out, state if final else None
    return _run(op, query, key, value, g, beta, None, initial_state, final, l2)


@replayable()
def chunk_gated_delta_rule(
    query: Any,
    key: Any,
    value: Any,
    g: Any,
    beta: Any,
    chunk_size: int = 64,
    initial_state: Any = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
) -> tuple[Any, Any]:
    """TileGym's `chunk_gated_delta_rule`: the gated delta rule chunk_size steps at a time
    (a power of two, 16 to 128; see the module docstring). Returns (output (B, T, HV, V), the
    final state (B, HV, K, V) f32 or None). Forward only."""
    op = "chunk_gated_delta_rule"
    if isinstance(chunk_size, bool) or not is_one_of(chunk_size, CHUNK_SIZES):
        raise argument_error(
            f"`chunk_size` of `fearless.ops.{op}` must be one of {', '.join(map(str, CHUNK_SIZES))}"
            f" (a power of two: it is a tile's extent), got {chunk_size!r}",
            help="pass chunk_size=64 (the default, TileGym's and Qwen3-Next's)",
        )
    final = _flag(output_final_state, op, "output_final_state")
    l2 = _flag(use_qk_l2norm_in_kernel, op, "use_qk_l2norm_in_kernel")
    if (t := torch_ops(query, key, value, g, beta, initial_state)) is not None:
        out, state = t.chunk_gated_delta_rule(
            query, key, value, g, beta, chunk_size, initial_state, final, l2
        )
        return out, state if final else None
    return _run(op, query, key, value, g, beta, chunk_size, initial_state, final, l2)


def _flag(value: Any, op: str, name: str) -> bool:
    if not isinstance(value, bool):
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` must be a bool, got {value!r:.40}",
            help=f"pass `{name}=True` or `False`",
        )
    return value


def _run(
    op: str,
    query: Any,
    key: Any,
    value: Any,
    g: Any,
    beta: Any,
    chunk_size: int | None,
    initial_state: Any,
    final: bool,
    l2: bool,
) -> tuple[Any, Any]:
    """The checks, then the kernels (recurrent when chunk_size is None)."""
    qa, ka, va, ga, ba = float_operands(op, query=query, key=key, value=value, g=g, beta=beta)
    if not qa.dtype == ka.dtype == va.dtype:
        raise _mismatch(op, f"dtypes {qa.dtype.name}, {ka.dtype.name} and {va.dtype.name}")
    if len(qa.shape) != 4 or ka.shape != qa.shape or len(va.shape) != 4:
        raise _mismatch(op, f"shapes {qa.shape}, {ka.shape} and {va.shape}")
    (b, t, h, kd), (bv, tv, hv, vd) = qa.shape, va.shape
    if (bv, tv) != (b, t) or not h or hv % h:
        raise _mismatch(op, f"shapes {qa.shape}, {ka.shape} and {va.shape}")
    for x, name in ((ga, "g"), (ba, "beta")):
        if x.shape != (b, t, hv):
            raise argument_error(
                f"`{name}` of `fearless.ops.{op}` must have shape (B, T, HV) = {(b, t, hv)}, "
                f"one value per step and value head, got {x.shape}",
                help="Qwen3-Next computes g and beta per value head: (batch, seq, heads)",
            )
    if not (t and kd and vd and b):
        raise argument_error(
            f"`fearless.ops.{op}` needs at least one batch, step, key and value column, got "
            f"query {qa.shape} and value {va.shape}",
            help="an empty sequence has no output: the state stays the initial one",
        )
    s0 = _initial(initial_state, op, (b, hv, kd, vd), qa.tensor.device)
    out, ret = output(qa, (b, t, hv, vd))
    state, state_ret = output(qa, (b, hv, kd, vd), dtypes.f32) if final else (None, None)
    out5 = view(out, (b, t, hv, 1, vd))
    st5 = None if state is None else view(state, (b, 1, hv, kd, vd))
    args = (qa.tensor, ka.tensor, va.tensor, ga.tensor, ba.tensor)
    if chunk_size is None:
        recurrent_tuned(out5, *args, s0, st5, kd**-0.5, hv // h, l2)
    else:
        _chunked(out5, *args, s0, st5, kd**-0.5, hv // h, l2, chunk_size)
    final_state = None if state is None else result(qa, state, state_ret)
    return result(qa, out, ret), final_state


def _chunked(
    out: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    s0: Tensor | None,
    state: Tensor | None,
    scale: float,
    group: int,
    l2: bool,
    cs: int,
) -> None:
    """The two chunk kernels, through f32 scratch beside the output."""
    b, t, hv, _, vd = out.shape
    nc = -(-t // cs)
    u = empty_beside(out, (b, hv, nc, cs, vd), dtypes.f32)
    w = empty_beside(out, (b, hv, nc, cs, k.shape[3]), dtypes.f32)
    gc = empty_beside(out, (b, hv, nc, cs, 1), dtypes.f32)

    def run() -> None:
        chunk_prepare_launch(u, w, gc, k, v, g, beta, group, l2)
        chunk_inter_tuned(out, q, k, u, w, gc, s0, state, scale, group, l2)

    forms = (s0 is None, None if s0 is None else s0.dtype, state is None, group, l2, cs)
    sizes = (size_class(b), size_class(t), q.shape[2], q.shape[3], hv, vd)  # B, T by class
    compile_ahead_once(("chunk_gated_delta_rule", *sizes, q.dtype, *forms), run)
    run()


def _initial(initial_state: Any, op: str, shape: tuple[int, ...], dev: int) -> Tensor | None:
    """The initial state as an f32 tensor of `shape` (B, HV, K, V), or None."""
    if initial_state is None:
        return None
    sa: Operand = operand(initial_state, op, "initial_state", FLOATS, device=dev)
    if sa.shape != shape:
        raise argument_error(
            f"`initial_state` of `fearless.ops.{op}` must have shape (B, HV, K, V) = {shape}, "
            f"got {sa.shape}",
            help="pass the final state an earlier call returned (output_final_state=True), "
            "or None for zeros",
        )
    return cast(sa, dtypes.f32)


def _mismatch(op: str, what: str) -> KernelTypeError:
    return argument_error(
        f"`fearless.ops.{op}` needs query and key (B, T, H, K) and value (B, T, HV, V) of one "
        f"dtype, HV a multiple of H, got {what}",
    )
