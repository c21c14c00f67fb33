"""`c.get_mut(i)`, the cuda-oxide form of a DisjointSlice write, as compile-time sugar.

    if (s := c.get_mut(i)) is not None:     # lowers as    if i < len(c):
        s.set(a[i] + b[i])                  #                  c[i] = a[i] + b[i]

cuda-oxide's `get_mut` returns `Option<&mut T>`; here no run-time object exists. `get_mut`
applies the rules of `c[i] = v` at once (access.py: only at the thread's own index, E0601; never
on a `Slice`, E0594) and gives a `Slot`, a compile-time object holding the array, the index and
its in-bounds condition (`i < len(c)`; `t.row < c.shape[0] and t.col < c.shape[1]` in 2-D). The
slot is None exactly when that condition is false, so `s is not None` is the condition itself,
and an `if` on it (`guard`, lowered by lower.py) is an `if` on the condition whose not-None
branch holds the slot `checked`. Only a checked slot is used: `s.set(v)` and `s.get()` are
`c[i] = v` and `c[i]`, lowered by access.py with the same rules and the same IR, so the bounds
pass proves their checks from the guard exactly as it does for the hand-written
`if i < len(c):`. A use where the slot may be None is E0381, as a variable that may be
unassigned is.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass

from ..errors import CompileError
from ..frontend.values import Operand, PyObj, Undefined, Weak
from ..ir.core import ArrayType, Value
from ..ir.simt import ops
from .access import element_indices, load, plain_atomic_access, read_only, store
from .ssa import Env, SsaLowerer


@dataclass(frozen=True, eq=False)
class Slot:
    """`c.get_mut(i)`: element `i` of `c` when `in_bounds` holds, else None."""

    array: Value
    index: Operand
    in_bounds: Value
    at: ast.Subscript  # `c[i]` written where `get_mut` was called: names and locations
    call: str  # `c.get_mut(i)`, for messages
    checked: bool = False  # under `if s is not None:`, where it is not None


def method_call(lw: SsaLowerer, node: ast.Call) -> Operand | None:
    """`c.get_mut(i)`, `s.set(v)` or `s.get()`; None when `node` is another call."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in ("get_mut", "set", "get")):
        return None
    if isinstance(func.value, ast.Name) and func.value.id not in lw.env:
        return None  # a module or a host object (`simt.atomic...`): not a kernel value
    base = lw.expr(func.value)
    if func.attr == "get_mut" and isinstance(base, Value) and isinstance(base.type, ArrayType):
        return PyObj(get_mut(lw, base, node), ast.unparse(node))
    if isinstance(base, PyObj) and isinstance(base.obj, Slot):
        return _use(lw, base.obj, node)
    return None


def get_mut(lw: SsaLowerer, arr: Value, node: ast.Call) -> Slot:
    assert isinstance(node.func, ast.Attribute) and isinstance(arr.type, ArrayType)
    loc = lw.loc(node)
    name = arr.name or ast.unparse(node.func.value)
    t = arr.type
    if len(node.args) != 1 or node.keywords:
        raise CompileError(
            f"`{name}.get_mut` takes one argument, the thread's own index",
            loc,
            code="E0061",
            help=f"write `{name}.get_mut(i)` with `i = simt.thread.index_"
            f"{'1d' if t.ndim == 1 else '2d'}()`",
        )
    if t.atomic and not lw.ctx.witness_off:
        raise plain_atomic_access(name, True, loc, t.dtype.name, t.ndim)
    if t.static_shape is not None:
        kind = "shared" if t.shared is not None else "local"
        raise CompileError(
            f"`{name}` is a {kind} array: `get_mut` is a method of DisjointSlice parameters",
            loc,
            help=f"index it: `{name}[k] = v`",
        )
    if not (t.disjoint or t.atomic):
        raise read_only(arr, name, f"cannot take a mutable slot with `{ast.unparse(node)}`", loc)
    at = ast.copy_location(ast.Subscript(node.func.value, node.args[0], ast.Load()), node)
    index = lw.expr(node.args[0])
    # The lengths first, then the indices: the order `i < len(c)` lowers in.
    lens = [lw.em.emit(ops.ArrayLen(arr, loc, axis=axis)).result for axis in range(t.ndim)]
    # The witness rule of `c[i] = v`, now: a slot opens only this thread's own element.
    axes = element_indices(lw, arr, at, write=True, pre=index, slot=True)
    em = lw.em
    in_bounds: Value | Weak | None = None
    for i, n in zip(axes, lens, strict=True):
        lt = em.compare("lt", i, n, loc)
        in_bounds = lt if in_bounds is None else em.binary("and", in_bounds, lt, loc)
    assert isinstance(in_bounds, Value)
    return Slot(arr, index, in_bounds, at, ast.unparse(node))


def _use(lw: SsaLowerer, slot: Slot, node: ast.Call) -> Operand:
    """`s.set(v)` (gives None) or `s.get()` on a slot known not to be None."""
    assert isinstance(node.func, ast.Attribute)
    loc = lw.loc(node)
    s = ast.unparse(node.func.value)
    method = node.func.attr
    if not slot.checked:
        raise CompileError(
            f"`{s}` may be None here: `{slot.call}` is None when the index is out of range",
            loc,
            code="E0381",
            label="possibly None",
            help=f"use it under `if {s} is not None:`",
        )
    arity = 1 if method == "set" else 0
    if len(node.args) != arity or node.keywords:
        form = f"`{s}.set(v)`" if method == "set" else f"`{s}.get()`"
        raise CompileError(f"write {form}", loc, code="E0061", label="wrong arguments")
    where = (slot.array, slot.index)
    if method == "get":
        return load(lw, slot.at, loc, at=where)
    store(lw, slot.at, lw.expr(node.args[0]), loc, at=where)
    return PyObj(None, "None")


def compared(left: Operand, right: Operand, is_: bool, lw: SsaLowerer) -> Value | None:
    """`s is None` / `s is not None` of a slot: its condition at run time; else None."""
    for a, b in ((left, right), (right, left)):
        if isinstance(a, PyObj) and isinstance(a.obj, Slot):
            if not (isinstance(b, PyObj) and b.obj is None):
                return None
            cond = a.obj.in_bounds
            if not is_:
                return cond
            negated = lw.em.unary("not", cond, cond.loc)
            assert isinstance(negated, Value)
            return negated
    return None


def slot_test(test: ast.expr) -> tuple[ast.expr, str, bool] | None:
    """`s is not None` or `(s := c.get_mut(i)) is None` as an `if` test: (the slot's
    expression, its name, whether the test is `is not`); None for any other test."""
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is | ast.IsNot)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return None
    left = test.left
    if isinstance(left, ast.Name):
        return left, left.id, isinstance(test.ops[0], ast.IsNot)
    if isinstance(left, ast.NamedExpr):
        value = left.value
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "get_mut"
        ):
            return left, left.target.id, isinstance(test.ops[0], ast.IsNot)
    return None


@dataclass(frozen=True)
class Guard:
    """An `if` on a slot, as the `if` on its in-bounds condition that lowers it: `branch` has
    the not-None body first; `checked` is the slot for that body, bound to `name`."""

    branch: ast.If
    cond: Value
    name: str
    slot: PyObj
    checked: PyObj

    def joined(self, env: Env) -> None:
        """After the `if`: where both branches went on, the slot may be None again (the merge
        of its two forms is unassigned); where only one did, it keeps that branch's form."""
        if isinstance(env.get(self.name), Undefined):
            env[self.name] = self.slot


def guard(lw: SsaLowerer, node: ast.If) -> Guard | None:
    """`if s is not None: ... else: ...` (or `is None`, or with `:=`) on a slot; None when the
    test is not such a test (the `if` is lowered as any other)."""
    test = slot_test(node.test)
    if test is None:
        return None
    expr, name, is_not = test
    held = lw.env.get(name) if isinstance(expr, ast.Name) else lw.expr(expr)  # `:=` binds
    if not (isinstance(held, PyObj) and isinstance(held.obj, Slot)):
        if isinstance(expr, ast.Name):
            return None
        raise CompileError(
            f"`{ast.unparse(expr)}` is not a DisjointSlice's slot",
            lw.loc(expr),
            help="`get_mut` is a method of `simt.DisjointSlice` parameters",
        )
    slot = held.obj
    checked = PyObj(dataclasses.replace(slot, checked=True), held.name)
    # The not-None body runs on the true edge of the condition: the bounds pass learns from
    # the true edge of `<`, so it proves the accesses of `s.set`/`s.get` there.
    some, none = (node.body, node.orelse) if is_not else (node.orelse, node.body)
    branch = ast.copy_location(ast.If(node.test, some, none), node)
    return Guard(branch, slot.in_bounds, name, held, checked)
