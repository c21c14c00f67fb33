"""Python AST -> tile IR for one specialisation of a `@tile.kernel`.

The lowerer walks the function body once per specialisation (dtypes, Part tile shapes and Const
values are known), so shapes are plain Python tuples here and every tile type is static.
Operands while lowering are IR `Value`s (tiles and array parameters), `Weak` literals that
adopt the other operand's dtype (the SIMT track's rule, frontend/values.py), `PyObj`s
(modules, dtypes, tile functions) and Python tuples of operands (`part.shape`, `part.index`).

Structured control flow only (control.py): `for i in range(...)` becomes `tile.for` and an
`if` on a run-time scalar `tile.if`, each carrying the variables it assigns; an `if` on a
compile-time value picks its branch here. Broadcasting is made explicit here (`tile.reshape` +
`tile.broadcast`).
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..errors import CompileError, KernelTypeError, Location, SafetyError
from ..frontend.source import FunctionSource
from ..frontend.values import PY_BINOPS, PY_CMPS, SYMBOL, PyObj, Undefined, Weak
from ..ir import tile_ops as ops
from ..ir.core import Block, Function, Op, Value
from ..ir.tile_types import ArrayParamType, TileType, is_pow2, tile_type
from . import control
from .api import KERNEL_FUNCTIONS
from .control import unsupported

Operand = Any  # Value | Weak | PyObj | Undefined (after an `if`) | tuple[Operand, ...]

BINOPS: dict[type[ast.operator], str] = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor",
}  # fmt: skip
CMPOPS: dict[type[ast.cmpop], str] = {
    ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne",
}  # fmt: skip
PADDINGS = (0.0, float("inf"), float("-inf"))  # and -0.0 and nan, checked by value


class Bound:
    """A method looked up on a value: `part.store`, `x.astype`."""

    def __init__(self, name: str, obj: Value) -> None:
        self.name, self.obj = name, obj


class TileLowerer:
    """Lowers one kernel body into `fn` (whose entry block already has the parameters)."""

    def __init__(self, src: FunctionSource, fn: Function, env: dict[str, Operand]) -> None:
        self.src = src
        self.fn = fn
        self.env = env
        self.block: Block = fn.entry
        # Types of loop variables that start as literals (control.Retry), by (loop, name).
        self.hints: dict[tuple[int, str], TileType] = {}
        # Loop-body arguments whose initial value was a literal, with their loop and name.
        self.weak_args: dict[Value, tuple[ast.For, str]] = {}
        self.branch_depth = 0  # how many `if`s on run-time values enclose this statement

    def loc(self, node: ast.AST) -> Location:
        return self.src.loc(node)

    def defined(self, name: str) -> bool:
        """Whether `name` has a value here (not unassigned on some path)."""
        return name in self.env and not isinstance(self.env[name], Undefined)

    def emit(self, op: Op) -> Value:
        self.block.append(op)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    # ------------------------------------------------------------------------- statements

    def lower_body(self, stmts: Sequence[ast.stmt]) -> None:
        for stmt in stmts:
            method = getattr(self, f"stmt_{type(stmt).__name__}", None)
            if method is None:
                raise unsupported(f"the `{type(stmt).__name__}` statement", self.loc(stmt))
            method(stmt)

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.expr(node.value)

    def stmt_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            raise CompileError(
                "a kernel cannot return a value",
                self.loc(node.value),
                code="E0603",
                help="store results into a `tile.Part` parameter: `out.store(x)`",
            )
        if self.branch_depth:
            raise unsupported(
                "`return` inside an `if` on a runtime value",
                self.loc(node),
                help="put the rest of the kernel in the `else:` branch instead",
            )
        raise unsupported("`return`", self.loc(node), help="let the kernel end instead")

    def stmt_Assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value)

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        kind = BINOPS.get(type(node.op))
        if kind is None:
            raise unsupported(f"the operator in `{ast.unparse(node)}`", self.loc(node))
        load = ast.copy_location(ast.Name(id=getattr(node.target, "id", "?"), ctx=ast.Load()), node)
        if not isinstance(node.target, ast.Name):
            raise unsupported("augmented assignment to this target", self.loc(node.target))
        current = self.expr(load)
        self.assign(node.target, self.binary(kind, current, self.expr(node.value), self.loc(node)))

    def assign(self, target: ast.expr, value: Operand) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
            return
        if isinstance(target, ast.Tuple | ast.List):
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                n = len(value) if isinstance(value, tuple) else "a non-tuple"
                raise CompileError(
                    f"cannot unpack {n} into {len(target.elts)} names",
                    self.loc(target),
                    code="E0070",
                )
            for t, v in zip(target.elts, value, strict=True):
                self.assign(t, v)
            return
        raise CompileError(
            f"cannot assign to `{ast.unparse(target)}` in a tile kernel",
            self.loc(target),
            code="E0070",
            help="tiles are values: assign to a name, and write memory with `part.store(x)`",
        )

    def stmt_If(self, node: ast.If) -> None:
        control.lower_if(self, node)

    def stmt_For(self, node: ast.For) -> None:
        control.lower_for(self, node)

    # ------------------------------------------------------------------------ expressions

    def expr(self, node: ast.expr) -> Operand:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            raise unsupported(f"the expression `{ast.unparse(node)}`", self.loc(node))
        return method(node)

    def expr_Constant(self, node: ast.Constant) -> Operand:
        if isinstance(node.value, bool | int | float):
            return Weak(node.value)
        if node.value is None:
            return PyObj(None, "None")
        raise unsupported(f"the constant `{node.value!r}`", self.loc(node))

    def expr_Name(self, node: ast.Name) -> Operand:
        if node.id in self.env:
            v = self.env[node.id]
            if isinstance(v, Undefined):
                raise CompileError(
                    f"`{node.id}` may be used before it is assigned",
                    self.loc(node),
                    code="E0381",
                    label="possibly unassigned here",
                    notes=[v.why] if isinstance(v, control.BranchLocal) else [],
                    help=f"assign `{node.id}` before the `if`, or in both of its branches",
                )
            return v
        found, obj = self.src.lookup(node.id)
        if not found:
            raise CompileError(
                f"cannot find `{node.id}` in this scope", self.loc(node), code="E0425"
            )
        if isinstance(obj, bool | int | float):
            return Weak(obj)  # a global constant is a compile-time literal
        return PyObj(obj, node.id)

    def expr_Tuple(self, node: ast.Tuple) -> Operand:
        return tuple(self.expr(e) for e in node.elts)

    def expr_Attribute(self, node: ast.Attribute) -> Operand:
        base = self.expr(node.value)
        loc = self.loc(node)
        attr = node.attr
        if isinstance(base, PyObj):
            if not hasattr(base.obj, attr):
                raise CompileError(f"`{base.name}` has no attribute `{attr}`", loc, code="E0433")
            obj = getattr(base.obj, attr)
            return (
                Weak(obj)
                if isinstance(obj, bool | int | float)
                else PyObj(obj, f"{base.name}.{attr}")
            )
        if isinstance(base, Value) and isinstance(base.type, ArrayParamType):
            t = base.type
            if attr == "shape":
                if t.tile is not None:
                    return tuple(Weak(d) for d in t.tile)
                return tuple(self.emit(ops.ArrayDim(base, a, loc)) for a in range(t.ndim))
            if attr == "index" and t.tile is not None:
                return tuple(self.emit(ops.BlockId(a, loc)) for a in range(t.ndim))
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
            if attr == "astype":
                return Bound("astype", base)
            if attr == "T":
                return self.permute(base, None, loc)
        raise CompileError(
            f"`{ast.unparse(node)}` is not available in tile kernels", loc, code="E0433"
        )

    def expr_Subscript(self, node: ast.Subscript) -> Operand:
        base = self.expr(node.value)
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

    def expr_BinOp(self, node: ast.BinOp) -> Operand:
        a, b = self.expr(node.left), self.expr(node.right)
        if isinstance(node.op, ast.MatMult):
            return self.matmul(a, b, self.loc(node))
        kind = BINOPS.get(type(node.op))
        if kind is None:
            raise unsupported(f"the operator in `{ast.unparse(node)}`", self.loc(node))
        return self.binary(kind, a, b, self.loc(node))

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Operand:
        x = self.expr(node.operand)
        loc = self.loc(node)
        if isinstance(node.op, ast.UAdd):
            return x
        if isinstance(x, Weak):
            w = x.value
            if isinstance(node.op, ast.USub):
                return Weak(-w)
            if isinstance(node.op, ast.Not):
                return Weak(not w)
            return Weak(~w)  # type: ignore[operator]  # `~` of a float literal: Python's TypeError
        v = self.tile_value(x, loc)
        if isinstance(node.op, ast.USub):
            return self.emit(ops.Unary("neg", v, loc))
        if isinstance(node.op, ast.Not | ast.Invert) and tile_type(v).dtype.is_bool:
            return self.emit(ops.Unary("not", v, loc))
        raise unsupported(f"the operator in `{ast.unparse(node)}`", loc)

    def expr_Compare(self, node: ast.Compare) -> Operand:
        if len(node.ops) != 1:
            raise unsupported(
                "chained comparisons", self.loc(node), help="use `&` of two comparisons"
            )
        pred = CMPOPS.get(type(node.ops[0]))
        if pred is None:
            raise unsupported(f"`{ast.unparse(node)}`", self.loc(node))
        return self.compare(
            pred, self.expr(node.left), self.expr(node.comparators[0]), self.loc(node)
        )

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

    def expr_Call(self, node: ast.Call) -> Operand:
        loc = self.loc(node)
        func = self.expr(node.func)
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords if k.arg is not None}
        if isinstance(func, Bound):
            if func.name == "store":
                if len(args) != 1 or kwargs:
                    raise CompileError("`store` takes one tile", loc, code="E0061")
                self.store(func.obj, args[0], self.loc(node.args[0]))
                return PyObj(None, "None")
            return self.call_api("astype", [func.obj, *args], kwargs, node)
        if isinstance(func, PyObj):
            name = getattr(func.obj, "__fearless_tile__", None)
            if name is not None:
                return self.call_api(name, args, kwargs, node)
            if isinstance(func.obj, DType):
                if len(args) != 1:
                    raise CompileError(f"`{func.name}(x)` takes one value", loc, code="E0061")
                return self.cast(args[0], func.obj, loc)
            if func.obj is abs:
                return self.call_api("abs", args, kwargs, node)
            if func.obj is min or func.obj is max:
                if all(isinstance(a, Weak) for a in args):
                    return Weak(func.obj(*(a.value for a in args)))
                return self.call_api(
                    "minimum" if func.obj is min else "maximum", args, kwargs, node
                )
            if func.obj is len and len(args) == 1 and isinstance(args[0], tuple):
                return Weak(len(args[0]))
        raise CompileError(
            f"`{ast.unparse(node.func)}` cannot be called in a tile kernel",
            self.loc(node.func),
            code="E0605",
            help="tile kernels call `tile.*` functions, dtypes (`fl.f32(x)`) and `range`",
        )

    # -------------------------------------------------------------------------- the API

    def call_api(
        self, name: str, args: list[Operand], kwargs: dict[str, Operand], node: ast.Call
    ) -> Operand:
        from . import lower_api

        stub = KERNEL_FUNCTIONS[name]
        sig = inspect.signature(stub.__wrapped__)  # type: ignore[attr-defined]
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise CompileError(f"`tile.{name}`: {exc}", self.loc(node), code="E0061") from None
        bound.apply_defaults()
        for k, v in bound.arguments.items():  # the stub's own defaults are plain Python values
            if v is None:
                bound.arguments[k] = PyObj(None, "None")
            elif isinstance(v, bool | int | float):
                bound.arguments[k] = Weak(v)
        # Where each argument is written, for errors that point at one argument.
        names = list(sig.parameters)
        skip = len(args) - len(node.args)  # a method call's receiver has no node of its own
        nodes: dict[str, ast.AST] = {k.arg: k.value for k in node.keywords if k.arg is not None}
        for i, a in enumerate(node.args):
            if i + skip < len(names):
                nodes[names[i + skip]] = a

        def loc_of(param: str) -> Location:
            return self.loc(nodes.get(param, node))

        handler: Callable[..., Operand] = getattr(lower_api, f"api_{name}")
        return handler(self, loc_of, **bound.arguments)

    # ------------------------------------------------------------------------ typing rules

    def const(self, value: Any, dtype: DType, loc: Location, shape: tuple[int, ...] = ()) -> Value:
        return self.emit(ops.Constant(value, TileType(dtype, shape), loc))

    def _literal(self, w: Weak, dtype: DType, loc: Location) -> Any:
        if not dtypes.literal_fits(w.value, dtype):
            raise KernelTypeError(
                f"the literal `{w.value!r}` cannot be used as {dtype.name}",
                loc,
                label=f"expected {dtype.name}",
                help=f"write a value {dtype.name} holds, or convert the tile with `.astype(...)`",
            )
        return (
            float(w.value) if dtype.is_float else bool(w.value) if dtype.is_bool else int(w.value)
        )

    def tile_value(self, x: Operand, loc: Location, dtype: DType | None = None) -> Value:
        """`x` as a tile value; a Weak becomes `dtype` (or its default type)."""
        if isinstance(x, Weak):
            dt = dtype or dtypes.literal_default(x.value)
            return self.const(self._literal(x, dt, loc), dt, loc)
        if isinstance(x, Value) and isinstance(x.type, TileType):
            return x
        if isinstance(x, Value):
            raise KernelTypeError(
                f"expected a tile, found the array `{x.name}` ({x.type})",
                loc,
                help=f"load a tile of it first: `tile.load_like({x.name}, part)` or `tile.load(...)`",
            )
        what = "a tuple" if isinstance(x, tuple) else f"`{getattr(x, 'name', x)}`"
        raise KernelTypeError(f"expected a tile or a number, found {what}", loc)

    def index(self, x: Operand, loc: Location) -> Value:
        """An i32 scalar for a tile coordinate or loop bound."""
        v = self.tile_value(x, loc, dtypes.i32)
        t = tile_type(v)
        if t.shape != () or not t.dtype.is_int:
            raise KernelTypeError(f"an index must be an integer scalar, found {t}", loc)
        return v if t.dtype == dtypes.i32 else self.emit(ops.Cast(v, dtypes.i32, loc))

    def unify(self, a: Operand, b: Operand, loc: Location, what: str) -> DType:
        if isinstance(a, Weak) and isinstance(b, Weak):
            return dtypes.literal_default(a.value if isinstance(a.value, float) else b.value)
        if isinstance(a, Weak):
            a, b = b, a
        da = tile_type(self.tile_value(a, loc)).dtype
        if isinstance(b, Weak):
            self._literal(b, da, loc)
            return da
        db = tile_type(self.tile_value(b, loc)).dtype
        if da != db:
            wide = da if da.bits >= db.bits and da.is_float >= db.is_float else db
            raise KernelTypeError(
                f"mismatched types in {what}: {da.name} and {db.name}",
                loc,
                label=f"{da.name} and {db.name}",
                help=f"convert one side explicitly, e.g. `x.astype(fl.{wide.name})`",
            )
        return da

    def broadcast_shapes(
        self, s1: tuple[int, ...], s2: tuple[int, ...], loc: Location
    ) -> tuple[int, ...]:
        out = []
        for i in range(1, max(len(s1), len(s2)) + 1):
            d1 = s1[-i] if i <= len(s1) else 1
            d2 = s2[-i] if i <= len(s2) else 1
            if d1 != d2 and 1 not in (d1, d2):
                raise KernelTypeError(
                    f"cannot broadcast tiles of shapes {s1} and {s2}",
                    loc,
                    help="dimensions must match or be 1 (NumPy rules); "
                    "keep reduced axes with `keepdims=True`",
                )
            out.append(max(d1, d2))
        return tuple(reversed(out))

    def broadcast_to(self, v: Value, shape: tuple[int, ...], loc: Location) -> Value:
        t = tile_type(v)
        if t.shape == shape:
            return v
        if self.broadcast_shapes(t.shape, shape, loc) != shape:
            raise KernelTypeError(f"cannot broadcast a tile of shape {t.shape} to {shape}", loc)
        if t.ndim < len(shape):
            v = self.emit(ops.Reshape(v, (1,) * (len(shape) - t.ndim) + t.shape, loc))
        if tile_type(v).shape != shape:
            v = self.emit(ops.Broadcast(v, shape, loc))
        return v

    def operands(self, xs: Sequence[Operand], dtype: DType, loc: Location) -> list[Value]:
        vs = [self.tile_value(x, loc, dtype) for x in xs]
        shape: tuple[int, ...] = ()
        for v in vs:
            shape = self.broadcast_shapes(shape, tile_type(v).shape, loc)
        return [self.broadcast_to(v, shape, loc) for v in vs]

    def binary(self, kind: str, a: Operand, b: Operand, loc: Location) -> Operand:
        if isinstance(a, Weak) and isinstance(b, Weak):
            try:
                return Weak(PY_BINOPS[kind](a.value, b.value))
            except (ZeroDivisionError, OverflowError, ValueError) as exc:
                raise CompileError(
                    f"cannot evaluate `{a.value!r} {SYMBOL[kind]} {b.value!r}`: {exc}", loc
                ) from None
        sym = SYMBOL.get(kind, kind)
        dt = self.unify(a, b, loc, f"`{sym}`")
        if kind == "div" and not dt.is_float:
            raise KernelTypeError(
                f"`/` on {dt.name} tiles: true division of integers is not defined in kernels",
                loc,
                help="use `//` for floor division, or convert with `.astype(fl.f32)`",
            )
        if kind in ("and", "or", "xor") and dt.is_float:
            raise KernelTypeError(f"`{sym}` needs integer or bool tiles, found {dt.name}", loc)
        if dt.is_bool and kind not in ("and", "or", "xor"):
            raise KernelTypeError(f"`{sym}` is not defined on bool tiles", loc)
        va, vb = self.operands([a, b], dt, loc)
        return self.emit(ops.Binary(kind, va, vb, loc))

    def compare(self, pred: str, a: Operand, b: Operand, loc: Location) -> Operand:
        if isinstance(a, Weak) and isinstance(b, Weak):
            return Weak(PY_CMPS[pred](a.value, b.value))
        dt = self.unify(a, b, loc, f"`{SYMBOL[pred]}`")
        va, vb = self.operands([a, b], dt, loc)
        return self.emit(ops.Compare(pred, va, vb, loc))

    def cast(self, x: Operand, dtype: DType, loc: Location) -> Value:
        if isinstance(x, Weak):
            w = x.value
            literal = float(w) if dtype.is_float else bool(w) if dtype.is_bool else int(w)
            return self.const(literal, dtype, loc)
        v = self.tile_value(x, loc)
        return v if tile_type(v).dtype == dtype else self.emit(ops.Cast(v, dtype, loc))

    def store(self, part: Value, x: Operand, loc: Location) -> None:
        t = part.type
        assert isinstance(t, ArrayParamType) and t.tile is not None
        v = self.tile_value(x, loc, t.dtype)
        vt = tile_type(v)
        if vt.dtype != t.dtype:
            raise KernelTypeError(
                f"cannot store a {vt.dtype.name} tile into `{part.name}`, a Part of {t.dtype.name}",
                loc,
                label=f"this is {vt.dtype.name}",
                help=f"convert it: `x.astype(fl.{t.dtype.name})`",
            )
        if self.broadcast_shapes(vt.shape, t.tile, loc) != t.tile:
            raise KernelTypeError(
                f"cannot store a tile of shape {vt.shape} into `{part.name}`, whose tiles are {t.tile}",
                loc,
                help="the stored tile must have the partition's tile shape (or broadcast to it)",
            )
        self.block.append(ops.Store(part, self.broadcast_to(v, t.tile, loc), loc))

    def permute(self, x: Value, axes: tuple[int, ...] | None, loc: Location) -> Value:
        n = tile_type(x).ndim
        perm = tuple(reversed(range(n))) if axes is None else axes
        if sorted(perm) != list(range(n)):
            raise CompileError(f"{perm} is not a permutation of the {n} axes", loc)
        return x if perm == tuple(range(n)) else self.emit(ops.Permute(x, perm, loc))

    def matmul(self, a: Operand, b: Operand, loc: Location) -> Value:
        va, vb = self.tile_value(a, loc), self.tile_value(b, loc)
        ta, tb = tile_type(va), tile_type(vb)
        acc_dt = dtypes.f32 if ta.dtype in (dtypes.f16, dtypes.bf16) else ta.dtype
        m = ta.shape[0] if ta.ndim == 2 else 0
        n = tb.shape[-1] if tb.ndim == 2 else 0
        acc = self.const(0, acc_dt, loc, (m, n)) if m and n else None
        from .lower_api import mma

        return mma(self, va, vb, acc, loc)

    # ---------------------------------------------------------------- compile-time values

    def static_int(self, x: Operand, loc: Location, what: str) -> int:
        if isinstance(x, Weak) and isinstance(x.value, int) and not isinstance(x.value, bool):
            return x.value
        raise CompileError(
            f"{what} must be a compile-time integer",
            loc,
            help="use a literal, a `tile.Const[int]` parameter or a Part's `.shape`",
        )

    def static_shape(
        self, x: Operand, loc: Location, what: str = "a tile shape"
    ) -> tuple[int, ...]:
        items = x if isinstance(x, tuple) else (x,)
        shape = tuple(self.static_int(i, loc, what) for i in items)
        bad = [d for d in shape if not is_pow2(d)]
        if bad:
            raise CompileError(
                f"tile dimensions must be powers of two, but {what} {shape} has {bad[0]}",
                loc,
                label="not a power of two",
                help="round the tile up to a power of two; edge tiles are padded on load and "
                "masked on store",
            )
        return shape

    def static_dtype(self, x: Operand, loc: Location) -> DType:
        if isinstance(x, PyObj) and isinstance(x.obj, DType):
            return x.obj
        raise CompileError("expected a dtype such as `fl.f32`", loc)
