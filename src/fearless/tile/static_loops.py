"""`for x in tile.static_iter(...):` (cuTile Python's `ct.static_iter`): a loop the compiler
unrolls, its body lowered once per item with the target bound to that item.

The iterable is `range(...)` of compile-time integers (literals, `tile.Const` values, tile
shapes) or a tuple the kernel holds (`for t in tile.static_iter((a, b, c)):`, the elements
tiles or numbers). Each item is a compile-time value in its copy of the body, so it may index
a tuple, shape a tile or pick a branch. `break`, `continue` and `return` are refused inside (as
cuTile refuses them): an unrolled body has no loop to leave. At most `MAX_ITEMS` items.
"""

from __future__ import annotations

import ast
from typing import Any

from ..errors import CompileError
from ..frontend.values import PyObj, Weak
from .api import static_iter

MAX_ITEMS = 1000  # as cuTile's limit


def is_static_iter(lw: Any, it: ast.expr) -> bool:
    """Whether the loop's iterable is a call of `tile.static_iter`."""
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute | ast.Name)):
        return False
    try:
        f = lw.expr(it.func)
    except CompileError:
        return False
    return isinstance(f, PyObj) and f.obj is static_iter


def lower_static_for(lw: Any, node: ast.For, target: str) -> None:
    it = node.iter
    assert isinstance(it, ast.Call)
    loc = lw.loc(it)
    if len(it.args) != 1 or it.keywords:
        raise CompileError(
            "`tile.static_iter` takes one iterable: `tile.static_iter(range(n))`",
            loc,
            code="E0061",
        )
    for inner in ast.walk(ast.Module(body=list(node.body), type_ignores=[])):
        if isinstance(inner, ast.Break | ast.Continue | ast.Return):
            raise CompileError(
                f"`{type(inner).__name__.lower()}` inside a `tile.static_iter` loop: the "
                "compiler unrolls it, so there is no loop to leave",
                lw.loc(inner),
                help="use `for ... in range(...)` for a loop that breaks, or an `if` inside",
            )
    items = _items(lw, it.args[0])
    if len(items) > MAX_ITEMS:
        raise CompileError(
            f"`tile.static_iter` unrolls at most {MAX_ITEMS} items, not {len(items)}", loc
        )
    for item in items:
        lw.env[target] = item
        lw.lower_body(node.body)


def _items(lw: Any, arg: ast.expr) -> list[Any]:
    loc = lw.loc(arg)
    if (
        isinstance(arg, ast.Call)
        and isinstance(arg.func, ast.Name)
        and arg.func.id == "range"
        and lw.env.get("range") is None
        and not arg.keywords
        and 1 <= len(arg.args) <= 3
    ):
        bounds = [lw.expr(a) for a in arg.args]
        if not all(isinstance(b, Weak) and type(b.value) is int for b in bounds):
            raise CompileError(
                "`tile.static_iter(range(...))` needs bounds known at compile time",
                loc,
                help="use literals, `tile.Const[int]` parameters or tile shapes, or loop with "
                "`for ... in range(...)` over run-time bounds",
            )
        return [Weak(i) for i in range(*(b.value for b in bounds))]
    value = lw.expr(arg)
    if isinstance(value, tuple):
        return list(value)
    raise CompileError(
        "`tile.static_iter` iterates over `range(...)` of compile-time integers or a tuple",
        loc,
        help="e.g. `for i in tile.static_iter(range(4)):` or `for t in tile.static_iter((a, b)):`",
    )
