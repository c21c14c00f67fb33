"""Device functions (`@simt.device`) in kernels: a call is inlined at the call site, its body
lowered with the caller's emitter and its arguments bound to the parameters, so the witness
rules hold through it unchanged (a DisjointSlice passed on keeps its rules). Each argument is
checked against its parameter's annotation, a `return` against the return annotation, and a
function that returns a value must return one on every path. Recursion is rejected.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..errors import CompileError, KernelTypeError, Location
from ..frontend.source import FunctionSource
from ..frontend.values import Operand, PyObj
from ..ir.core import ArrayType, ScalarType, ThreadIndexType, Value
from .ssa import SsaLowerer
from .types import ArrayAnnotation, DeviceFunction


def inline(lw: SsaLowerer, dev: Any, node: ast.Call, loc: Location) -> Operand:
    """Lower a call of a `@simt.device` function by inlining its body here."""
    ctx = lw.ctx
    if dev in ctx.call_stack:
        chain = " -> ".join(d.name for d in [*ctx.call_stack, dev])
        raise CompileError(
            f"recursive call of device function `{dev.name}` ({chain})",
            loc,
            code="E0604",
            help="device functions are inlined; rewrite the recursion as a loop",
        )
    src = dev.source()
    params = src.tree.args
    if params.vararg or params.kwarg or params.kwonlyargs or params.defaults:
        raise CompileError(
            f"device function `{dev.name}` must take plain positional parameters",
            src.loc(src.tree),
            code="E0061",
        )
    names = [a.arg for a in params.args]
    if len(node.args) != len(names):
        raise CompileError(
            f"`{dev.name}` takes {len(names)} argument{'s' if len(names) != 1 else ''} "
            f"but {len(node.args)} were given",
            loc,
            code="E0061",
        )
    hints = dev.annotations()
    env: dict[str, Operand] = {}
    for name, arg_node in zip(names, node.args, strict=True):
        value = lw.expr(arg_node)
        ann = hints.get(name)
        aloc = lw.loc(arg_node)
        if isinstance(ann, ArrayAnnotation):
            if not (isinstance(value, Value) and isinstance(value.type, ArrayType)):
                raise KernelTypeError(f"`{dev.name}` expects an array for `{name}`", aloc)
            if value.type != ArrayType(ann.dtype, ann.disjoint, ann.ndim, ann.atomic):
                raise KernelTypeError(
                    f"`{dev.name}` expects `{name}: {ann!r}`, found `{value.type}`"
                    + (
                        ": a DisjointSlice cannot be passed as a Slice"
                        if value.type.disjoint and not ann.disjoint
                        else ""
                    ),
                    aloc,
                    help="other threads write a DisjointSlice, so it cannot be read as a Slice",
                )
        elif ann is not None:
            dt = ann if isinstance(ann, DType) else dtypes.from_python_type(ann)
            if dt is not None:
                v = lw.em.scalar(value, aloc)
                forged = isinstance(v, Value) and v.type != ScalarType(dt)
                index_as_i64 = (
                    isinstance(value, Value)
                    and isinstance(value.type, ThreadIndexType)
                    and dt == dtypes.i64
                )
                weak = lw.em.is_weak(v) and isinstance(v, Value) and lw.em.adopts(v, dt)
                if forged and not index_as_i64 and not weak:
                    assert isinstance(v, Value)
                    raise KernelTypeError(
                        f"`{dev.name}` expects `{name}: {dt.name}`, found {v.dtype.name}",
                        aloc,
                        help=f"convert the argument: `fl.{dt.name}(...)`",
                    )
                value = lw.em.as_value(v, aloc, dt)
        env[name] = value
    ctx.call_stack.append(dev)
    try:
        sub = lw.child(src, env, (*lw.call_path, id(node)))
        sub.lower_body(src.tree.body)
        if lw.em.block is not None:
            sub.returns.append((lw.em.block, {"$ret": PyObj(None, "None")}))
        rets = [(b, {"$ret": e["$ret"]}) for b, e in sub.returns]
        _every_path_returns(dev, src, [e["$ret"] for _, e in rets])
        joined = lw.merge(rets, loc, label=f"{dev.name}.ret")
    finally:
        ctx.call_stack.pop()
    return joined.get("$ret", PyObj(None, "None"))


def _return_dtype(dev: DeviceFunction) -> DType | None:
    """The scalar dtype a device function's return annotation names (`-> fl.f32`, `-> int`),
    if it has one (a string annotation is evaluated as its parameters' are)."""
    func = dev.func
    ann = inspect.signature(func).return_annotation
    if isinstance(ann, str):
        scope = getattr(func, "__fearless_scope__", None)
        try:
            ann = eval(ann, func.__globals__, scope)
        except Exception as exc:
            src = dev.source()
            raise CompileError(
                f"cannot resolve the return annotation `{ann}`: {exc}",
                src.loc(src.tree.returns or src.tree),
                code="E0599",
            ) from None
    if ann is inspect.Signature.empty or ann is None or ann is type(None):
        return None
    return ann if isinstance(ann, DType) else dtypes.from_python_type(ann)


def return_value(lw: SsaLowerer, node: ast.Return) -> Operand:
    """What a device function's `return` gives its caller: with a return annotation of a
    dtype, a value of that dtype (a literal or an `int`/`float` parameter adopts it, as an
    argument does its parameter's); another type is E0308 at the `return`, as no value
    converts silently."""
    if node.value is None:
        return PyObj(None, "None")
    value = lw.expr(node.value)
    dev = lw.ctx.call_stack[-1]
    dt = _return_dtype(dev)
    if dt is None:
        return value
    loc = lw.loc(node.value)
    v = lw.em.scalar(value, loc, "return value")
    weak = lw.em.is_weak(v) and isinstance(v, Value) and lw.em.adopts(v, dt)
    if isinstance(v, Value) and v.type != ScalarType(dt) and not weak:
        raise KernelTypeError(
            f"`{dev.name}` returns {dt.name} (its annotation), but this value is {v.dtype.name}",
            loc,
            label=f"expected {dt.name}",
            help=f"convert it: `return {_spelled(dt)}(...)`, or annotate `-> {_spelled(v.dtype)}`",
        )
    return lw.em.as_value(v, loc, dt)


def _spelled(dt: DType) -> str:
    """How a kernel names `dt`: `fl.f32`, `fl.bool_`."""
    return "fl.bool_" if dt.is_bool else f"fl.{dt.name}"


def _every_path_returns(dev: DeviceFunction, src: FunctionSource, values: list[Operand]) -> None:
    """A device function that returns a value returns one on every path: one that can end
    without (a bare `return`, or the end of its body) is E0308 at its `def`."""
    none = [isinstance(v, PyObj) and v.obj is None for v in values]
    declared = _return_dtype(dev)
    if not any(none) or (all(none) and declared is None):
        return
    raise KernelTypeError(
        f"device function `{dev.name}` does not return a value on every path",
        src.loc(src.tree),
        label="some path ends without `return <value>`",
        notes=[
            "its caller gets the value of whichever path runs: a path that reaches the end "
            "of the body, or a bare `return`, would give none"
        ],
        help="end every path with `return <value>`"
        + (f" (a value of {declared.name}, as annotated)" if declared is not None else "")
        + ": after an `if` whose branch returns, a `return` for the other case",
    )
