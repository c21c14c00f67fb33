"""Entry point of the frontend for SIMT kernels: a Python function -> an IR `Function`.

Parameters come from the annotations (`simt.Slice[fl.f32]`, `simt.DisjointSlice[fl.f32]`,
their 2-D forms `simt.Slice[fl.f32, 2]`, dtypes, `int`/`float`/`bool`); the body is lowered by
`lower.FunctionLowerer`. The result is the IR before any pass, plus the ABI parameter list the
runtime needs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from .. import dtypes
from ..abi import ParamSpec
from ..dtypes import DType
from ..errors import CompileError
from ..frontend.source import FunctionSource
from ..frontend.values import Operand
from ..ir import ops
from ..ir.core import ArrayType, Function, ScalarType, Type
from .emitter import Emitter
from .lower import FunctionLowerer
from .ssa import Context
from .types import ArrayAnnotation


@dataclass
class KernelIR:
    fn: Function
    params: tuple[ParamSpec, ...]
    uses_index_1d: bool
    uses_index_2d: bool = False

    @property
    def index_dims(self) -> int:
        """The launch dimensions the thread index needs (the launch contract's index_dims)."""
        return 2 if self.uses_index_2d else 1


def resolve_param(
    src: FunctionSource, arg: ast.arg, hints: dict[str, Any]
) -> tuple[Type, ParamSpec]:
    ann = hints.get(arg.arg)
    loc = src.loc(arg)
    if ann is None:
        raise CompileError(
            f"parameter `{arg.arg}` needs a type annotation",
            loc,
            code="E0599",
            label="missing annotation",
            help=f"annotate it, e.g. `{arg.arg}: simt.Slice[fl.f32]` for an input array, "
            f"`{arg.arg}: simt.DisjointSlice[fl.f32]` for an output, or `{arg.arg}: fl.f32`",
        )
    if isinstance(ann, ArrayAnnotation):
        spec = ParamSpec(arg.arg, "disjoint" if ann.disjoint else "slice", ann.dtype, ann.ndim)
        return ArrayType(ann.dtype, ann.disjoint, ann.ndim), spec
    dt = ann if isinstance(ann, DType) else dtypes.from_python_type(ann)
    if dt is None or dt.name in ("f16", "bf16"):
        raise CompileError(
            f"`{_ann_text(arg)}` is not a kernel parameter type",
            loc,
            code="E0599",
            help="use simt.Slice[T], simt.DisjointSlice[T], a dtype such as fl.f32, or int/float/bool",
        )
    return ScalarType(dt), ParamSpec(arg.arg, "scalar", dt)


def _ann_text(arg: ast.arg) -> str:
    return ast.unparse(arg.annotation) if arg.annotation is not None else arg.arg


def build_kernel_ir(
    src: FunctionSource, hints: dict[str, Any], *, unsafe: bool = False
) -> KernelIR:
    tree = src.tree
    a = tree.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
        raise CompileError(
            "kernel parameters must be plain positional parameters",
            src.loc(tree),
            code="E0061",
            help="remove *args, **kwargs, keyword-only parameters and defaults",
        )
    fn = Function(tree.name, src.loc(tree))
    entry = fn.new_block("entry")
    specs: list[ParamSpec] = []
    env: dict[str, Operand] = {}
    for arg in a.args:
        t, spec = resolve_param(src, arg, hints)
        env[arg.arg] = entry.add_arg(t, src.loc(arg), arg.arg)
        specs.append(spec)
    em = Emitter(fn)
    em.block = entry
    ctx = Context(fn, em, unsafe=unsafe)
    lowerer = FunctionLowerer(ctx, src, env, is_kernel=True)
    lowerer.lower_body(tree.body)
    if em.block is not None:
        end = tree.body[-1]
        loc = src.loc(end)
        em.emit(ops.Return(loc))
    fn.remove_unreachable()
    return KernelIR(fn, tuple(specs), ctx.uses_index_1d, ctx.uses_index_2d)
