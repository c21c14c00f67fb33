"""Python AST -> typed SSA IR for a SIMT kernel: its statements and expressions.

`FunctionLowerer` is the frontend core's `Lowerer` (frontend/core.py: dispatch, names,
literals, assignment) with the SIMT track's CFG (ssa.py), loops (loops.py) and typing rules
(emitter.py). What is here: `if` with a join block, `return` (device functions return values
to their caller), annotated assignment, short-circuit `and`/`or`, conditional expressions,
`:=` and attribute access on values (`t.row` of a 2-D ThreadIndex). Calls (builtins, math,
dtypes, device functions) are in intrinsics.py; subscripts and the witness rules in access.py;
`c.get_mut(i)` and the `if s is not None:` on its slot in slots.py; module-level NumPy arrays,
read as constants, in constants.py.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ..errors import CompileError, KernelTypeError, Location
from ..frontend.core import unsupported
from ..frontend.loops import Token
from ..frontend.source import FunctionSource
from ..frontend.values import Operand, PyObj, Weak
from ..ir.core import ArrayType, Block, ThreadIndex2DType, Value
from ..ir.simt import ops
from .access import load, store
from .constants import const_array, const_base, load_const, refuse_store
from .coords import Register
from .coords import read as read_register
from .device_calls import return_value
from .intrinsics import lower_call, math_attribute_error, resolve_annotation
from .loops import LoopLowerer
from .regions import lower_with
from .slots import compared, guard, method_call
from .ssa import Env


class FunctionLowerer(LoopLowerer):
    """Lowers one function body (the kernel's, or an inlined device function's)."""

    def child(self, src: FunctionSource, env: Env, call_path: Token) -> FunctionLowerer:
        return FunctionLowerer(self.ctx, src, env, call_path, is_kernel=False)

    def missing_attribute(self, base: PyObj, node: ast.Attribute) -> CompileError:
        """`math.fmin`: Python's `math` lacks it, `fl.math` has it (the help says so)."""
        known = math_attribute_error(base, node.attr, self.loc(node))
        return known or super().missing_attribute(base, node)

    # ------------------------------------------------------------------------ statements

    def stmt_Assign(self, node: ast.Assign) -> None:
        """`a = b`, and unpacking: of a tuple the compiler makes (`x, y = simt.grid(2)`) or of
        a tuple written out (`r, c = t.row, t.col`; every value first, so `a, b = b, a`
        swaps)."""
        source = node.value
        written = isinstance(source, ast.Tuple | ast.List)
        for target in node.targets:
            unpacks = isinstance(target, ast.Tuple | ast.List)
            if unpacks and not (written or isinstance(source, ast.Call)):
                raise unsupported(
                    "tuple unpacking", self.loc(target), help="assign each variable on its own line"
                )
            if isinstance(source, ast.Tuple) and not unpacks:
                raise unsupported(
                    "a tuple value",
                    self.loc(source),
                    help="kernels have no tuple variables: unpack it, `a, b = x, y`",
                )
        if not written or not all(isinstance(t, ast.Tuple | ast.List) for t in node.targets):
            return super().stmt_Assign(node)  # a list's message is the expression's
        assert isinstance(source, ast.Tuple | ast.List)
        values: Any = tuple(self.expr(e) for e in source.elts)  # `assign` unpacks tuples
        for target in node.targets:
            self.assign(target, values, node)

    def host_operand(self, obj: object, name: str, node: ast.expr) -> Operand:
        if isinstance(obj, Register):  # `simt.threadIdx.x`, `simt.laneid`: a plain i64
            return read_register(self.em, obj.reg, self.loc(node))
        if isinstance(obj, np.ndarray):  # a module-level array: a constant (constants.py)
            return const_array(self, obj, name, self.loc(node))
        return super().host_operand(obj, name, node)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
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

    def stmt_With(self, node: ast.With) -> None:
        lower_with(self, node)

    def store_subscript(self, target: ast.Subscript, value: Operand) -> None:
        const = const_base(self, target.value)
        if const is not None:
            raise refuse_store(const, target, self.loc(target))
        store(self, target, value, self.loc(target))

    def lower_return(self, node: ast.Return) -> None:
        if self.is_kernel:
            self.em.emit(ops.Return(self.loc(node)))
        else:
            env = dict(self.env)
            env["$ret"] = return_value(self, node)  # checked against the annotation
            assert self.em.block is not None
            self.returns.append((self.em.block, env))
        self.em.block = None

    def stmt_If(self, node: ast.If) -> None:
        slot = guard(self, node)  # `if s is not None:` on a `c.get_mut(i)` slot
        if slot is None:
            return super().stmt_If(node)
        self.lower_if(slot.branch, slot.cond, {slot.name: slot.checked})
        slot.joined(self.env)

    def lower_if(self, node: ast.If, cond: Operand, narrowed: Env | None = None) -> None:
        """`narrowed`: names the true branch sees bound otherwise (a slot known not None)."""
        assert isinstance(cond, Value)
        fn = self.ctx.fn
        then_b, else_b = fn.new_block("if.then"), fn.new_block("if.else")
        self.em.emit(ops.CondBr(cond, then_b, [], else_b, [], self.loc(node.test)))
        before = dict(self.env)
        incoming: list[tuple[Block, Env]] = []
        for block, body in ((then_b, node.body), (else_b, node.orelse)):
            self.em.block = block
            self.env = dict(before)
            if block is then_b and narrowed:
                self.env.update(narrowed)
            self.lower_body(body)
            if self.em.block is not None:
                incoming.append((self.em.block, self.env))
        self.env = self.merge(incoming, self.loc(node), label="if.end", before=before)

    # ----------------------------------------------------------------------- expressions

    def value_attribute(self, base: Operand, node: ast.Attribute) -> Operand:
        loc = self.loc(node)
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

    def lower_unary(self, kind: str, x: Operand, node: ast.UnaryOp) -> Operand:
        if kind == "pos":
            return self.em.scalar(x, self.loc(node))
        return self.em.unary(kind, x, self.loc(node))

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
                result, partial(self.condition, operand), Weak(not is_and), is_and, loc
            )
            assert isinstance(flowed, Value | Weak)
            result = flowed
        return result

    def lower_ifexp(self, node: ast.IfExp, cond: Operand) -> Operand:
        """Control flow: each arm is lowered on its own edge (so `a[i] if i < n else 0`
        reads `a` only when `i < n`), and the values join like an `if`'s variables."""
        assert isinstance(cond, Value)
        return self._select_flow(
            cond, lambda: self.expr(node.body), None, True, self.loc(node), orelse=node.orelse
        )

    def _select_flow(
        self,
        cond: Value,
        lazy: Callable[[], Operand],
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
        v = lazy()
        assert em.block is not None
        incoming.append((em.block, {**self.env, "$sel": v}))
        em.block = fixed_b
        other = short if orelse is None else self.expr(orelse)
        assert em.block is not None and other is not None
        incoming.append((em.block, {**self.env, "$sel": other}))
        joined = self.merge(incoming, loc, label="sel.end")
        return joined.pop("$sel")

    def expr_Call(self, node: ast.Call) -> Operand:
        slot = method_call(self, node)  # `c.get_mut(i)`, `s.set(v)`, `s.get()`
        return lower_call(self, node) if slot is None else slot

    def identity(
        self, node: ast.Compare, left: Any, right: Any, is_: bool, loc: Location
    ) -> Operand:
        slot = compared(left, right, is_, self)  # a slot is None at run time, out of range
        return super().identity(node, left, right, is_, loc) if slot is None else slot

    def expr_Subscript(self, node: ast.Subscript) -> Operand:
        held = self.env.get(node.value.id) if isinstance(node.value, ast.Name) else None
        if isinstance(held, tuple):  # `g[0]` of `g = simt.grid(2)`
            k = node.slice
            if not (isinstance(k, ast.Constant) and type(k.value) is int):
                raise CompileError(
                    f"`{ast.unparse(node)}`: a tuple is indexed with a literal",
                    self.loc(k),
                    help=f"write `{node.value.id}[0]`, or unpack it: `x, y = ...`",
                )
            if not -len(held) <= k.value < len(held):
                raise CompileError(
                    f"index {k.value} is out of range for a tuple of {len(held)}", self.loc(k)
                )
            return held[k.value]  # type: ignore[no-any-return]
        const = const_base(self, node.value)
        if const is not None:
            return load_const(self, node, const)
        return load(self, node, self.loc(node))

    def expr_NamedExpr(self, node: ast.NamedExpr) -> Operand:
        value = self.expr(node.value)
        self.env[node.target.id] = value
        return value
