"""Tile IR as text (`kernel.inspect(stage="ir")`, FEARLESS_DUMP=ir, FileCheck-style tests).

tile.kernel @add(%z: Part[f32, tile=(128,)], %x: Tensor[f32, 1d]) {
  %0 = tile.block_id {axis=0} : tile<i32>
  %1 = tile.load %x, %0 {shape=(128,), padding=0.0} : tile<128xf32>
  ...
  %7 = tile.if %6 : tile<128xf32> {     <- then-block, `} else {`, else-block, `}`
    ...
    tile.yield %8
  } else {
    tile.yield %1
  }
"""

from __future__ import annotations

from ..core import Block, Function, Op, Value
from . import ops


class _Names:
    def __init__(self) -> None:
        self.names: dict[Value, str] = {}
        self.count = 0

    def __call__(self, v: Value) -> str:
        name = self.names.get(v)
        if name is None:
            name = f"%{self.count}"
            self.count += 1
            self.names[v] = name
        return name


def print_function(fn: Function) -> str:
    names = _Names()
    for p in fn.params:
        names.names[p] = f"%{p.name}"
    params = ", ".join(f"%{p.name}: {p.type}" for p in fn.params)
    lines = [f"tile.kernel @{fn.name}({params}) {{"]
    _block(fn.entry, names, lines, "  ")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _block(block: Block, names: _Names, lines: list[str], indent: str) -> None:
    for op in block.ops:
        lines.append(indent + _op(op, names))
        if isinstance(op, ops.For):
            body = op.body
            args = ", ".join(f"{names(a)}: {a.type}" for a in body.args)
            lines[-1] += f" ({args}) {{"
            _block(body, names, lines, indent + "  ")
            lines.append(indent + "}")
        elif isinstance(op, ops.While):
            args = ", ".join(f"{names(a)}: {a.type}" for a in op.cond.args)
            lines[-1] += f" cond ({args}) {{"
            _block(op.cond, names, lines, indent + "  ")
            args = ", ".join(f"{names(a)}: {a.type}" for a in op.body.args)
            lines.append(indent + f"}} do ({args}) {{")
            _block(op.body, names, lines, indent + "  ")
            lines.append(indent + "}")
        elif isinstance(op, ops.If):
            lines[-1] += " {"
            _block(op.then_block, names, lines, indent + "  ")
            lines.append(indent + "} else {")
            _block(op.else_block, names, lines, indent + "  ")
            lines.append(indent + "}")


def _op(op: Op, names: _Names) -> str:
    results = ", ".join(names(r) for r in op.results)
    operands = ", ".join(names(v) for v in op.operands)
    attrs = {k: v for k, v in op.attrs.items() if k not in ops.REGION_ATTRS}
    attr_text = (
        " {"
        + ", ".join(f"{k}={v.name if hasattr(v, 'kind') else v!r}" for k, v in attrs.items())
        + "}"
        if attrs
        else ""
    )
    types = ", ".join(str(r.type) for r in op.results)
    head = f"{results} = " if results else ""
    tail = f" : {types}" if types else ""
    return f"{head}{op.opname} {operands}{attr_text}{tail}".replace("  ", " ").rstrip()
