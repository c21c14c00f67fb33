"""Python AST -> tile IR for one specialisation of a `@tile.kernel`: statements and expressions.

The lowerer walks the function body once per specialisation (dtypes, Part tile shapes and Const
values are known), so shapes are plain Python tuples here and every tile type is static.
Operands while lowering are IR `Value`s (tiles and array parameters), `Weak` literals that
adopt the other operand's dtype, `PyObj`s (modules, dtypes, tile functions) and Python tuples
of operands (`part.shape`, `part.index`).

`TileLowerer` is the frontend core's `Lowerer` (frontend/core.py: dispatch, names, literals,
assignment and unpacking) with the Tile track's typing rules (rules.py). What is here: the
attributes of arrays and tiles, tuple indexing, `and`/`or` of bool tiles, and calls: of the
`tile.*` functions (lower_api.py), methods (`part.store`, `x.astype`), dtypes and builtins.
Control flow is structured (control.py): `for i in range(...)` becomes `tile.for` and an `if`
on a run-time scalar `tile.if`; an `if` on a compile-time value picks its branch here.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import CompileError, KernelTypeError, SafetyError
from ..frontend.core import unsupported
from ..frontend.intrinsics import Call, host_function_error, kernel_launch_error
from ..frontend.printing import print_call
from ..frontend.values import PyObj, Weak
from ..ir.core import Value
from ..ir.tile import ops
from ..ir.tile.types import ArrayParamType, TileType, tile_type
from .api import KERNEL_FUNCTIONS
from .control import lower_for, lower_if, lower_ifexp, lower_while
from .helpers import inline_helper, is_helper
from .intrinsics import HOST_HELP, INTRINSICS, tile_form
from .jumps import lower_jumping_body
from .lower_api import memory_hints
from .names import STORE_FORMS, unknown_tile_name
from .order import own_index
from .persistent import TileCursor, lower_chunks, lower_tiles
from .regions import lower_with
from .rules import Operand, TileRules
from .shaping import slice_tile
from .static_loops import is_static_iter, lower_static_for
from .structs import StructValue

# Tile methods that are `tile.<name>(x, ...)` with the tile first, as in cuTile Python.
TILE_METHODS = ("astype", "reshape", "transpose", "permute", "item", "extract")


class Bound:
    """A method looked up on a value: `part.store`, `x.astype`."""

    def __init__(self, name: str, obj: Value | TileCursor) -> None:
        self.name, self.obj = name, obj


class TileLowerer(TileRules):
    """Lowers one kernel body into `fn` (whose entry block already has the parameters)."""

    # ------------------------------------------------------------------------ statements

    def stmt_With(self, node: ast.With) -> None:
        lower_with(self, node)

    def lower_body(self, stmts: Sequence[ast.stmt]) -> None:
        if self.jumps:  # a block of a loop body with `break` or `continue` (jumps.py)
            lower_jumping_body(self, stmts, self.lower_stmt, self.lower_if)
        else:
            super().lower_body(stmts)

    def lower_return(self, node: ast.Return) -> None:
        if self.branch_depth:
            raise unsupported(
                "`return` inside an `if` on a runtime value",
                self.loc(node),
                help="put the rest of the kernel in the `else:` branch instead",
            )
        raise unsupported("`return`", self.loc(node), help="let the kernel end instead")

    def condition(self, node: ast.expr) -> Operand:
        cond = self.expr(node)
        if isinstance(cond, PyObj):  # known at compile time, as literals are
            return Weak(bool(cond.obj))
        if isinstance(cond, tuple):
            return Weak(bool(cond))
        return cond

    def lower_if(self, node: ast.If, cond: Operand) -> None:
        lower_if(self, node, cond)

    def lower_ifexp(self, node: ast.IfExp, cond: Operand) -> Operand:
        return lower_ifexp(self, node, cond)

    def lower_for(self, node: ast.For, target: str, bounds: list[ast.expr]) -> None:
        lower_for(self, node, target, bounds)

    def stmt_While(self, node: ast.While) -> None:
        lower_while(self, node)

    def lower_for_iter(self, node: ast.For, target: str) -> bool:
        """`for t in part.tiles():` (persistent.py) and `for x in tile.static_iter(...):`
        (static_loops.py); any other iterable is not supported."""
        it = node.iter
        if is_static_iter(self, it):
            lower_static_for(self, node, target)
            return True
        if (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Attribute)
            and it.func.attr in ("tiles", "chunks")
        ):
            lower = lower_tiles if it.func.attr == "tiles" else lower_chunks
            lower(self, node, target, it, self.expr(it.func.value))
            return True
        return False

    # ----------------------------------------------------------------------- expressions

    def expr_Tuple(self, node: ast.Tuple) -> Operand:
        return tuple(self.expr(e) for e in node.elts)

    def missing_attribute(self, base: PyObj, node: ast.Attribute) -> CompileError:
        if base.obj is sys.modules[__package__]:  # `tile.<name>`: the tile functions' names
            return unknown_tile_name(node.attr, self.loc(node))
        return super().missing_attribute(base, node)

    def value_attribute(self, base: Operand, node: ast.Attribute) -> Operand:
        loc = self.loc(node)
        attr = node.attr
        if isinstance(base, StructValue):
            return base.field(attr, loc)
        if isinstance(base, TileCursor):
            if attr == "index":
                return base.index
            if attr == "shape":
                return tuple(Weak(d) for d in base.tile)
            if attr == "store":
                return Bound("store", base)
            raise CompileError(
                f"`{ast.unparse(node)}` is not available: a tile of `part.tiles()` or "
                "`part.chunks(shape)` has `.index`, `.shape`, `.store(x)` and `.chunks(shape)`",
                loc,
                code="E0433",
            )
        if isinstance(base, Value) and isinstance(base.type, ArrayParamType):
            t = base.type
            if attr == "shape":
                if t.tile is not None:
                    return tuple(Weak(d) for d in t.tile)
                return tuple(self.emit(ops.ArrayDim(base, a, loc)) for a in range(t.ndim))
            if attr == "index" and t.tile is not None:
                return own_index(self, base, loc)
            if attr == "store" and t.tile is not None:
                return Bound("store", base)
            if attr == "store":
                raise SafetyError(
                    f"cannot store to `{ast.unparse(node.value)}`, a read-only `tile.Tensor`",
                    loc,
                    code="E0594",
                    help="declare the output `tile.Part[...]` and pass `t.partition(shape)`",
                )
            if attr == "dtype":
                return PyObj(t.dtype, "dtype")
        if isinstance(base, Value) and isinstance(base.type, TileType):
            if attr == "shape":
                return tuple(Weak(d) for d in base.type.shape)
            if attr == "dtype":
                return PyObj(base.type.dtype, "dtype")
            if attr in TILE_METHODS:  # `x.astype(dt)`, `x.reshape(shape)`: `tile.<name>(x, ...)`
                return Bound(attr, base)
            if attr == "T":
                return self.permute(base, None, loc)
        raise CompileError(
            f"`{ast.unparse(node)}` is not available in tile kernels", loc, code="E0433"
        )

    def expr_Subscript(self, node: ast.Subscript) -> Operand:
        base = self.expr(node.value)
        if isinstance(base, Value) and isinstance(base.type, TileType):
            new_axes = _new_axes(node.slice, len(base.type.shape))
            if new_axes is not None:  # `x[:, None]`: NumPy's new axes, a reshape
                shape = list(base.type.shape)
                for a in new_axes:
                    shape.insert(a, 1)
                return self.emit(ops.Reshape(base, tuple(shape), self.loc(node)))
        if isinstance(base, Value) and isinstance(base.type, TileType):
            return slice_tile(self, base, self._static_index(node.slice), self.loc(node))
        idx = self.expr(node.slice)
        if isinstance(base, tuple) and isinstance(idx, Weak) and isinstance(idx.value, int):
            try:
                return base[idx.value]
            except IndexError:
                raise CompileError(
                    f"index {idx.value} is out of range for a tuple of {len(base)}",
                    self.loc(node.slice),
                ) from None
        raise unsupported(
            "indexing tiles", self.loc(node), help="load tiles with `tile.load(t, index, shape)`"
        )

    def _static_index(self, node: ast.expr) -> Any:
        """A tile subscript as Python values: slices and ints, compile-time (tile/shaping.py)."""
        if isinstance(node, ast.Tuple):
            return tuple(self._static_index(e) for e in node.elts)
        if isinstance(node, ast.Constant) and node.value is Ellipsis:
            return Ellipsis  # the axes not written (shaping.slice_tile)
        if isinstance(node, ast.Slice):
            lo, hi, step = (
                None if p is None else self.static_int(self.expr(p), self.loc(p), "a tile slice")
                for p in (node.lower, node.upper, node.step)
            )
            return slice(lo, hi, step)
        return self.static_int(self.expr(node), self.loc(node), "a tile index")

    def lower_unary(self, kind: str, x: Operand, node: ast.UnaryOp) -> Operand:
        if kind == "pos":
            return x
        loc = self.loc(node)
        v = self.tile_value(x, loc)
        if kind == "neg":
            neg = self.emit(ops.Unary("neg", v, loc))
            if self.is_weak(v):
                self.weak.add(neg)
            return neg
        dt = tile_type(v).dtype
        if kind in ("not", "invert") and dt.is_bool:
            return self.emit(ops.Unary("not", v, loc))
        if kind == "invert" and dt.is_int:  # every bit flipped: x ^ (all ones)
            ones = Weak(-1 if dt.is_signed else (1 << dt.bits) - 1)
            return self.emit(
                ops.Binary(
                    "xor",
                    v,
                    self.broadcast_to(self.tile_value(ones, loc, dt), tile_type(v).shape, loc),
                    loc,
                )
            )
        raise unsupported(f"the operator in `{ast.unparse(node)}`", loc)

    def expr_Compare(self, node: ast.Compare) -> Operand:
        if len(node.ops) != 1:  # on tiles, `a < b < c` is not one bool (NumPy refuses it)
            raise unsupported(
                "a chained comparison", self.loc(node), help="use `&` of two comparisons"
            )
        return super().expr_Compare(node)

    def expr_BoolOp(self, node: ast.BoolOp) -> Operand:
        """`a and b`, `a or b`: Python's on literals, else `&` / `|` of bool tiles.

        Both sides are evaluated: kernel expressions have no effects, so only the time differs.
        """
        values = [self.expr(v) for v in node.values]
        is_and = isinstance(node.op, ast.And)
        if all(isinstance(v, Weak) for v in values):
            out = values[0].value
            for v in values[1:]:
                out = (out and v.value) if is_and else (out or v.value)
            return Weak(out)
        for v, n in zip(values, node.values, strict=True):
            ok = (
                isinstance(v.value, bool)
                if isinstance(v, Weak)
                else isinstance(v, Value) and isinstance(v.type, TileType) and v.type.dtype.is_bool
            )
            if not ok:
                raise KernelTypeError(
                    f"`{'and' if is_and else 'or'}` needs bool operands in a tile kernel, "
                    f"but `{ast.unparse(n)}` is not one",
                    self.loc(n),
                    help=f"compare it, e.g. `{ast.unparse(n)} != 0`",
                )
        result = values[0]
        for v in values[1:]:
            result = self.binary("and" if is_and else "or", result, v, self.loc(node))
        return result

    # ---------------------------------------------------------------------------- calls

    def _argument(self, func: Operand, node: ast.expr) -> Operand:
        """A call's argument; a string only as `tile.static_assert`'s message."""
        if (
            _is_text(node)
            and isinstance(func, PyObj)
            and func.obj is KERNEL_FUNCTIONS.get("static_assert")
        ):
            return PyObj(node.value, "str")  # type: ignore[attr-defined]
        return self.expr(node)

    def expr_Call(self, node: ast.Call) -> Operand:
        loc = self.loc(node)
        func = self.expr(node.func)
        if isinstance(func, PyObj) and func.obj is print:  # the arguments are printed pieces
            return INTRINSICS.call(self, INTRINSICS["print"], print_call(node, self.expr, self.loc))  # type: ignore[no-any-return]
        args = [self._argument(func, a) for a in node.args]
        kwargs = {k.arg: self._argument(func, k.value) for k in node.keywords if k.arg is not None}
        arg_locs = [self.loc(a) for a in node.args]
        kwarg_locs = {k.arg: self.loc(k.value) for k in node.keywords if k.arg is not None}
        if isinstance(func, Bound):
            if func.name == "store":
                if "index" in kwargs or len(args) > 1:  # cuTile's `ct.store(x, index=...)`
                    raise CompileError(
                        "`store` takes no index: it writes the tile this block owns",
                        loc,
                        code="E0061",
                        help=STORE_FORMS,
                    )
                if len(args) != 1 or not set(kwargs) <= {"latency", "allow_tma"}:
                    raise CompileError(
                        "`store` takes one tile (and the hints `latency=`, `allow_tma=`)",
                        loc,
                        code="E0061",
                    )
                hints = memory_hints(
                    self,
                    lambda name: kwarg_locs.get(name, loc),
                    kwargs.get("latency", PyObj(None, "None")),
                    kwargs.get("allow_tma", Weak(True)),
                )
                if isinstance(func.obj, TileCursor):
                    obj = func.obj
                    self.store(obj.part, args[0], arg_locs[0], obj.index, obj.shape, obj.own, hints)
                else:
                    self.store(func.obj, args[0], arg_locs[0], hints=hints)
                return PyObj(None, "None")
            stub = KERNEL_FUNCTIONS[func.name]  # `x.<name>(...)`: the receiver has no node
            call = Call(func.name, stub, [func.obj, *args], kwargs, loc, [loc, *arg_locs])
            call.kwarg_locs = kwarg_locs
            return INTRINSICS.call(self, INTRINSICS[f"tile.{func.name}"], call)  # type: ignore[no-any-return]
        if not isinstance(func, PyObj):
            raise CompileError(f"`{ast.unparse(node.func)}` is not callable", loc, code="E0605")
        intrinsic = INTRINSICS.lookup(func.obj)
        if intrinsic is None and is_helper(func.obj):
            return inline_helper(self, func.obj, args, kwargs, loc)
        if intrinsic is None:
            name = ast.unparse(node.func)
            help = "put the shared code in a plain function and call it from both kernels"
            raise kernel_launch_error(func.obj, name, loc, help) or host_function_error(
                name, loc, HOST_HELP, tile_form
            )
        name = getattr(func.obj, "__fearless_tile__", None) or ast.unparse(node.func)
        call = Call(name, func.obj, args, kwargs, loc, arg_locs, kwarg_locs)
        return INTRINSICS.call(self, intrinsic, call)  # type: ignore[no-any-return]


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _new_axes(index: ast.expr, ndim: int) -> list[int] | None:
    """Where `x[index]` inserts axes, when `index` is only full slices `:` and `None`s, with
    one `:` per axis of `x` (`x[:, None]`, `x[None, :]`, `x[None]`), or one `...` standing for
    the axes not written (`x[..., None]`); None for any other index."""
    items = list(index.elts) if isinstance(index, ast.Tuple) else [index]
    dots = [i for i, e in enumerate(items) if isinstance(e, ast.Constant) and e.value is ...]
    if len(dots) > 1:
        return None
    if dots:
        written = sum(not (isinstance(e, ast.Constant) and e.value is None) for e in items) - 1
        items[dots[0] : dots[0] + 1] = [ast.Slice()] * max(0, ndim - written)
    full = [
        isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None
        for e in items
    ]
    new = [isinstance(e, ast.Constant) and e.value is None for e in items]
    if not any(new) or not all(f or n for f, n in zip(full, new, strict=True)):
        return None
    if sum(full) not in (0, ndim):
        return None
    return [i for i, n in enumerate(new) if n]
