"""Block-scoped shared memory and the block barrier: `simt.shared.array`, `simt.syncthreads`,
`simt.thread.block_index_1d`.

    s = simt.shared.array((256,), fl.f32)    # one array per thread block, static shape
    j = simt.thread.block_index_1d()         # this thread's slot: opens `s` for writing
    s[j] = x[i]
    simt.syncthreads()                       # every thread of the block waits here
    v = s[(int(j) + 1) % 256]                # other slots: only after a barrier

The rules written here are the ones a single statement shows: a shared array has a constant
shape (1-D or 2-D, at most `MAX_SHARED_BYTES` per kernel) of a numeric dtype, and a thread
writes it only at its own `block_index_1d()` (E0631, `access.py` calls `check_store`). Which
reads must follow a barrier, and that a barrier stands where every thread of the block
reaches it, are properties of paths: `sync_check.py` checks them on the kernel's CFG.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ..dtypes import DType
from ..errors import CompileError, KernelTypeError, Location, SafetyError
from ..frontend.intrinsics import Call
from ..frontend.values import Operand, PyObj, Weak
from ..ir.core import ArrayType, ThreadIndex2DType, ThreadIndexType, Value
from ..ir.simt import ops
from .ssa import SsaLowerer
from .types import host_call

# The static shared memory a kernel may declare: 48 KiB, what every GPU gives a block without
# an opt-in (dynamic shared memory above it is not offered).
MAX_SHARED_BYTES = 48 * 1024
# A thread's local arrays: registers when indexed by constants, else local memory.
MAX_LOCAL_BYTES = 4096
SHARED_DTYPES = frozenset(
    ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64")
)


class _Shared:
    """`simt.shared`: block-scoped shared memory, meaningful only inside kernels."""

    def array(self, shape: Any, dtype: Any) -> Any:
        """`simt.shared.array((n,), fl.f32)`: one array per thread block (numba's name)."""
        host_call("simt.shared.array()")

    def __repr__(self) -> str:
        return "simt.shared"


shared = _Shared()


def syncthreads() -> NoReturn:
    """`simt.syncthreads()`: wait until every thread of the block arrives (numba's name)."""
    host_call("simt.syncthreads()")


def static_array(call: Call, kind: str) -> tuple[tuple[int, ...], DType, int]:
    """(shape, dtype, bytes) of `simt.<kind>.array(shape, dtype)`: constant positive extents,
    1 or 2 of them, and a numeric dtype (E0630 otherwise)."""
    shape_arg, dtype_arg = call.args
    items = shape_arg if isinstance(shape_arg, tuple) else (shape_arg,)
    dims: list[int] = []
    for x in items:
        v = x.value if isinstance(x, Weak) else x.obj if isinstance(x, PyObj) else None
        if type(v) is not int or v < 1:
            raise CompileError(
                f"`simt.{kind}.array` needs a shape of constant positive integers",
                call.arg_loc(0),
                code="E0630",
                label="not a constant shape",
                help=f"{kind} memory is allocated when the kernel is compiled: write the shape "
                f"as literals or module constants, e.g. `simt.{kind}.array((256,), fl.f32)`",
            )
        dims.append(v)
    if not 1 <= len(dims) <= 2:
        raise CompileError(
            f"a {kind} array has 1 or 2 dimensions, not {len(dims)}",
            call.arg_loc(0),
            code="E0630",
            help="flatten it: index `s[r * w + c]`",
        )
    dt = dtype_arg.obj if isinstance(dtype_arg, PyObj) else None
    if not isinstance(dt, DType) or dt.name not in SHARED_DTYPES:
        what = f"`{dt.name}`" if isinstance(dt, DType) else "not a dtype"
        raise KernelTypeError(
            f"a {kind} array cannot hold elements of {what}",
            call.arg_loc(1),
            code="E0630",
            help="use one of " + ", ".join(f"fl.{d}" for d in sorted(SHARED_DTYPES)),
        )
    size = dt.itemsize
    for d in dims:
        size *= d
    return tuple(dims), dt, size


def shared_array_rule(lw: SsaLowerer, call: Call) -> Value:
    """`simt.shared.array(shape, dtype)`: a `shared.alloc` of a constant shape."""
    dims, dt, size = static_array(call, "shared")
    lw.ctx.shared_bytes += size
    if lw.ctx.shared_bytes > MAX_SHARED_BYTES:
        raise CompileError(
            f"this kernel's shared arrays take {lw.ctx.shared_bytes} bytes, more than the "
            f"{MAX_SHARED_BYTES} a block has",
            call.loc,
            code="E0630",
            help="use smaller shared arrays (or fewer of them)",
        )
    return lw.em.emit(ops.SharedAlloc(dt, dims, call.loc)).result


class _Local:
    """`simt.local`: arrays private to a thread, meaningful only inside kernels."""

    def array(self, shape: Any, dtype: Any) -> Any:
        """`simt.local.array((n,), fl.f32)`: one array per thread (numba's name). Indexed by
        constants (or a `range` loop of constant bounds) it lives in registers."""
        host_call("simt.local.array()")

    def __repr__(self) -> str:
        return "simt.local"


local = _Local()


def local_array_rule(lw: SsaLowerer, call: Call) -> Value:
    """`simt.local.array(shape, dtype)`: a `local.alloc`, read and written by its thread alone
    (at any index, bounds-checked), so no rule of shared memory applies."""
    dims, dt, size = static_array(call, "local")
    if size > MAX_LOCAL_BYTES:
        raise CompileError(
            f"this local array takes {size} bytes, more than the {MAX_LOCAL_BYTES} a thread may "
            "declare",
            call.loc,
            code="E0630",
            help="keep per-thread arrays small (they are meant for registers), or stage the "
            "data in `simt.shared.array`",
        )
    return lw.em.emit(ops.LocalAlloc(dt, dims, call.loc)).result


def block_index_rule(lw: SsaLowerer, call: Call) -> Value:
    """`simt.thread.block_index_1d()`: the witness of 1-D shared memory (`block_index_2d`
    is in intrinsics.py)."""
    return lw.em.emit(ops.BlockIndex1D(call.loc)).result


def syncthreads_rule(lw: SsaLowerer, call: Call) -> Operand:
    """`simt.syncthreads()`: a `barrier`; `sync_check.py` checks that every thread reaches it."""
    lw.em.emit(ops.Barrier(call.loc))
    return PyObj(None, "None")


def is_block_index(x: Operand) -> bool:
    return isinstance(x, Value) and isinstance(x.type, ThreadIndexType) and x.type.block


def is_block_index_2d(x: Operand) -> bool:
    return isinstance(x, Value) and isinstance(x.type, ThreadIndex2DType) and x.type.block


def check_store(lw: SsaLowerer, arr: Value, name: str, idx: list[Operand], loc: Location) -> None:
    """E0631: a thread writes shared memory only at its own slot, `block_index_1d()` itself."""
    assert isinstance(arr.type, ArrayType)
    if lw.ctx.witness_off or (len(idx) == 1 and is_block_index(idx[0])):
        return
    if len(idx) == 1 and is_block_index_2d(idx[0]):
        return
    raise SafetyError(
        f"`{name}` is shared memory: a thread writes it only at its own slot",
        loc,
        code="E0631",
        label="not this thread's slot",
        notes=["another thread of the block may read or write this slot at the same time"],
        help=f"write `{name}[j]` with `j = simt.thread.block_index_1d()` (a 2-D array: "
        f"`{name}[t]`, `t = simt.thread.block_index_2d()`, or `block_index_2d(k)` for the "
        "thread's k-th row of a taller tile); to combine the "
        'block\'s values use `simt.block.reduce(v, "sum")`, or write inside '
        "`with simt.unsafe():`",
    )
