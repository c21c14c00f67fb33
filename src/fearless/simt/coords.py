"""Raw thread coordinates, numba-cuda's names: `simt.threadIdx.x`, `simt.grid(1)`, ...

`threadIdx`, `blockIdx`, `blockDim` and `gridDim` (fields x, y, z), `laneid`, and the functions
`grid(ndim)` / `gridsize(ndim)` are host objects a kernel names; lowering reads them as PTX
special registers (`thread.reg`, as i32) widened to plain i64 integers. `warpsize` is the
integer 32 (simt/__init__.py). None of them is a ThreadIndex: they mix with other integers and
index `Slice` reads, but never open a `DisjointSlice` (simt/access.py says why, naming
`derived_from_coordinate`'s answer). `simt.thread.grid_stride(n)` is the safe loop over the
grid (simt/loops.py); its stride is `thread_count`. `simt.thread.block_stride(n)` is the safe
loop over a row per block; its stride is `block_thread_count`.
"""

from __future__ import annotations

from typing import Any, NoReturn

from .. import dtypes
from ..errors import CompileError, Location
from ..frontend.core import unsupported
from ..frontend.intrinsics import Call
from ..frontend.values import Weak
from ..ir.core import Value
from ..ir.simt import ops
from .types import host_call


class Register:
    """One coordinate, e.g. `simt.threadIdx.x` (the PTX register `tid.x`)."""

    def __init__(self, reg: str, name: str) -> None:
        self._reg = reg
        self._name = name

    @property
    def reg(self) -> str:
        return self._reg

    def __index__(self) -> NoReturn:
        host_call(self._name, "read")

    def __repr__(self) -> str:
        return self._name


class Dim3:
    """`simt.threadIdx` and its siblings: the fields `x`, `y` and `z` are plain integers."""

    def __init__(self, reg: str, name: str) -> None:
        self.x = Register(f"{reg}.x", f"{name}.x")
        self.y = Register(f"{reg}.y", f"{name}.y")
        self.z = Register(f"{reg}.z", f"{name}.z")
        self._name = name

    def __repr__(self) -> str:
        return self._name


threadIdx = Dim3("tid", "simt.threadIdx")
blockIdx = Dim3("ctaid", "simt.blockIdx")
blockDim = Dim3("ntid", "simt.blockDim")
gridDim = Dim3("nctaid", "simt.gridDim")
laneid = Register("laneid", "simt.laneid")
WARP_SIZE = 32


def grid(ndim: int) -> Any:
    """The thread's absolute position in the grid, as `numba.cuda.grid`: an int for 1, a
    tuple (x, y) for 2. A plain integer: it never opens a `DisjointSlice`."""
    host_call("simt.grid()")


def gridsize(ndim: int) -> Any:
    """The grid's extent in threads, as `numba.cuda.gridsize`: an int for 1, (x, y) for 2."""
    host_call("simt.gridsize()")


def read(em: Any, reg: str, loc: Location) -> Value:
    """The register `reg` as an i64 value (`em` is the SIMT Emitter)."""
    raw = em.emit(ops.SpecialReg(reg, loc)).result
    return em.emit(ops.Cast(raw, dtypes.i64, loc)).result  # type: ignore[no-any-return]


def thread_count(em: Any, loc: Location) -> Value:
    """nctaid.x * ntid.x: the stride of `index.advance` (the verifier checks this form)."""
    n_blocks, per_block = read(em, "nctaid.x", loc), read(em, "ntid.x", loc)
    return em.emit(ops.Binary("mul", n_blocks, per_block, loc)).result  # type: ignore[no-any-return]


def block_thread_count(em: Any, loc: Location) -> Value:
    """ntid.x * ntid.y * ntid.z: the stride of a BlockIndex's `index.advance` (verified)."""
    x, y, z = (read(em, f"ntid.{axis}", loc) for axis in "xyz")
    xy = em.emit(ops.Binary("mul", x, y, loc)).result
    return em.emit(ops.Binary("mul", xy, z, loc)).result  # type: ignore[no-any-return]


def _ndim(call: Call) -> int:
    arg = call.args[0]
    if not (isinstance(arg, Weak) and type(arg.value) is int):
        raise CompileError(
            f"`{call.name}(...)` takes the literal 1 or 2",
            call.arg_locs[0],
            code="E0061",
            label="not a literal",
            help=f"write `{call.name}(1)` for an int or `{call.name}(2)` for an (x, y) pair",
        )
    if arg.value not in (1, 2):
        raise unsupported(
            f"`{call.name}({arg.value})`",
            call.arg_locs[0],
            help=f"use `{call.name}(1)` or `{call.name}(2)`; for z read "
            "`simt.blockIdx.z * simt.blockDim.z + simt.threadIdx.z`",
        )
    return arg.value


def grid_rule(lw: Any, call: Call) -> Value | tuple[Value, ...]:
    """`simt.grid(1)`: ctaid.x * ntid.x + tid.x; `simt.grid(2)`: that pair for x and y."""
    em, loc = lw.em, call.loc
    out = []
    for axis in "xy"[: _ndim(call)]:
        base = em.emit(
            ops.Binary("mul", read(em, f"ctaid.{axis}", loc), read(em, f"ntid.{axis}", loc), loc)
        ).result
        out.append(em.emit(ops.Binary("add", base, read(em, f"tid.{axis}", loc), loc)).result)
    return out[0] if len(out) == 1 else tuple(out)


def gridsize_rule(lw: Any, call: Call) -> Value | tuple[Value, ...]:
    """`simt.gridsize(1)`: nctaid.x * ntid.x; `simt.gridsize(2)`: that pair for x and y."""
    em, loc = lw.em, call.loc
    out = [
        em.emit(
            ops.Binary("mul", read(em, f"nctaid.{a}", loc), read(em, f"ntid.{a}", loc), loc)
        ).result
        for a in "xy"[: _ndim(call)]
    ]
    return out[0] if len(out) == 1 else tuple(out)


def derived_from_block(v: Any) -> bool:
    """Whether the integer `v` is computed from `simt.blockIdx` or `simt.thread.block_id()`
    and no thread register: numba's index of one value per block, not the block id itself."""
    sources: set[str] = set()
    _sources(v, sources, 12)
    return "block" in sources and "thread" not in sources


def _sources(v: Any, found: set[str], depth: int) -> None:
    op = v.owner if isinstance(v, Value) and depth > 0 else None
    if isinstance(op, ops.SpecialReg):
        if op.reg.startswith("ctaid."):
            found.add("block")
        elif op.reg.startswith(("tid.", "laneid")):
            found.add("thread")
    elif isinstance(op, ops.BlockId):
        found.add("block")
    elif isinstance(op, ops.Binary | ops.Cast | ops.Unary):
        for x in op.operands:
            _sources(x, found, depth - 1)


def derived_from_coordinate(v: Any, depth: int = 12) -> bool:
    """Whether the integer `v` is computed from a raw coordinate (a `thread.reg`)."""
    if not isinstance(v, Value) or depth == 0:
        return False
    op = v.owner
    if isinstance(op, ops.SpecialReg):
        return True
    if isinstance(op, ops.Binary | ops.Cast | ops.Unary):
        return any(derived_from_coordinate(x, depth - 1) for x in op.operands)
    return False
