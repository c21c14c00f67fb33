"""Tile IR bytecode for `tile.gather`, `tile.scatter` and the atomics: pointer tiles; and for
`tile.atomic_store_<mode>`, a partition view.

A partition view names whole tiles; these ops name elements, so they go through a tile of
pointers, as cuTile Python lowers them. Per axis the coordinates become u64 (a negative i32
coordinate, sign-extended, is a huge unsigned one), the live mask is `coordinate < extent` on
every axis (and the user's mask), the offset is the sum of coordinate * stride, and `offset`
moves the array's base pointer, broadcast to the tile's shape, by it. Loads are `load_ptr_tko`
with the mask and a padding tile; scatters `store_ptr_tko`, relaxed at device scope (blocks may
write one element: each store lands whole); the atomics `atomic_rmw_tko` / `atomic_cas_tko`,
at device scope with the op's memory order (acq_rel by default, as cuTile Python's; relaxed
lets tileiras emit vector `red` instructions for an accumulation). Every op takes the current token and makes the
next one, so they stay ordered with the loads and stores around them.

`tile.atomic_store_<mode>` names a whole tile, as a load or store does: `atomic_red_view_tko`
(bytecode 13.3 and later) on the array's partition view in tiles of the value's shape, relaxed
(the only order Tile IR gives it) at device scope, with the view dropping what falls outside;
its modes are atomic_rmw_tko's (ADDF for floats, UMAX / UMIN for unsigned ints).
"""

from __future__ import annotations

from typing import Any

from ...ir.tile import ops
from ...ir.tile.types import TileType, array_type, tile_type
from .registry import lowers

_RMW_MODES = {"add": "ADD", "max": "MAX", "min": "MIN", "xchg": "XCHG", "and": "AND"}
_RMW_MODES |= {"or": "OR", "xor": "XOR"}


def pointers(
    lw: Any, array: Any, coords: list[Any], index_types: list[TileType]
) -> tuple[Any, Any]:
    """(pointer tile, live mask) for per-element `coords` of `array` (tile shape from them)."""
    bc, b, tt = lw.bc, lw.b, lw.tt
    at = array_type(array)
    shape = list(index_types[0].shape)
    ptr, dims, strides = lw.raw[array]
    u64 = tt.tile(tt.I64, shape)
    i1 = tt.tile(tt.I1, shape)
    unsigned = bc.Signedness.Unsigned
    offset = mask = None
    for axis, (c, t) in enumerate(zip(coords, index_types, strict=True)):
        sign = bc.Signedness.Signed if t.dtype.is_signed else unsigned
        c64 = c if t.dtype.bits == 64 else bc.encode_ExtIOp(b, u64, c, sign)
        extent = _splat(lw, bc.encode_ExtIOp(b, tt.tile(tt.I64, []), dims[axis], unsigned), shape)
        inside = bc.encode_CmpIOp(b, i1, c64, extent, bc.ComparisonPredicate.LESS_THAN, unsigned)
        mask = inside if mask is None else bc.encode_AndIOp(b, i1, mask, inside)
        if axis < at.ndim - 1:
            s64 = bc.encode_ExtIOp(b, tt.tile(tt.I64, []), strides[axis], unsigned)
            step = bc.encode_MulIOp(b, u64, c64, _splat(lw, s64, shape), bc.IntegerOverflow.NONE)
        else:
            step = c64  # the last stride is 1
        offset = (
            step
            if offset is None
            else bc.encode_AddIOp(b, u64, offset, step, bc.IntegerOverflow.NONE)
        )
    ptr_t = tt.tile(tt.pointer(lw.stored(at.dtype), bc.PtrAttr.Missing), shape)
    base = _splat(lw, ptr, shape, tt.pointer(lw.stored(at.dtype), bc.PtrAttr.Missing))
    return bc.encode_OffsetOp(b, ptr_t, base, offset), mask


def _splat(lw: Any, scalar: Any, shape: list[int], elem: Any = None) -> Any:
    """A 0-d tile broadcast to `shape` (reshape to all 1s, then broadcast)."""
    if not shape:
        return scalar
    bc, b, tt = lw.bc, lw.b, lw.tt
    elem = tt.I64 if elem is None else elem
    ones = bc.encode_ReshapeOp(b, tt.tile(elem, [1] * len(shape)), scalar)
    return bc.encode_BroadcastOp(b, tt.tile(elem, shape), ones)


def _live(lw: Any, op: Any, args: list[Any], first: int) -> tuple[Any, Any]:
    """The pointer tile and live mask of an indexed op whose coordinates start at `first`."""
    nd = array_type(op.operands[0]).ndim
    coords = args[first : first + nd]
    types = [tile_type(v) for v in op.operands[first : first + nd]]
    ptrs, mask = pointers(lw, op.operands[0], coords, types)
    if op.attrs["masked"]:
        shape = list(types[0].shape)
        mask = lw.bc.encode_AndIOp(lw.b, lw.tt.tile(lw.tt.I1, shape), mask, args[first + nd])
    return ptrs, mask


@lowers(ops.Gather)
def gather(lw: Any, op: ops.Gather, args: list[Any]) -> Any:
    bc = lw.bc
    t = tile_type(op.result)
    ptrs, mask = _live(lw, op, args, 1)
    st = lw.stored_tile(t)  # a bool array is bytes
    pad = bc.encode_ConstantOp(lw.b, lw.tid(st), lw._bytes(op.attrs["padding"], st.dtype))
    value, _ = bc.encode_LoadPtrTkoOp(
        lw.b, lw.tid(st), lw.tt.Token, ptrs, mask, pad, lw.read_token(op.operands[0]),
        bc.MemoryOrderingSemantics.WEAK, None, None,
    )  # fmt: skip
    return lw.to_bool(value, t.shape) if t.dtype.is_bool else value


@lowers(ops.Scatter)
def scatter(lw: Any, op: ops.Scatter, args: list[Any]) -> Any:
    bc = lw.bc
    ptrs, mask = _live(lw, op, args, 2)
    value = args[1]
    if array_type(op.operands[0]).dtype.is_bool:  # a bool array is bytes
        value = lw.to_byte(value, tile_type(op.operands[1]).shape)
    lw.token = bc.encode_StorePtrTkoOp(
        lw.b, lw.tt.Token, ptrs, value, mask, lw.token,
        bc.MemoryOrderingSemantics.RELAXED, bc.MemoryScope.DEVICE, None,
    )  # fmt: skip


def _ordering(bc: Any, op: ops.AtomicRMW | ops.AtomicCAS) -> Any:
    """The atomic's memory ordering semantics: its `order` attribute, acq_rel without one."""
    return getattr(bc.MemoryOrderingSemantics, op.attrs.get("order", "acq_rel").upper())


def _rmw_mode(mode: str, dt: Any) -> str:
    """The name of Tile IR's AtomicRMWMode for an atomic `mode` on `dt` elements."""
    name = _RMW_MODES[mode]
    if name == "ADD" and dt.is_float:
        return "ADDF"
    if name in ("MAX", "MIN") and not dt.is_signed:
        return "U" + name
    return name


@lowers(ops.AtomicRMW)
def atomic_rmw(lw: Any, op: ops.AtomicRMW, args: list[Any]) -> Any:
    bc = lw.bc
    t = tile_type(op.result)
    ptrs, mask = _live(lw, op, args, 2)
    old, lw.token = bc.encode_AtomicRMWTkoOp(
        lw.b, lw.tid(t), lw.tt.Token, ptrs, args[1], mask, lw.token,
        _ordering(bc, op), bc.MemoryScope.DEVICE,
        getattr(bc.AtomicRMWMode, _rmw_mode(op.attrs["mode"], t.dtype)),
    )  # fmt: skip
    return old


@lowers(ops.AtomicCAS)
def atomic_cas(lw: Any, op: ops.AtomicCAS, args: list[Any]) -> Any:
    bc = lw.bc
    t = tile_type(op.result)
    ptrs, mask = _live(lw, op, args, 3)
    old, lw.token = bc.encode_AtomicCASTkoOp(
        lw.b, lw.tid(t), lw.tt.Token, ptrs, args[1], args[2], mask, lw.token,
        _ordering(bc, op), bc.MemoryScope.DEVICE,
    )  # fmt: skip
    return old


@lowers(ops.AtomicStore)
def atomic_store(lw: Any, op: ops.AtomicStore, args: list[Any]) -> Any:
    bc = lw.bc
    if lw.b.version < bc.BytecodeVersion.V_13_3:
        raise lw._unsupported(op, f"`tile.atomic_store_{op.attrs['mode']}` (Tile IR bytecode 13.3)")
    t = tile_type(op.operands[1])
    view = lw._view(op.operands[0], t.shape, 0.0)
    index = args[2:]
    lw.token = bc.encode_AtomicRedViewTkoOp(
        lw.b, lw.tt.Token, view, index, args[1], lw.token,
        bc.MemoryOrderingSemantics.RELAXED, bc.MemoryScope.DEVICE,
        getattr(bc.AtomicRMWMode, _rmw_mode(op.attrs["mode"], t.dtype)),
        [False] * len(index),
    )  # fmt: skip
