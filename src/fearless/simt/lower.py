"""Python AST -> typed SSA IR: statements, control flow and expressions.

SSA is built structurally, which Python's structured control flow allows: the lowerer keeps an
environment `name -> Operand`; `if` lowers both arms from a copy and merges them at a join block
whose arguments are the variables that differ (`merge`); loops get a header block whose
arguments are the variables the body assigns. A variable whose loop-header type was guessed
from a weak literal (`s = 0` before `s += x[i]` with f32 `x`) is re-lowered with the type the
loop body produced (`_Retry`), so literals adopt the type of their use as DESIGN promises.

Calls (builtins, math, dtypes, device functions) are in `calls.py`; subscripts and the SIMT
witness rules in `access.py`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..errors import CompileError, KernelTypeError, Location
from ..frontend.core import assigned_names
from ..frontend.source import FunctionSource
from ..frontend.values import Emitter, Operand, PyObj, Undefined, Weak, value_type
from ..ir import ops
from ..ir.core import (
    ArrayType,
    Block,
    Function,
    ScalarType,
    ThreadIndex2DType,
    ThreadIndexType,
    Type,
    Value,
)

Env = dict[str, Operand]
Token = tuple[Any, ...]

BINOPS: dict[type[ast.operator], str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.Pow: "pow",
    ast.LShift: "shl",
    ast.RShift: "shr",
    ast.BitAnd: "and",
    ast.BitOr: "or",
    ast.BitXor: "xor",
}
CMPOPS: dict[type[ast.cmpop], str] = {
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
    ast.Eq: "eq",
    ast.NotEq: "ne",
}
UNARYOPS: dict[type[ast.unaryop], str] = {
    ast.USub: "neg",
    ast.Not: "not",
    ast.Invert: "invert",
}


class _Retry(Exception):
    """Re-lower the loop `token` with variable `name` typed `type` at its header."""

    def __init__(self, token: Token, name: str, type: Type) -> None:
        super().__init__(name)
        self.token = token
        self.name = name
        self.type = type


@dataclass
class LoopFrame:
    breaks: list[tuple[Block, Env]] = field(default_factory=list)
    continues: list[tuple[Block, Env]] = field(default_factory=list)


@dataclass
class Context:
    """State shared by a kernel and every device function inlined into it."""

    fn: Function
    em: Emitter
    call_stack: list[Any] = field(default_factory=list)
    # Loop-header arguments whose type was guessed from a weak literal: (loop token, name).
    weak_origin: dict[Value, tuple[Token, str]] = field(default_factory=dict)
    hints: dict[Token, dict[str, Type]] = field(default_factory=dict)
    uses_index_1d: bool = False
    uses_index_2d: bool = False

    def __post_init__(self) -> None:
        self.em.on_mismatch = self.retry_if_guessed

    def retry_if_guessed(self, v: Value, wanted: DType) -> None:
        origin = self.weak_origin.get(v)
        if origin is not None:
            raise _Retry(origin[0], origin[1], ScalarType(wanted))

    # `unsafe=True` kernels: raw indexed writes to DisjointSlices, no device bounds checks.
    unsafe: bool = False


def unsupported(what: str, loc: Location, help: str | None = None) -> CompileError:
    return CompileError(
        f"{what} is not supported in kernels", loc, label="not supported", help=help
    )


class FunctionLowerer:
    """Lowers one function body (the kernel's, or an inlined device function's)."""

    def __init__(
        self,
        ctx: Context,
        src: FunctionSource,
        env: Env,
        call_path: Token = (),
        is_kernel: bool = True,
    ) -> None:
        self.ctx = ctx
        self.src = src
        self.env = env
        self.call_path = call_path
        self.is_kernel = is_kernel
        self.loops: list[LoopFrame] = []
        self.returns: list[tuple[Block, Env]] = []

    @property
    def em(self) -> Emitter:
        return self.ctx.em

    def loc(self, node: ast.AST) -> Location:
        return self.src.loc(node)

    # ------------------------------------------------------------------------- statements

    def lower_body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if self.em.block is None:
                return  # the rest is unreachable (after return/break/continue)
            self.lower_stmt(stmt)

    def lower_stmt(self, node: ast.stmt) -> None:
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            raise unsupported(f"the `{type(node).__name__}` statement", self.loc(node))
        method(node)

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.expr(node.value)

    def stmt_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if isinstance(target, ast.Tuple | ast.List):
                raise unsupported(
                    "tuple unpacking", self.loc(target), help="assign each variable on its own line"
                )
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value, node)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        from .calls import resolve_annotation

        if node.value is None:
            raise unsupported(
                "a declaration without a value",
                self.loc(node),
                help="give the variable a value: `x: fl.f32 = 0.0`",
            )
        dtype = resolve_annotation(self, node.annotation)
        value = self.expr(node.value)
        loc = self.loc(node.value)
        scalar = self.em.scalar(value, loc)
        if isinstance(scalar, Value) and scalar.dtype != dtype:
            raise KernelTypeError(
                f"`{ast.unparse(node.target)}` is declared {dtype.name} but the value is "
                f"{scalar.dtype.name}",
                loc,
                help=f"convert it: `fl.{dtype.name}(...)`",
            )
        self.assign(node.target, self.em.as_value(scalar, loc, dtype), node)

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        kind = BINOPS.get(type(node.op))
        if kind is None:
            raise unsupported(f"the operator `{ast.unparse(node)}`", self.loc(node))
        current = self.expr(_as_load(node.target))
        result = self.em.binary(kind, current, self.expr(node.value), self.loc(node))
        self.assign(node.target, result, node)

    def assign(self, target: ast.expr, value: Operand, stmt: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, Undefined):
                raise self.em.not_a_value(value, self.loc(stmt))
            self.env[target.id] = value
        elif isinstance(target, ast.Subscript):
            from .access import store

            store(self, target, value, self.loc(target))
        elif isinstance(target, ast.Tuple | ast.List):
            raise unsupported(
                "tuple unpacking", self.loc(target), help="assign each variable on its own line"
            )
        else:
            raise CompileError(
                f"cannot assign to `{ast.unparse(target)}`", self.loc(target), code="E0070"
            )

    def stmt_Return(self, node: ast.Return) -> None:
        loc = self.loc(node)
        if self.is_kernel:
            if node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None
            ):
                raise CompileError(
                    "kernels cannot return a value",
                    self.loc(node.value),
                    code="E0603",
                    label="returned here",
                    help="write results into a `DisjointSlice` parameter instead",
                )
            self.em.emit(ops.Return(loc))
        else:
            env = dict(self.env)
            env["$ret"] = self.expr(node.value) if node.value is not None else PyObj(None, "None")
            assert self.em.block is not None
            self.returns.append((self.em.block, env))
        self.em.block = None

    def stmt_Break(self, node: ast.Break) -> None:
        assert self.em.block is not None
        self.loops[-1].breaks.append((self.em.block, dict(self.env)))
        self.em.block = None

    def stmt_Continue(self, node: ast.Continue) -> None:
        assert self.em.block is not None
        self.loops[-1].continues.append((self.em.block, dict(self.env)))
        self.em.block = None

    def stmt_If(self, node: ast.If) -> None:
        cond = self.condition(node.test)
        if isinstance(cond, Weak):  # decided at compile time: lower only the taken arm
            self.lower_body(node.body if cond.value else node.orelse)
            return
        fn = self.ctx.fn
        then_b, else_b = fn.new_block("if.then"), fn.new_block("if.else")
        self.em.emit(ops.CondBr(cond, then_b, [], else_b, [], self.loc(node.test)))
        before = dict(self.env)
        incoming: list[tuple[Block, Env]] = []
        for block, body in ((then_b, node.body), (else_b, node.orelse)):
            self.em.block = block
            self.env = dict(before)
            self.lower_body(body)
            if self.em.block is not None:
                incoming.append((self.em.block, self.env))
        self.env = self.merge(incoming, self.loc(node), label="if.end", before=before)

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            raise unsupported("`while ... else`", self.loc(node))
        self.lower_loop(node)

    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            raise unsupported("`for ... else`", self.loc(node))
        if not isinstance(node.target, ast.Name):
            raise unsupported("a loop target that is not a plain name", self.loc(node.target))
        it = node.iter
        if not (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name)
            and it.func.id == "range"
            and self.env.get("range") is None
        ):
            raise unsupported(
                f"iterating over `{ast.unparse(it)}`",
                self.loc(it),
                help="kernels loop with `for i in range(start, stop, step)` or `while`",
            )
        if not 1 <= len(it.args) <= 3 or it.keywords:
            raise CompileError(
                "range() takes 1 to 3 positional arguments", self.loc(it), code="E0061"
            )
        self.lower_loop(node)

    # ------------------------------------------------------------------------------ loops

    def lower_loop(self, node: ast.While | ast.For) -> None:
        token: Token = (*self.call_path, id(node))
        fn = self.ctx.fn
        while True:
            block = self.em.block
            assert block is not None
            saved = (len(fn.blocks), len(block.ops), dict(self.env))
            try:
                self._lower_loop_once(node, token)
                return
            except _Retry as retry:
                if retry.token != token:
                    raise
                hints = self.ctx.hints.setdefault(token, {})
                if hints.get(retry.name) == retry.type:
                    raise  # pragma: no cover - the retry would not converge
                hints[retry.name] = retry.type
                del fn.blocks[saved[0] :]
                del block.ops[saved[1] :]
                self.env = saved[2]
                self.em.block = block

    def _lower_loop_once(self, node: ast.While | ast.For, token: Token) -> None:
        fn, em = self.ctx.fn, self.em
        loc = self.loc(node)
        hints = self.ctx.hints.get(token, {})
        induction: tuple[Value, Value, Weak | Value] | None = None  # (start, stop, step)
        target = (
            node.target.id
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name)
            else None
        )
        if isinstance(node, ast.For):
            induction = self._range_bounds(node.iter)  # type: ignore[arg-type]
        carried = [
            n
            for n in assigned_names(node.body)
            if n != target and isinstance(self.env.get(n), Value | Weak)
        ]
        header = fn.new_block("for.header" if target else "while.header")
        inits: list[Value] = []
        if induction is not None:
            k = header.add_arg(induction[0].type, loc, target or "")
            inits.append(induction[0])
        for name in carried:
            init = self.env[name]
            assert isinstance(init, Value | Weak)
            t = hints.get(name) or value_type(init)
            _no_witness_2d_merge(t, name, loc)
            init_v = self._coerce(init, t, name, loc, token=None)
            arg = header.add_arg(t, loc, name)
            if isinstance(init, Weak) and name not in hints:
                self.ctx.weak_origin[arg] = (token, name)
            elif init in self.ctx.weak_origin:
                self.ctx.weak_origin[arg] = self.ctx.weak_origin[init]
            inits.append(init_v)
            self.env[name] = arg
        em.emit(ops.Br(header, inits, loc))
        em.block = header
        header_env = dict(self.env)
        body, exit_pre = fn.new_block("loop.body"), fn.new_block("loop.exit")
        if induction is not None:
            assert target is not None
            cond = self._range_cond(k, induction[1], induction[2], loc)
        else:
            c = self.condition(node.test)  # type: ignore[union-attr]
            cond = c if isinstance(c, Value) else em.const(c.value, dtypes.bool_, loc)
        em.emit(ops.CondBr(cond, body, [], exit_pre, [], loc))
        frame = LoopFrame()
        self.loops.append(frame)
        em.block = body
        if target is not None:
            self.env[target] = k
        self.lower_body(node.body)
        self.loops.pop()
        if em.block is not None:
            frame.continues.append((em.block, self.env))
        for block, env in frame.continues:
            em.block = block
            args: list[Value] = []
            if induction is not None:
                step = em.as_value(induction[2], loc, k.dtype)
                args.append(em.emit(ops.Binary("add", k, step, loc)).result)
            for arg, name in zip(header.args[len(args) :], carried, strict=True):
                args.append(self._coerce(env.get(name), arg.type, name, loc, header_arg=arg))
            em.emit(ops.Br(header, args, loc))
        after_env = dict(header_env)
        if target is not None:
            after_env[target] = Undefined(target, loc)
        for _, env in frame.breaks:
            if target is not None:
                env[target] = Undefined(target, loc)
        self.env = self.merge([(exit_pre, after_env), *frame.breaks], loc, label="loop.end")

    def _range_bounds(self, call: ast.Call) -> tuple[Value, Value, Weak | Value]:
        em = self.em
        loc = self.loc(call)
        raw = [em.scalar(self.expr(a), self.loc(a), "range() argument") for a in call.args]
        if len(raw) == 1:
            raw = [Weak(0), raw[0]]
        if len(raw) == 2:
            raw.append(Weak(1))
        strong = [r for r in raw if isinstance(r, Value)]
        dt = strong[0].dtype if strong else dtypes.i64
        for r in raw:
            if isinstance(r, Value) and r.dtype != dt:
                em.unify(strong[0], r, loc, "range()")
            if (isinstance(r, Value) and not r.dtype.is_int) or (
                isinstance(r, Weak) and not isinstance(r.value, int)
            ):
                raise KernelTypeError(
                    "range() needs integer arguments",
                    loc,
                    help="convert with `int(x)` or a dtype such as `fl.i32(x)`",
                )
        step = raw[2]
        if isinstance(step, Weak) and step.value == 0:
            raise CompileError("range() step must not be zero", self.loc(call.args[2]))
        start = em.as_value(raw[0], loc, dt)
        stop = em.as_value(raw[1], loc, dt)
        return start, stop, step if isinstance(step, Weak) else em.as_value(step, loc, dt)

    def _range_cond(self, k: Value, stop: Value, step: Weak | Value, loc: Location) -> Value:
        em = self.em
        if isinstance(step, Weak):
            pred = "lt" if step.value > 0 else "gt"
            return em.emit(ops.Compare(pred, k, stop, loc)).result
        zero = em.const(0, k.dtype, loc)
        up = em.emit(ops.Compare("gt", step, zero, loc)).result
        lt = em.emit(ops.Compare("lt", k, stop, loc)).result
        gt = em.emit(ops.Compare("gt", k, stop, loc)).result
        return em.emit(ops.Select(up, lt, gt, loc)).result

    # ---------------------------------------------------------------------------- merging

    def _coerce(
        self,
        v: Operand | None,
        t: Type,
        name: str,
        loc: Location,
        token: Token | None = None,
        header_arg: Value | None = None,
        others: list[Operand] | None = None,
    ) -> Value:
        """`v` as a value of type `t` at the end of the current block, or a precise error."""
        em = self.em
        if v is None or isinstance(v, Undefined | PyObj):
            raise em.not_a_value(v if v is not None else Undefined(name, loc), loc)
        if (
            isinstance(v, Weak)
            and isinstance(t, ScalarType)
            and dtypes.literal_fits(v.value, t.dtype)
        ):
            return em.const(v.value, t.dtype, loc)
        if isinstance(v, Value):
            if v.type == t:
                return v
            if isinstance(v.type, ThreadIndexType) and t == ScalarType(dtypes.i64):
                return em.index_int(v, loc)
        # A mismatch: re-lower the loop whose header type was only a guess, else report.
        vt = value_type(v) if isinstance(v, Weak | Value) else t
        origin = self.ctx.weak_origin.get(header_arg) if header_arg is not None else None
        for o in others or []:
            if origin is None and isinstance(o, Value):
                origin = self.ctx.weak_origin.get(o)
        if origin is not None:
            raise _Retry(
                origin[0],
                origin[1],
                vt if not isinstance(vt, ThreadIndexType) else ScalarType(dtypes.i64),
            )
        raise KernelTypeError(
            f"`{name}` is {t} on one path and {vt} on another",
            v.loc if isinstance(v, Value) else loc,
            label=f"this makes `{name}` {vt}",
            help=f"give `{name}` one type on every path, e.g. `fl.{_dtype_name(t)}(...)`",
        )

    def merge(
        self,
        incoming: list[tuple[Block, Env]],
        loc: Location,
        label: str,
        before: Env | None = None,
    ) -> Env:
        """Join the still-open blocks in `incoming` at a new block; returns the joined env."""
        em = self.em
        if not incoming:
            em.block = None
            return dict(self.env)
        if len(incoming) == 1:
            em.block = incoming[0][0]
            return incoming[0][1]
        join = self.ctx.fn.new_block(label)
        names = list(dict.fromkeys(n for _, env in incoming for n in env))
        joined: Env = {}
        branch_args: list[list[Value]] = [[] for _ in incoming]
        for name in names:
            vals = [env.get(name) for _, env in incoming]
            first = vals[0]
            if all(v is first or (isinstance(v, Weak) and v == first) for v in vals):
                joined[name] = first if first is not None else Undefined(name, loc)
                continue
            if any(v is None or isinstance(v, Undefined) for v in vals):
                joined[name] = Undefined(name, loc)
                continue
            if any(isinstance(v, PyObj) for v in vals):
                if all(isinstance(v, PyObj) and v.obj is first.obj for v in vals):  # type: ignore[union-attr]
                    joined[name] = first  # type: ignore[assignment]
                    continue
                joined[name] = Undefined(name, loc)
                continue
            prior = (before or {}).get(name)
            if isinstance(prior, Value) and isinstance(prior.type, ScalarType):
                t: Type = prior.type  # a variable keeps the type it had before the branch
            else:
                t = self._join_type(name, vals, loc)  # type: ignore[arg-type]
            _no_witness_2d_merge(t, name, loc)
            for i, (block, _) in enumerate(incoming):
                em.block = block
                branch_args[i].append(self._coerce(vals[i], t, name, loc, others=vals))  # type: ignore[arg-type]
            joined[name] = join.add_arg(t, loc, name)
        for (block, _), args in zip(incoming, branch_args, strict=True):
            em.block = block
            em.emit(ops.Br(join, args, loc))
        em.block = join
        return joined

    def _join_type(self, name: str, vals: list[Value | Weak], loc: Location) -> Type:
        strong = [v for v in vals if isinstance(v, Value)]
        if not strong:
            floats = any(isinstance(v.value, float) for v in vals)  # type: ignore[union-attr]
            return ScalarType(dtypes.f32 if floats else value_type(vals[0]).dtype)  # type: ignore[attr-defined]
        types = {v.type for v in strong}
        if len(types) == 1:
            return strong[0].type
        if types == {
            ScalarType(dtypes.i64),
            next(iter(t for t in types if isinstance(t, ThreadIndexType)), None),
        }:
            return ScalarType(dtypes.i64)
        # Let `_coerce` raise the right error (a retry for guessed types, else a type error).
        return strong[0].type

    # --------------------------------------------------------------------------- conditions

    def condition(self, node: ast.expr) -> Value | Weak:
        return self.em.truth(self.expr(node), self.loc(node))

    # -------------------------------------------------------------------------- expressions

    def expr(self, node: ast.expr) -> Operand:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            raise unsupported(f"the expression `{ast.unparse(node)}`", self.loc(node))
        return method(node)  # type: ignore[no-any-return]

    def expr_Constant(self, node: ast.Constant) -> Operand:
        v = node.value
        if isinstance(v, bool | int | float):
            return Weak(v)
        if v is None:
            return PyObj(None, "None")
        raise unsupported(
            f"the constant `{v!r}`",
            self.loc(node),
            help="kernels work on numbers; strings and bytes are host-only",
        )

    def expr_Name(self, node: ast.Name) -> Operand:
        if node.id in self.env:
            value = self.env[node.id]
            if isinstance(value, Undefined):
                raise self.em.not_a_value(Undefined(node.id, self.loc(node)), self.loc(node))
            return value
        found, obj = self.src.lookup(node.id)
        if not found:
            raise CompileError(
                f"cannot find value `{node.id}` in this scope",
                self.loc(node),
                code="E0425",
                label="not found in this scope",
                help="define it in the kernel or at module level before the first launch",
            )
        return to_operand(obj, node.id)

    def expr_Attribute(self, node: ast.Attribute) -> Operand:
        base = self.expr(node.value)
        loc = self.loc(node)
        if isinstance(base, PyObj):
            if not hasattr(base.obj, node.attr):
                raise CompileError(
                    f"`{base.name}` has no attribute `{node.attr}`", loc, code="E0433"
                )
            return to_operand(getattr(base.obj, node.attr), f"{base.name}.{node.attr}")
        if isinstance(base, Value) and isinstance(base.type, ThreadIndex2DType):
            axis = {"row": 0, "col": 1}.get(node.attr)
            if axis is None:
                raise CompileError(
                    f"a 2-D ThreadIndex has no attribute `{node.attr}`",
                    loc,
                    code="E0433",
                    help="its coordinates are `.row` (along y) and `.col` (along x)",
                )
            return self.em.emit(ops.ThreadIndexAxis(base, axis, loc)).result
        what = f"a `{base.type}`" if isinstance(base, Value) else "a number"
        hint = None
        if isinstance(base, Value) and isinstance(base.type, ArrayType):
            a = ast.unparse(node.value)
            hint = (
                f"index it with a literal axis, e.g. `{a}.shape[0]`"
                if node.attr == "shape"
                else f"use `len({a})` for the length"
            )
        raise unsupported(f"`.{node.attr}` on {what}", loc, help=hint)

    def expr_BinOp(self, node: ast.BinOp) -> Operand:
        kind = BINOPS.get(type(node.op))
        if kind is None:
            raise unsupported(f"the operator in `{ast.unparse(node)}`", self.loc(node))
        return self.em.binary(kind, self.expr(node.left), self.expr(node.right), self.loc(node))

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Operand:
        if isinstance(node.op, ast.UAdd):
            return self.em.scalar(self.expr(node.operand), self.loc(node))
        return self.em.unary(UNARYOPS[type(node.op)], self.expr(node.operand), self.loc(node))

    def expr_Compare(self, node: ast.Compare) -> Operand:
        left = self.expr(node.left)
        result: Operand | None = None
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            pred = CMPOPS.get(type(op))
            if pred is None:
                raise unsupported(
                    f"the comparison `{ast.unparse(node)}`",
                    self.loc(node),
                    help="kernels compare numbers with < <= > >= == !=",
                )
            right = self.expr(right_node)
            r = self.em.compare(pred, left, right, self.loc(node))
            result = r if result is None else self.em.binary("and", result, r, self.loc(node))
            left = right
        assert result is not None
        return result

    def expr_BoolOp(self, node: ast.BoolOp) -> Operand:
        # Short-circuit, as Python: `i < n and a[i] > 0` must not read a[i] when i >= n.
        is_and = isinstance(node.op, ast.And)
        loc = self.loc(node)
        result = self.condition(node.values[0])
        for operand in node.values[1:]:
            if isinstance(result, Weak):
                if result.value != is_and:  # decided: False for `and`, True for `or`
                    return result
                result = self.condition(operand)
                continue
            flowed = self._select_flow(
                result, lambda o=operand: self.condition(o), Weak(not is_and), is_and, loc
            )
            assert isinstance(flowed, Value | Weak)
            result = flowed
        return result

    def expr_IfExp(self, node: ast.IfExp) -> Operand:
        cond = self.condition(node.test)
        if isinstance(cond, Weak):
            return self.expr(node.body if cond.value else node.orelse)
        return self._select_flow(
            cond, lambda: self.expr(node.body), None, True, self.loc(node), orelse=node.orelse
        )

    def _select_flow(
        self,
        cond: Value,
        on_true: Any,
        short: Weak | None,
        eval_on_true: bool,
        loc: Location,
        orelse: ast.expr | None = None,
    ) -> Operand:
        """Evaluate a lazily lowered operand on one edge of `cond`, merge at a join."""
        fn, em = self.ctx.fn, self.em
        then_b, else_b = fn.new_block("sel.then"), fn.new_block("sel.else")
        em.emit(ops.CondBr(cond, then_b, [], else_b, [], loc))
        incoming: list[tuple[Block, Env]] = []
        lazy_b, fixed_b = (then_b, else_b) if eval_on_true else (else_b, then_b)
        em.block = lazy_b
        v = on_true()
        assert em.block is not None
        incoming.append((em.block, {**self.env, "$sel": v}))
        em.block = fixed_b
        other = short if orelse is None else self.expr(orelse)
        assert em.block is not None and other is not None
        incoming.append((em.block, {**self.env, "$sel": other}))
        joined = self.merge(incoming, loc, label="sel.end")
        return joined.pop("$sel")

    def expr_Call(self, node: ast.Call) -> Operand:
        from .calls import lower_call

        return lower_call(self, node)

    def expr_Subscript(self, node: ast.Subscript) -> Operand:
        from .access import load

        return load(self, node, self.loc(node))

    def expr_NamedExpr(self, node: ast.NamedExpr) -> Operand:
        value = self.expr(node.value)
        self.env[node.target.id] = value
        return value


def _no_witness_2d_merge(t: Type, name: str, loc: Location) -> None:
    """A 2-D ThreadIndex is one value per kernel: it never flows through a block argument."""
    if isinstance(t, ThreadIndex2DType):
        raise CompileError(
            f"`{name}` holds a 2-D ThreadIndex assigned on more than one path",
            loc,
            code="E0602",
            help="call `simt.thread.index_2d()` once, at the top of the kernel, and keep it "
            "in one variable",
        )


def _dtype_name(t: Type) -> str:
    return t.dtype.name if isinstance(t, ScalarType) else str(t)


def to_operand(obj: Any, name: str) -> Operand:
    """A Python object referenced from a kernel: numbers become weak literals."""
    if isinstance(obj, bool | int | float) and not isinstance(obj, type):
        return Weak(obj)
    return PyObj(obj, name)


def _as_load(target: ast.expr) -> ast.expr:
    copy = ast.parse(ast.unparse(target), mode="eval").body
    ast.copy_location(copy, target)
    for a, b in zip(ast.walk(copy), ast.walk(target), strict=False):
        ast.copy_location(a, b)
    return copy
