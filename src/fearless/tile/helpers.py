"""Plain Python functions called from a Tile kernel: inlined, as cuTile Python does.

`def norm(v, eps): return v * tile.rsqrt(tile.sum(v * v) + eps)` called in a kernel lowers its
body in place: its parameters bound to the call's lowered arguments (tiles, scalars, Parts,
Tensors, compile-time values alike), its names resolved in its own module, its errors pointing
at its own lines. The body may end with `return expr` and has no other `return`. Recursion is
refused. Library functions (NumPy's, fearless's own) are not inlined: the caller's message for
host functions applies to them, unless marked `@tile.function` (fearless.ops' helpers are).
"""

from __future__ import annotations

import ast
import types
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import CompileError, Location
from ..frontend.source import load_source
from ..frontend.values import PyObj
from .rules import Operand, TileRules

# Modules whose Python functions are host code, never kernel helpers.
_LIBRARIES = ("numpy", "fearless", "torch", "math", "builtins", "cupy")


F = TypeVar("F", bound=Callable[..., Any])


def function(func: F) -> F:
    """`@tile.function`: mark `func` as a tile function, inlined where a kernel calls it, as
    cuTile Python's `@ct.function`. A plain function of the user's own code needs no mark; a
    function of an installed package does (the compiler otherwise treats library code as host
    code), and fearless.ops' kernel helpers have it."""
    func.__fearless_tile_function__ = True  # type: ignore[attr-defined]
    return func


def is_helper(obj: object) -> bool:
    """Whether `obj` is a plain Python function a kernel may call (and so inline)."""
    if not isinstance(obj, types.FunctionType):
        return False
    if getattr(obj, "__fearless_tile_function__", False):
        return True
    module = (obj.__module__ or "").split(".")[0]
    return module not in _LIBRARIES and "site-packages" not in obj.__code__.co_filename


def inline_helper(
    lw: TileRules, fn: types.FunctionType, args: list[Any], kwargs: dict[str, Any], loc: Location
) -> Operand:
    """The value of `fn(*args, **kwargs)` with its body lowered here (see the module doc)."""
    stack: tuple[Any, ...] = getattr(lw, "inline_stack", ())
    if fn in stack:
        chain = " -> ".join(f.__name__ for f in (*stack, fn))
        raise CompileError(
            f"recursive call of `{fn.__name__}` ({chain})",
            loc,
            code="E0604",
            help="helper functions are inlined; rewrite the recursion as a loop",
        )
    src = load_source(fn)
    tree = src.tree
    params = tree.args
    if params.vararg or params.kwarg or params.kwonlyargs or params.posonlyargs:
        raise CompileError(
            f"`{fn.__name__}` must take plain parameters to be called from a kernel",
            src.loc(tree),
            code="E0061",
        )
    names = [a.arg for a in params.args]
    defaults = dict(zip(names[len(names) - len(params.defaults) :], params.defaults, strict=True))
    env: dict[str, Any] = {}
    for name, value in zip(names, args, strict=False):
        env[name] = value
    for name, value in kwargs.items():
        if name not in names or name in env:
            raise CompileError(
                f"`{fn.__name__}` got an unexpected argument `{name}`", loc, code="E0061"
            )
        env[name] = value
    body = list(tree.body)
    result_node: ast.expr | None = None
    if body and isinstance(body[-1], ast.Return):
        last = body.pop()
        assert isinstance(last, ast.Return)
        result_node = last.value
    child = type(lw)(src, lw.fn, env)  # type: ignore[call-arg]
    child.block = lw.block
    child.branch_depth = lw.branch_depth
    child.inline_stack = (*stack, fn)  # type: ignore[attr-defined]
    child.walks = lw.walks  # a helper's walks are the kernel's
    for name in names:
        if name not in env:
            if name not in defaults:
                raise CompileError(
                    f"`{fn.__name__}` takes {len(names)} argument(s) but {len(args) + len(kwargs)} "
                    "were given",
                    loc,
                    code="E0061",
                )
            env[name] = child.expr(defaults[name])
    if len(args) > len(names):
        raise CompileError(
            f"`{fn.__name__}` takes {len(names)} argument(s) but {len(args)} were given",
            loc,
            code="E0061",
        )
    early = _early_return(tree)
    if early is not None:
        raise CompileError(
            f"`{fn.__name__}` returns before its end; a helper called from a kernel has one "
            "`return`, its last statement",
            src.loc(early),
            help="compute the result in a variable and return it at the end",
        )
    child.lower_body(body)
    lw.block = child.block
    if result_node is None:
        return PyObj(None, "None")
    return child.expr(result_node)


_EARLY: dict[ast.FunctionDef, ast.Return | None] = {}  # by tree: load_source keeps each parse


def _early_return(tree: ast.FunctionDef) -> ast.Return | None:
    """The first `return` of `tree`'s body before its last statement, if any (walked once a
    helper, not at each of its inlinings)."""
    if tree not in _EARLY:
        body = tree.body[:-1] if tree.body and isinstance(tree.body[-1], ast.Return) else tree.body
        found = (sub for stmt in body for sub in ast.walk(stmt) if isinstance(sub, ast.Return))
        _EARLY[tree] = next(found, None)
    return _EARLY[tree]
