"""Mamba-2's chunked SSD scan (DESIGN 2c): `fearless.ops.mamba2_chunk_forward` and
`fearless.ops.mamba2_chunk_backward`, on the kernels of ops/kernels_mamba2.py.

The layouts and meanings are TileGym's (`tilegym/ops/cutile/mamba2.py`'s
`mamba2_chunk_forward` / `mamba2_chunk_backward` and the torch references of
`tests/ops/test_mamba2.py`): x (B, T, H, P), b and c (B, T, G, N) with H a multiple of G (head h
reads group h // (H // G)), all three of one dtype (f32, f16 or bf16); a and d (H,), dt
(B, T, H), any float dtype (dt is the step after softplus, a the negative decay rate); the
state (B, H, P, N). Per batch and head, step after step:
    S = exp(a dt_t) S + dt_t x_t b_t^T;   y_t = S c_t + d x_t
from init_state (any float dtype; None for zeros). The forward returns (y (B, T, H, P) in x's
dtype, the final state in init_state's dtype, f32 when None). The backward takes dout (like
y) and dfinal_state (like the state; None for zeros) and returns TileGym's seven gradients
(dx, da, db, dc, dd, ddt, dinit_state): dx in x's dtype, da and dd (H,) f32, db and dc
(B, T, G, N) in b's dtype (summed over each group's heads), ddt in dt's dtype, dinit_state in
dfinal_state's dtype (f32 when None). Both work a chunk of chunk_size steps at a time (a power
of two, 16 to 128); unlike TileGym, T need not be a multiple of it (the last chunk may be
partial), and the chunk states are kept in f32 (TileGym rounds them to c's dtype). With torch
tensors that require grad, the forward records the backward (ops/torch_ops_tilegym.py).
"""

from __future__ import annotations

from typing import Any

from .. import dtypes
from ..autotune_ahead import compile_ahead_once
from ..errors import KernelTypeError
from ..runtime.location import argument_error
from ..runtime.tensor import Tensor
from ._arguments import is_one_of
from ._io import FLOATS, Operand, empty_beside, float_operands, operand, output, result, view
from ._replay import replayable
from ._route import torch_ops
from .kernels_mamba2 import chunk_grads_launch, chunk_out_launch, chunk_states_launch
from .kernels_rows import size_class

CHUNK_SIZES = (16, 32, 64, 128)


@replayable()
def mamba2_chunk_forward(
    x: Any, a: Any, b: Any, c: Any, d: Any, dt: Any, init_state: Any, chunk_size: int = 64
) -> tuple[Any, Any]:
    """TileGym's `mamba2_chunk_forward`: Mamba-2's SSD scan a chunk at a time (see the module
    docstring). Returns (y (B, T, H, P), the final state (B, H, P, N))."""
    op = "mamba2_chunk_forward"
    cs = _chunk_size(op, chunk_size)
    if (t := torch_ops(x, a, b, c, d, dt, init_state)) is not None:
        return tuple(t.mamba2_chunk_forward(x, a, b, c, d, dt, init_state, cs))
    ops, shape = _operands(op, x, a, b, c, d, dt)
    xa, aa, ba, ca, da, ta = ops
    bsz, t_, h, p, n, hpg = shape
    s0 = _state(op, "init_state", init_state, (bsz, h, p, n), xa.tensor.device)
    out, out_ret = output(xa, (bsz, t_, h, p))
    fdt = s0.dtype if s0 is not None else dtypes.f32
    final, final_ret = output(xa, (bsz, h, p, n), fdt)
    nc = -(-t_ // cs)
    states = empty_beside(xa.tensor, (bsz, nc, h, p, n), dtypes.f32)
    args = (xa.tensor, ba.tensor, aa.tensor, ta.tensor)

    def run() -> None:
        chunk_states_launch(states, view(final, (bsz, 1, h, p, n)), *args, _t(s0), hpg, cs, False)
        chunk_out_launch(out, xa.tensor, ba.tensor, ca.tensor, aa.tensor, da.tensor, ta.tensor,
                         states, hpg, cs)  # fmt: skip

    compile_ahead_once((op, _form(shape), *(o.dtype for o in ops), fdt, s0 is None, cs), run)
    run()
    return result(xa, out, out_ret), result(xa, final, final_ret)


@replayable()
def mamba2_chunk_backward(
    x: Any,
    a: Any,
    b: Any,
    c: Any,
    d: Any,
    dt: Any,
    init_state: Any,
    dout: Any,
    dfinal_state: Any,
    chunk_size: int = 64,
) -> tuple[Any, ...]:
    """TileGym's `mamba2_chunk_backward`: the gradients of `mamba2_chunk_forward`'s y and final
    state, given theirs (dout, dfinal_state). Returns (dx, da, db, dc, dd, ddt, dinit_state)."""
    op = "mamba2_chunk_backward"
    cs = _chunk_size(op, chunk_size)
    if (t := torch_ops(x, a, b, c, d, dt, init_state, dout, dfinal_state)) is not None:
        return tuple(t.mamba2_chunk_backward(x, a, b, c, d, dt, init_state, dout, dfinal_state, cs))
    ops, shape = _operands(op, x, a, b, c, d, dt)
    xa, aa, ba, ca, da, ta = ops
    bsz, t_, h, p, n, hpg = shape
    dev = xa.tensor.device
    s0 = _state(op, "init_state", init_state, (bsz, h, p, n), dev)
    dfin = _state(op, "dfinal_state", dfinal_state, (bsz, h, p, n), dev)
    dya = operand(dout, op, "dout", FLOATS, device=dev)
    if dya.shape != xa.shape or dya.dtype != xa.dtype:
        raise argument_error(
            f"`dout` of `fearless.ops.{op}` must be like x: {xa.dtype.name} {xa.shape}, got "
            f"{dya.dtype.name} {dya.shape}",
            help="pass the gradient of the forward's y (same shape and dtype)",
        )
    nc = -(-t_ // cs)
    like = xa.tensor
    states = empty_beside(like, (bsz, nc, h, p, n), dtypes.f32)
    dends = empty_beside(like, (bsz, nc, h, p, n), dtypes.f32)
    last = empty_beside(like, (bsz, 1, h, p, n), dtypes.f32)
    xt, bt, at, tt = xa.tensor, ba.tensor, aa.tensor, ta.tensor
    dinit, dinit_ret = output(xa, (bsz, h, p, n), dfin.dtype if dfin is not None else dtypes.f32)
    dx, dx_ret = output(xa, xa.shape)
    ddt, ddt_ret = output(xa, ta.shape, ta.dtype)
    db, db_ret = output(xa, ba.shape, ba.dtype)
    dc, dc_ret = output(xa, ba.shape, ba.dtype)
    dA, dA_ret = output(xa, (h,), dtypes.f32)
    dD, dD_ret = output(xa, (h,), dtypes.f32)
    scratch = (
        empty_beside(like, (bsz, t_, h, n), dtypes.f32),
        empty_beside(like, (bsz, t_, h, n), dtypes.f32),
        empty_beside(like, (bsz, nc, h), dtypes.f32),
        empty_beside(like, (bsz, nc, h), dtypes.f32),
        # per step: chunk_dc's c . dc, chunk_db's ddt term and k_in (kernels_mamba2.py)
        *(empty_beside(like, (bsz, t_, h), dtypes.f32) for _ in range(3)),
    )

    def run() -> None:  # the two scans, then the gradients
        chunk_states_launch(states, last, xt, bt, at, tt, _t(s0), hpg, cs, False)
        chunk_states_launch(dends, view(dinit, (bsz, 1, h, p, n)), dya.tensor, ca.tensor, at, tt,
                            _t(dfin), hpg, cs, True)  # fmt: skip
        chunk_grads_launch((dx, ddt, db, dc, dA, dD), scratch, xt, dya.tensor, bt,
                           ca.tensor, at, da.tensor, tt, states, dends, hpg, cs)  # fmt: skip

    dtypes_in = tuple(o.dtype for o in ops)
    compile_ahead_once((op, _form(shape), *dtypes_in, s0 is None, dinit.dtype, cs), run)
    run()
    return (
        result(xa, dx, dx_ret),
        result(xa, dA, dA_ret),
        result(xa, db, db_ret),
        result(xa, dc, dc_ret),
        result(xa, dD, dD_ret),
        result(xa, ddt, ddt_ret),
        result(xa, dinit, dinit_ret),
    )


def _t(s: Operand | None) -> Tensor | None:
    return None if s is None else s.tensor


def _form(shape: tuple[int, ...]) -> tuple[int, ...]:
    """(B, T, H, P, N, heads per group) with B and T by size class: what makes a first call's
    compile-ahead pass (a new batch or length of the same class makes none)."""
    bsz, t, *rest = shape
    return size_class(bsz), size_class(t), *rest


def _chunk_size(op: str, chunk_size: Any) -> int:
    if isinstance(chunk_size, bool) or not is_one_of(chunk_size, CHUNK_SIZES):
        raise argument_error(
            f"`chunk_size` of `fearless.ops.{op}` must be one of "
            f"{', '.join(map(str, CHUNK_SIZES))} (a power of two: it is a tile's extent), got "
            f"{chunk_size!r}",
            help="pass chunk_size=64 (the default, TileGym's and Mamba-2's)",
        )
    return int(chunk_size)


def _operands(
    op: str, x: Any, a: Any, b: Any, c: Any, d: Any, dt: Any
) -> tuple[tuple[Operand, ...], tuple[int, ...]]:
    """The checked operands (x, a, b, c, d, dt) and (B, T, H, P, N, heads per group)."""
    xa, ba, ca, aa, da, ta = float_operands(op, x=x, b=b, c=c, a=a, d=d, dt=dt)
    if not xa.dtype == ba.dtype == ca.dtype:
        raise _mismatch(op, f"dtypes {xa.dtype.name}, {ba.dtype.name} and {ca.dtype.name}")
    if len(xa.shape) != 4 or len(ba.shape) != 4 or ca.shape != ba.shape:
        raise _mismatch(op, f"shapes {xa.shape}, {ba.shape} and {ca.shape}")
    (bsz, t, h, p), (bb, tb, g, n) = xa.shape, ba.shape
    if (bb, tb) != (bsz, t) or not g or h % g:
        raise _mismatch(op, f"shapes {xa.shape}, {ba.shape} and {ca.shape}")
    for v, name, want in ((aa, "a", (h,)), (da, "d", (h,)), (ta, "dt", (bsz, t, h))):
        if v.shape != want:
            raise argument_error(
                f"`{name}` of `fearless.ops.{op}` must have shape {want}"
                f"{' (B, T, H): one step per token and head' if name == 'dt' else ' (H,)'}, "
                f"got {v.shape}",
                help="Mamba-2 has one decay rate a, skip weight d and step dt per head",
            )
    if not (bsz and t and h and p and n):
        raise argument_error(
            f"`fearless.ops.{op}` needs at least one batch, step, head, head column and state "
            f"column, got x {xa.shape} and b {ba.shape}",
            help="an empty sequence has no output: the state stays the initial one",
        )
    return (xa, aa, ba, ca, da, ta), (bsz, t, h, p, n, h // g)


def _state(op: str, name: str, s: Any, shape: tuple[int, ...], dev: int) -> Operand | None:
    """A state operand (B, H, P, N) of any float dtype, or None (zeros)."""
    if s is None:
        return None
    sa = operand(s, op, name, FLOATS, device=dev)
    if sa.shape != shape:
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` must have shape (B, H, P, N) = {shape}, got "
            f"{sa.shape}",
            help="the state is (batch, heads, head_size, state_size), or None for zeros",
        )
    return sa


def _mismatch(op: str, what: str) -> KernelTypeError:
    return argument_error(
        f"`fearless.ops.{op}` needs x (B, T, H, P) and b, c (B, T, G, N) of one dtype, H a "
        f"multiple of G, got {what}",
    )
