"""`with simt.unsafe():` regions: writes to outputs at any index, still bounds-checked.

Inside the region the witness rule of simt/access.py is off: a `DisjointSlice` may be read and
written at any integer index (`out[simt.grid(1)] = v`, `out[i + 1] = v`). Every access keeps
its device bounds check, and the check's site says it stands in the region, so a
KernelIndexError names it. The kernel is reported unsafe: `kernel.inspect()` (and
`fearless inspect`) print one line per region. This is the region form of the kernel-level
`unsafe=True`, which also drops the device checks (docs/design.md §1.2). A ThreadIndex still
cannot be stored (E0602); AtomicSlices are still only touched through `simt.atomic`.
"""

from __future__ import annotations

import ast
from typing import Any, NoReturn

from ..errors import CompileError, FearlessError, Location
from ..frontend.core import unsupported
from ..frontend.values import PyObj
from .ssa import SsaLowerer


def unsafe() -> NoReturn:
    """`with simt.unsafe():` inside a kernel: writes at any index (still bounds-checked)."""
    raise RuntimeError("`with simt.unsafe():` can only be used inside a @simt.kernel")


def lower_with(lw: SsaLowerer, node: ast.With) -> None:
    """`with simt.unsafe(): body`, the only `with` a SIMT kernel has."""
    if len(node.items) != 1 or not _is_unsafe_call(lw, node.items[0].context_expr):
        raise unsupported(
            "the `With` statement",
            lw.loc(node),
            help="the only `with` in a kernel is `with simt.unsafe():`",
        )
    item = node.items[0]
    call = item.context_expr
    assert isinstance(call, ast.Call)
    if call.args or call.keywords:
        raise _misuse("simt.unsafe() takes no arguments", lw.loc(call), "no arguments here")
    if item.optional_vars is not None:
        raise _misuse(
            "`with simt.unsafe()` binds no value",
            lw.loc(item.optional_vars),
            "nothing to bind",
            "write `with simt.unsafe():` without `as ...`",
        )
    ctx = lw.ctx
    ctx.unsafe_regions.append(lw.loc(node))
    ctx.unsafe_depth += 1
    try:
        lw.lower_body(node.body)
    finally:
        ctx.unsafe_depth -= 1


def _names_unsafe(lw: SsaLowerer, expr: ast.expr) -> bool:
    """Whether `expr` (a name or attribute chain) is `simt.unsafe`."""
    if not isinstance(expr, ast.Attribute | ast.Name):
        return False
    try:
        target: Any = lw.expr(expr)
    except FearlessError:
        return False
    return isinstance(target, PyObj) and target.obj is unsafe


def _is_unsafe_call(lw: SsaLowerer, expr: ast.expr) -> bool:
    if not isinstance(expr, ast.Call):
        if _names_unsafe(lw, expr):
            raise _misuse(
                "`simt.unsafe` must be called: `with simt.unsafe():`", lw.loc(expr), "not called"
            )
        return False
    return _names_unsafe(lw, expr.func)


def _misuse(
    message: str, loc: Location, label: str, help: str = "write `with simt.unsafe():`"
) -> CompileError:
    """E0620: `simt.unsafe` written other than as `with simt.unsafe():`."""
    return CompileError(message, loc, code="E0620", label=label, help=help)
