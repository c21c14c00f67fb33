"""Text form of the IR, MLIR-like, used by `inspect(stage="ir")`, FEARLESS_DUMP and tests.

func @vecadd(%0: Slice[f32], %1: Slice[f32], %2: DisjointSlice[f32]) {
^bb0:
  %3 = thread.index_1d : ThreadIndex                      // vecadd.py:4:8
  %4 = len %2 : i64
  ...
  cond_br %6, ^bb1, ^bb2
"""

from __future__ import annotations

from ..core import Block, Function, Op, Value
from .ops import Br, CondBr, attr_text


def _v(v: Value) -> str:
    return f"%{v.id}"


def _args(vals: list[Value]) -> str:
    return "(" + ", ".join(_v(v) for v in vals) + ")" if vals else ""


def _target(b: Block, vals: list[Value]) -> str:
    return f"^bb{b.id}{_args(vals)}"


def print_op(op: Op, with_locs: bool = True) -> str:
    if isinstance(op, Br):
        text = f"br {_target(op.dest, op.operands)}"
    elif isinstance(op, CondBr):
        text = (
            f"cond_br {_v(op.cond)}, {_target(op.if_true, op.true_args)}, "
            f"{_target(op.if_false, op.false_args)}"
        )
    else:
        attrs = attr_text(op)
        attr_s = " {" + ", ".join(f"{k}={v!r}" for k, v in attrs.items()) + "}" if attrs else ""
        operands = " " + ", ".join(_v(v) for v in op.operands) if op.operands else ""
        text = f"{op.opname}{attr_s}{operands}"
        if op.results:
            types = ", ".join(str(r.type) for r in op.results)
            text = f"{', '.join(_v(r) for r in op.results)} = {text} : {types}"
    if with_locs:
        text = f"{text:<56} // {op.loc.line}:{op.loc.col + 1}"
    return text


def print_function(fn: Function, with_locs: bool = True) -> str:
    fn.number()
    params = ", ".join(f"%{p.id}: {p.type}" for p in fn.params)
    names = ", ".join(p.name for p in fn.params)
    lines = [f"func @{fn.name}({params}) {{   // params: {names}"]
    for b in fn.blocks:
        args = ", ".join(f"%{a.id}: {a.type}" for a in b.args) if b is not fn.entry else ""
        label = f"  // {b.label}" if b.label else ""
        lines.append(f"^bb{b.id}{'(' + args + ')' if args else ''}:{label}")
        for op in b.ops:
            lines.append("  " + print_op(op, with_locs))
    lines.append("}")
    return "\n".join(lines) + "\n"
