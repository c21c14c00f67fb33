"""Entry point of the frontend for SIMT kernels: a Python function -> an IR `Function`.

Parameters come from the annotations (`simt.Slice[fl.f32]`, `simt.DisjointSlice[fl.f32]`,
`simt.AtomicSlice[fl.i32]`, their 2-D forms `simt.Slice[fl.f32, 2]`, dtypes, `int`/`float`/`bool`); the body is lowered by
`lower.FunctionLowerer`. The result is the IR before any pass, plus the ABI parameter list the
runtime needs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from .. import dtypes
from ..abi import ParamKind, ParamSpec
from ..dtypes import DType
from ..errors import CompileError, Location
from ..frontend.source import FunctionSource
from ..frontend.values import Operand
from ..ir.core import ArrayType, Function, ScalarType, Type, Value
from ..ir.simt import ops
from .constants import hoist
from .emitter import Emitter
from .grid_check import check_grid
from .leader import LeaderUse, check_leaders
from .lower import FunctionLowerer
from .shared import shared
from .ssa import Context
from .sync_check import check_sync, in_unsafe_regions
from .types import ArrayAnnotation


@dataclass
class KernelIR:
    fn: Function
    params: tuple[ParamSpec, ...]
    uses_index_1d: bool
    uses_index_2d: bool = False
    # The `with simt.unsafe():` statements: the kernel is reported unsafe when there is one.
    unsafe_regions: tuple[Location, ...] = ()
    # A leader guard `simt.threadIdx.x == 0` (leader.py): the launch's block must be 1-D.
    block_1d: bool = False
    # The module-level arrays read as constants, each with the fingerprint of the bytes the
    # kernel holds (constants.py): what its cache key must hash.
    constants: tuple[tuple[Any, str], ...] = ()

    @property
    def index_dims(self) -> int:
        """The launch dimensions the thread index needs (the launch contract's index_dims):
        3 (any launch) for a kernel with no ThreadIndex, which writes no DisjointSlice by one
        (raw coordinates, atomics, `simt.unsafe()` regions only)."""
        if self.uses_index_2d:
            return 2
        return 1 if self.uses_index_1d else 3


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
    f8 = getattr(ann, "dtype", ann)
    if isinstance(f8, DType) and f8.mma_only:
        raise CompileError(
            f"`{_ann_text(arg)}`: SIMT kernels have no {f8.name}",
            loc,
            code="E0599",
            help="8-bit floats and tf32 are for the Tile track's `tile.mma` (and fp8 "
            "loads and stores); a SIMT kernel takes fp8 data as bytes (`simt.Slice[fl.u8]`)",
        )
    if isinstance(ann, ArrayAnnotation):
        kind: ParamKind = "atomic" if ann.atomic else "disjoint" if ann.disjoint else "slice"
        spec = ParamSpec(arg.arg, kind, ann.dtype, ann.ndim)
        return ArrayType(ann.dtype, ann.disjoint, ann.ndim, ann.atomic), spec
    dt = ann if isinstance(ann, DType) else dtypes.from_python_type(ann)
    if dt is not None and dt.name in ("f16", "bf16"):
        raise CompileError(
            f"`{_ann_text(arg)}`: a kernel takes no {dt.name} scalar parameter",
            loc,
            code="E0599",
            label=f"{dt.name} scalar",
            help=f"pass an f32 and convert it inside: `{arg.arg}: fl.f32` and "
            f"`fl.{dt.name}({arg.arg})` where the kernel needs {dt.name} (arrays of {dt.name} "
            f"are fine: `simt.Slice[fl.{dt.name}]`)",
        )
    if dt is None:
        help = (
            "use simt.Slice[T], simt.DisjointSlice[T], simt.AtomicSlice[T], "
            "a dtype such as fl.f32, or int/float/bool"
        )
        if getattr(ann, "__self__", None) is shared:
            help = (
                "shared memory belongs to a thread block, not to the launch: declare it in "
                f"the kernel, `{arg.arg} = simt.shared.array((256,), fl.f32)`"
            )
        raise CompileError(
            f"`{_ann_text(arg)}` is not a kernel parameter type", loc, code="E0599", help=help
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
    for arg in a.args:  # `x: float` / `n: int`: typed by Python, so weak as a literal is
        if hints.get(arg.arg) in (float, int):
            value = env[arg.arg]
            assert isinstance(value, Value)
            em.weak.add(value)
    ctx = Context(fn, em, unsafe=unsafe)
    lowerer = FunctionLowerer(ctx, src, env, is_kernel=True)
    lowerer.lower_body(tree.body)
    if em.block is not None:
        end = tree.body[-1]
        loc = src.loc(end)
        em.emit(ops.Return(loc))
    hoist(fn, ctx.constants)
    fn.remove_unreachable()
    leaders = LeaderUse()
    if not unsafe:
        in_unsafe = in_unsafe_regions(tuple(ctx.unsafe_regions))
        check_grid(fn, ctx.phased_loads)
        check_sync(fn, in_unsafe)
        leaders = check_leaders(fn, in_unsafe)
    frozen = tuple((arr, fp) for arr, _, fp in ctx.constants.values())
    return KernelIR(
        fn,
        tuple(specs),
        ctx.uses_index_1d,
        ctx.uses_index_2d,
        tuple(ctx.unsafe_regions),
        leaders.block_1d,
        frozen,
    )
