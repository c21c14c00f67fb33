"""The SIMT lowerer's state and its SSA joins: where control flow meets, values become block
arguments.

SSA is built structurally, which Python's structured control flow allows: the lowerer keeps an
environment `name -> Operand`; an `if` lowers both arms from a copy and `merge` joins them at a
block whose arguments are the variables that differ, and loops (loops.py) join at their header.
A value whose type differs between the paths is an error, unless it is a loop-carried variable
whose type was guessed from a literal: then the loop is lowered again (frontend/loops.py).

`SsaLowerer` is what the handlers of element access (access.py) and calls (intrinsics.py) see of
the lowerer; lower.py's `FunctionLowerer` is the whole of it.
"""

from __future__ import annotations

import ast
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import dtypes
from ..errors import CompileError, KernelTypeError, Location
from ..frontend.core import Lowerer
from ..frontend.loops import LoopTypes, Token
from ..frontend.source import FunctionSource
from ..frontend.values import Operand, PyObj, Undefined, Weak
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
from ..ir.simt import ops
from .emitter import Emitter, value_type

Env = dict[str, Operand]


@dataclass
class LoopFrame:
    breaks: list[tuple[Block, Env]] = field(default_factory=list)
    continues: list[tuple[Block, Env]] = field(default_factory=list)


@dataclass
class Context:
    """State shared by a kernel and every device function inlined into it."""

    fn: Function
    em: Emitter
    # `unsafe=True` kernels: raw indexed writes to DisjointSlices, no device bounds checks.
    unsafe: bool = False
    call_stack: list[Any] = field(default_factory=list)  # the device functions inlined
    loop_types: LoopTypes[Type] = field(default_factory=LoopTypes)
    uses_index_1d: bool = False
    uses_index_2d: bool = False
    tile_rows: int = 0  # `simt.thread.tile_index_2d`'s row count (calls.claim_index)
    uses_block_rows: bool = False  # `simt.thread.block_stride` (calls.claim_index)
    # `with simt.unsafe():` statements (regions.py): the spans seen, and how many enclose here.
    unsafe_regions: list[Location] = field(default_factory=list)
    unsafe_depth: int = 0
    shared_bytes: int = 0  # the shared arrays declared so far (shared.py)
    # Module-level NumPy arrays read as constants (constants.py): id -> (array, its op, the
    # fingerprint of the bytes it froze), and their bytes so far.
    constants: dict[int, tuple[Any, ops.ConstArray, str]] = field(default_factory=dict)
    const_bytes: int = 0
    # `simt.cg.this_grid().sync()` lowered so far (cooperative.py), and the loads it let read
    # another thread's element (access.py), which grid_check.py judges on the CFG.
    grid_synced: bool = False
    phased_loads: list[Any] = field(default_factory=list)

    @property
    def witness_off(self) -> bool:
        """Whether a DisjointSlice may be accessed at any index here (still bounds-checked
        inside `simt.unsafe()`; unchecked in an `unsafe=True` kernel)."""
        return self.unsafe or self.unsafe_depth > 0

    def __post_init__(self) -> None:
        self.em.on_mismatch = lambda v, wanted: self.loop_types.retry_if_guessed(
            v, ScalarType(wanted)
        )


class SsaLowerer(Lowerer[Operand]):
    """Lowers one function body (the kernel's, or an inlined device function's) into a CFG."""

    RETURN_HELP = "write results into a `DisjointSlice` parameter instead"
    LOOP_HELP = "kernels loop with `for i in range(start, stop, step)` or `while`"
    VALUE_KINDS = "scalars, arrays and thread indices"
    BINARY_KINDS = frozenset(
        ["add", "sub", "mul", "div", "floordiv", "mod", "pow", "shl", "shr", "and", "or", "xor"]
    )

    def __init__(
        self,
        ctx: Context,
        src: FunctionSource,
        env: Env,
        call_path: Token = (),
        is_kernel: bool = True,
    ) -> None:
        super().__init__(src, env, call_path, is_kernel)
        self.ctx = ctx
        self.loops: list[LoopFrame] = []
        self.returns: list[tuple[Block, Env]] = []

    @abstractmethod
    def child(self, src: FunctionSource, env: Env, call_path: Token) -> SsaLowerer:
        """A lowerer for a device function's body inlined here (same context and emitter)."""

    @property
    def em(self) -> Emitter:
        return self.ctx.em

    @property
    def loop_types(self) -> LoopTypes[Type]:
        return self.ctx.loop_types

    def reachable(self) -> bool:
        return self.em.block is not None

    def checkpoint(self) -> Callable[[], None]:
        fn, block = self.ctx.fn, self.em.block
        assert block is not None
        n_blocks, n_ops, env = len(fn.blocks), len(block.ops), dict(self.env)

        def restore() -> None:
            del fn.blocks[n_blocks:]
            del block.ops[n_ops:]
            self.env = env
            self.em.block = block

        return restore

    # ---------------------------------------------------------------------- typing rules

    def binary(self, kind: str, a: Operand, b: Operand, loc: Location) -> Operand:
        return self.em.binary(kind, a, b, loc)

    def compare(self, pred: str, a: Operand, b: Operand, loc: Location) -> Operand:
        return self.em.compare(pred, a, b, loc)

    def condition(self, node: ast.expr) -> Value | Weak:
        return self.em.truth(self.expr(node), self.loc(node))

    # --------------------------------------------------------------------------- merging

    def coerce(
        self,
        v: Operand | None,
        t: Type,
        name: str,
        loc: Location,
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
            if isinstance(t, ScalarType) and em.is_weak(v) and em.adopts(v, t.dtype):
                return em.cast(v, t.dtype, loc)
        # A mismatch: re-lower the loop whose header type was only a guess, else report.
        vt = value_type(v)
        wanted = vt if not isinstance(vt, ThreadIndexType) else ScalarType(dtypes.i64)
        for guess in [header_arg, *(others or [])]:
            self.loop_types.retry_if_guessed(guess, wanted)
        if name == "$sel":  # the value of `a if c else b` (lower.py)
            raise KernelTypeError(
                f"mismatched types in the arms of a conditional expression: {t} and {vt}",
                v.loc if isinstance(v, Value) else loc,
                label=f"this arm is {vt}",
                help=f"convert one arm explicitly, e.g. `fl.{_dtype_name(t)}(...)`",
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
            if any(v is None or isinstance(v, Undefined | tuple) for v in vals):
                joined[name] = Undefined(name, loc)
                continue
            if any(isinstance(v, PyObj) for v in vals):
                if all(isinstance(v, PyObj) and v.obj is first.obj for v in vals):  # type: ignore[union-attr]
                    joined[name] = first  # type: ignore[assignment]
                    continue
                joined[name] = Undefined(name, loc)
                continue
            prior = (before or {}).get(name)
            if (
                isinstance(prior, Value)
                and isinstance(prior.type, ScalarType)
                and not em.is_weak(prior)  # a weak value takes the type it meets, as a literal
            ):
                t: Type = prior.type  # a variable keeps the type it had before the branch
            else:
                t = self._join_type(vals)  # type: ignore[arg-type]
            no_witness_2d_merge(t, name, loc)
            for i, (block, _) in enumerate(incoming):
                em.block = block
                branch_args[i].append(self.coerce(vals[i], t, name, loc, others=vals))  # type: ignore[arg-type]
            joined[name] = arg = join.add_arg(t, loc, name)
            if all(isinstance(v, Weak) or em.is_weak(v) for v in vals):
                em.mark_weak(arg, *vals)  # type: ignore[arg-type]  # `lo if c else hi`
        for (block, _), args in zip(incoming, branch_args, strict=True):
            em.block = block
            em.emit(ops.Br(join, args, loc))
        em.block = join
        return joined

    def _join_type(self, vals: list[Value | Weak]) -> Type:
        strong = [v for v in vals if isinstance(v, Value)]
        if any(not self.em.is_weak(v) for v in strong):  # a weak value adopts the other's type
            strong = [v for v in strong if not self.em.is_weak(v)]
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
        # Let `coerce` raise the right error (a retry for guessed types, else a type error).
        return strong[0].type


def no_witness_2d_merge(t: Type, name: str, loc: Location) -> None:
    """A 2-D ThreadIndex is one value per kernel: it never flows through a block argument."""
    if isinstance(t, ThreadIndex2DType):
        raise CompileError(
            f"`{name}` holds a 2-D ThreadIndex assigned on more than one path",
            loc,
            code="E0602",
            help="call `simt.thread.index_2d()` once, at the top of the kernel, and keep it "
            "in one variable",
        )
    if isinstance(t, ArrayType):  # arrays (parameters, shared arrays) are not SSA values
        raise CompileError(
            f"`{name}` holds an array assigned on more than one path",
            loc,
            label="a different array on another path",
            help="index each array where it is chosen, e.g. `v = a[i]` in one branch and "
            "`v = b[i]` in the other",
        )


def _dtype_name(t: Type) -> str:
    return t.dtype.name if isinstance(t, ScalarType) else str(t)
