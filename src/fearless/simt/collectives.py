"""Warp and block collectives: `simt.warp.*` and `simt.block.*` (numba's names where it has them).

    simt.warp.shfl(v, src)        lane `src & 31`'s v            (numba: shfl_sync)
    simt.warp.shfl_down(v, d)     lane `laneid + d`'s v          (shfl_down_sync)
    simt.warp.shfl_xor(v, m)      lane `laneid ^ m`'s v          (shfl_xor_sync)
    simt.warp.reduce(v, "sum")    the warp's sum / max / min, to every lane
    simt.warp.all(c) / any(c)     bools over the warp; ballot(c) a u32 of the lanes' bits
    simt.block.reduce(v, "sum")   the block's sum / max / min, to every thread
    simt.block.scan(v, "sum")     the inclusive prefix over the block's linear thread order

Values are i32, i64, u32, u64, f32 or f64 (weak literals adopt i64 or f64); the operation is a
string literal. Warps are runs of 32 threads in the block's linear order (x fastest); a last,
partial warp behaves as a warp of only its threads (a source lane past it gives the thread its
own value; reductions and votes cover only its threads). Every thread of a block must run each
collective: `sync_check.py` refuses them under thread-dependent control flow (E0633).
"""

from __future__ import annotations

from typing import Any, NoReturn

from .. import dtypes
from ..errors import CompileError, KernelTypeError
from ..frontend.intrinsics import Call
from ..frontend.values import Operand, PyObj, Weak
from ..ir.core import ScalarType, Value
from ..ir.simt import ops
from .ssa import SsaLowerer
from .types import host_call


def _only_in_kernels(name: str) -> NoReturn:
    host_call(f"simt.{name}()")


class _Warp:
    """`simt.warp`: shuffles, votes and reductions over the 32 threads of a warp."""

    def shfl(self, value: Any, src_lane: Any) -> Any:
        _only_in_kernels("warp.shfl")

    def shfl_down(self, value: Any, delta: Any) -> Any:
        _only_in_kernels("warp.shfl_down")

    def shfl_xor(self, value: Any, lane_mask: Any) -> Any:
        _only_in_kernels("warp.shfl_xor")

    def reduce(self, value: Any, op: str) -> Any:
        _only_in_kernels("warp.reduce")

    def all(self, cond: Any) -> Any:
        _only_in_kernels("warp.all")

    def any(self, cond: Any) -> Any:
        _only_in_kernels("warp.any")

    def ballot(self, cond: Any) -> Any:
        _only_in_kernels("warp.ballot")

    def __repr__(self) -> str:
        return "simt.warp"


class _Block:
    """`simt.block`: reductions and scans over the threads of a block."""

    def reduce(self, value: Any, op: str) -> Any:
        _only_in_kernels("block.reduce")

    def scan(self, value: Any, op: str) -> Any:
        _only_in_kernels("block.scan")

    def __repr__(self) -> str:
        return "simt.block"


warp = _Warp()
block = _Block()

_SHUFFLES = {"shfl": "idx", "shfl_down": "down", "shfl_xor": "xor"}
_REDUCERS: dict[str, type[ops.WarpReduce | ops.BlockReduce | ops.BlockScan]] = {
    "warp.reduce": ops.WarpReduce,
    "block.reduce": ops.BlockReduce,
    "block.scan": ops.BlockScan,
}


def _value(lw: SsaLowerer, call: Call, what: str) -> Value:
    x = call.args[0]
    loc = call.arg_loc(0)
    v = lw.em.scalar(x, loc, "value")
    if isinstance(v, Weak):
        v = lw.em.as_value(v, loc, dtypes.f64 if isinstance(v.value, float) else dtypes.i64)
    assert isinstance(v, Value)
    if v.dtype.name not in ops.COLLECTIVE_DTYPES:
        raise KernelTypeError(
            f"`{what}` takes a 32- or 64-bit number, not {v.dtype.name}",
            loc,
            help="convert it, e.g. `fl.f32(x)` or `fl.i32(x)`",
        )
    return v


def shuffle_rule(lw: SsaLowerer, call: Call) -> Value:
    """`simt.warp.shfl/shfl_down/shfl_xor(value, lane)`."""
    name = call.callee.__name__
    v = _value(lw, call, f"simt.warp.{name}")
    lane = lw.em.scalar(call.args[1], call.arg_loc(1), "lane")
    if isinstance(lane, Weak) and (type(lane.value) is not int or lane.value < 0):
        raise KernelTypeError("a lane is a non-negative integer", call.arg_loc(1))
    if isinstance(lane, Value) and not lane.dtype.is_int:
        raise KernelTypeError(
            f"a lane is an integer, not {lane.dtype.name}", call.arg_loc(1), help="`int(x)`"
        )
    if isinstance(lane, Weak):
        lane = lw.em.const(int(lane.value) & 0xFFFFFFFF, dtypes.u32, call.arg_loc(1))
    b = lw.em.cast(lw.em.cast(lane, dtypes.u32, call.loc), dtypes.i32, call.loc)
    return lw.em.emit(ops.WarpShuffle(_SHUFFLES[name], v, b, call.loc)).result


def vote_rule(lw: SsaLowerer, call: Call) -> Value:
    """`simt.warp.all/any/ballot(cond)`."""
    name = call.callee.__name__
    c = lw.em.scalar(call.args[0], call.arg_loc(0), "condition")
    if isinstance(c, Weak) and isinstance(c.value, bool):
        c = lw.em.as_value(c, call.arg_loc(0), dtypes.bool_)
    if not (isinstance(c, Value) and c.type == ScalarType(dtypes.bool_)):
        raise KernelTypeError(
            f"`simt.warp.{name}` takes a bool",
            call.arg_loc(0),
            help="compare first, e.g. `simt.warp.any(x > 0)`",
        )
    return lw.em.emit(ops.WarpVote(name, c, call.loc)).result


def reduce_rule(lw: SsaLowerer, call: Call) -> Value:
    """`simt.warp.reduce`, `simt.block.reduce`, `simt.block.scan` (value, "sum"|"max"|"min")."""
    scope = "warp" if call.callee.__self__ is warp else "block"
    what = f"{scope}.{call.callee.__name__}"
    v = _value(lw, call, f"simt.{what}")
    op = call.args[1]
    name = op.obj if isinstance(op, PyObj) else None
    if not isinstance(name, str) or name not in ops.COLLECTIVE_OPS:
        shown = f'"{name}"' if isinstance(name, str) else "this"
        raise CompileError(
            f'`simt.{what}` has no operation {shown}: it takes "sum", "max" or "min"',
            call.arg_loc(1),
            code="E0635",
            label="unknown operation",
            help=f'write `simt.{what}(v, "sum")` (or "max", "min")',
        )
    return lw.em.emit(_REDUCERS[what](name, v, call.loc)).result


def string_literal(value: str) -> Operand:
    """A string literal argument (a collective's operation) as the rules see it."""
    return PyObj(value, repr(value))
