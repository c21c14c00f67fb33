"""The `with <track>.unsafe():` statement both tracks share: its one accepted form, and E0620
for every other way of writing it. What a region allows is each track's (simt/regions.py,
tile/regions.py); this module only checks the statement and names the region's span."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from ..errors import CompileError, FearlessError, Location
from .core import unsupported
from .values import PyObj


def unsafe_region(lw: Any, node: ast.With, marker: Callable[..., Any], track: str) -> Location:
    """Check that `node` is `with <track>.unsafe():` (`marker` is that function) and return
    its span; anything else is E0620, or E0001 for another `with`."""
    form = f"with {track}.unsafe():"
    if len(node.items) != 1 or not _is_call_of(lw, node.items[0].context_expr, marker, track):
        raise unsupported(
            "the `With` statement",
            lw.loc(node),
            help=f"the only `with` in a {'Tile' if track == 'tile' else 'SIMT'} kernel is `{form}`",
        )
    item = node.items[0]
    call = item.context_expr
    assert isinstance(call, ast.Call)
    if call.args or call.keywords:
        raise _misuse(
            f"{track}.unsafe() takes no arguments", lw.loc(call), "no arguments here", form
        )
    if item.optional_vars is not None:
        raise _misuse(
            f"`with {track}.unsafe()` binds no value",
            lw.loc(item.optional_vars),
            "nothing to bind",
            form,
            f"write `{form}` without `as ...`",
        )
    return lw.loc(node)  # type: ignore[no-any-return]


def lower_unsafe(
    lw: Any, node: ast.With, marker: Callable[..., Any], track: str, state: Any
) -> None:
    """Lower `with <track>.unsafe(): body`: `state` (the track's lowering context) keeps the
    regions' spans (`unsafe_regions`) and how many enclose the statements lowered now
    (`unsafe_depth`), which the track's rules consult."""
    state.unsafe_regions.append(unsafe_region(lw, node, marker, track))
    state.unsafe_depth += 1
    try:
        lw.lower_body(node.body)
    finally:
        state.unsafe_depth -= 1


def _is_call_of(lw: Any, expr: ast.expr, marker: Callable[..., Any], track: str) -> bool:
    if not isinstance(expr, ast.Call):
        if _names(lw, expr, marker):
            raise _misuse(
                f"`{track}.unsafe` must be called: `with {track}.unsafe():`",
                lw.loc(expr),
                "not called",
                f"with {track}.unsafe():",
            )
        return False
    return _names(lw, expr.func, marker)


def _names(lw: Any, expr: ast.expr, marker: Callable[..., Any]) -> bool:
    """Whether `expr` (a name or attribute chain) is `marker`."""
    if not isinstance(expr, ast.Attribute | ast.Name):
        return False
    try:
        target: Any = lw.expr(expr)
    except FearlessError:
        return False
    return isinstance(target, PyObj) and target.obj is marker


def _misuse(
    message: str, loc: Location, label: str, form: str, help: str | None = None
) -> CompileError:
    """E0620: the unsafe marker written other than as `with <track>.unsafe():`."""
    return CompileError(message, loc, code="E0620", label=label, help=help or f"write `{form}`")
