"""`with tile.unsafe():` regions of Tile kernels: element-wise writes into a Part.

Outside a region, `tile.scatter` and the atomics take only a `tile.Atomic[T]` parameter
(tile/indexed.py), because coordinates computed at run time may name any block's elements.
Inside one, they may also write a `tile.Part` at any coordinates: the ownership proof is off
for those writes, every access is still bounds-checked (elements outside the array are
dropped), and the kernel is reported unsafe (`kernel.inspect()` prints one line per region).
Plain tile stores (`part.store`, `t.store`, `c.store`) keep their ownership rules, and a
read-only `tile.Tensor` stays read-only.
"""

from __future__ import annotations

import ast
from typing import Any, NoReturn

from ..errors import CompileError, FearlessError, Location
from ..frontend.core import unsupported
from ..frontend.values import PyObj


def unsafe() -> NoReturn:
    """`with tile.unsafe():` inside a kernel: scatters and atomics into a Part at any
    coordinates (still bounds-checked); the kernel is reported unsafe."""
    raise RuntimeError("`with tile.unsafe():` can only be used inside a @tile.kernel")


def lower_with(lw: Any, node: ast.With) -> None:
    """`with tile.unsafe(): body`, the only `with` a Tile kernel has."""
    if len(node.items) != 1 or not _is_unsafe_call(lw, node.items[0].context_expr):
        raise unsupported(
            "the `With` statement",
            lw.loc(node),
            help="the only `with` in a Tile kernel is `with tile.unsafe():`",
        )
    item = node.items[0]
    call = item.context_expr
    assert isinstance(call, ast.Call)
    if call.args or call.keywords:
        raise _misuse("tile.unsafe() takes no arguments", lw.loc(call), "no arguments here")
    if item.optional_vars is not None:
        raise _misuse(
            "`with tile.unsafe()` binds no value",
            lw.loc(item.optional_vars),
            "nothing to bind",
            "write `with tile.unsafe():` without `as ...`",
        )
    lw.unsafe_regions.append(lw.loc(node))
    lw.unsafe_depth += 1
    try:
        lw.lower_body(node.body)
    finally:
        lw.unsafe_depth -= 1


def _is_unsafe_call(lw: Any, expr: ast.expr) -> bool:
    if not isinstance(expr, ast.Call):
        if _names_unsafe(lw, expr):
            raise _misuse(
                "`tile.unsafe` must be called: `with tile.unsafe():`", lw.loc(expr), "not called"
            )
        return False
    return _names_unsafe(lw, expr.func)


def _names_unsafe(lw: Any, expr: ast.expr) -> bool:
    if not isinstance(expr, ast.Attribute | ast.Name):
        return False
    try:
        target: Any = lw.expr(expr)
    except FearlessError:
        return False
    return isinstance(target, PyObj) and target.obj is unsafe


def _misuse(
    message: str, loc: Location, label: str, help: str = "write `with tile.unsafe():`"
) -> CompileError:
    """E0620: `tile.unsafe` written other than as `with tile.unsafe():`."""
    return CompileError(message, loc, code="E0620", label=label, help=help)
