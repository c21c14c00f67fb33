"""The chunk copies of the SIMT IR: W loads (or W stores) marked `vector=(j, W)`.

simt/chunks.py emits them for `v[k] = x[i]` and `out[i] = v[k]` (`i` a `ThreadIndex2D<W>`):
the W accesses of one array stand together in one block, lanes W-1 down to 0, at the indices
(..., c + j) with c the lane-0 access's last index; only bounds checks and pure ops stand
between them. The backend reads (writes) them as one vector at lane 0, when every lane's check
has run; the simulator runs them as the scalar accesses they are. `groups` finds them and says
what is wrong with a malformed one (the verifier's message).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..core import ArrayType, Block, Effect, Op
from . import ops

# A chunk is one PTX vector access: 2, 4 or 8 elements of at most 16 bytes together.
VECTOR_WIDTHS = (2, 4, 8)
MAX_VECTOR_BYTES = 16


def vector_fits(width: int, itemsize: int) -> bool:
    """Whether W elements of `itemsize` bytes make one vector access."""
    return width in VECTOR_WIDTHS and width * itemsize <= MAX_VECTOR_BYTES


def groups(block: Block) -> Iterator[list[ops.Load] | list[ops.Store] | str]:
    """Each chunk copy of `block` as its accesses, lanes W-1 .. 0; a string where one is
    malformed (what is wrong)."""
    open_: list[Op] = []
    for op in block.ops:
        vec = op.attrs.get("vector") if isinstance(op, ops.Load | ops.Store) else None
        if vec is None:
            if open_ and not (isinstance(op, ops.BoundsCheck) or op.effect is Effect.PURE):
                yield f"a chunk copy is interrupted by `{op.opname}`"
                open_ = []
            continue
        lane, width = vec
        first = open_[0] if open_ else None
        if first is None:
            if lane != width - 1:
                yield f"a chunk copy starts at lane {lane}, not {width - 1}"
                continue
        elif not (
            type(op) is type(first)
            and op.operands[0] is first.operands[0]
            and first.attrs["vector"][1] == width
            and lane == width - 1 - len(open_)
        ):
            yield "a chunk copy's lanes are not one array's W-1 .. 0"
            open_ = []
            continue
        open_.append(op)
        if lane == 0:
            problem = _shape_problem(open_)
            yield problem if problem else open_  # type: ignore[misc]
            open_ = []
    if open_:
        yield "a chunk copy does not end at lane 0 in its block"


def _shape_problem(members: list[Op]) -> str:
    """What is wrong with a complete group's types and indices ("" when nothing)."""
    arr = members[0].operands[0].type
    width = members[0].attrs["vector"][1]
    if not (isinstance(arr, ArrayType) and vector_fits(width, arr.dtype.itemsize)):
        return f"a chunk of {width} elements of {arr} is no vector access"
    last = members[-1]
    assert isinstance(last, ops.Load | ops.Store)
    base = last.indices[-1]
    for op in members:
        assert isinstance(op, ops.Load | ops.Store)
        lane = op.attrs["vector"][0]
        if op.indices[:-1] != last.indices[:-1]:
            return "a chunk copy's lanes differ in a leading index"
        index = op.indices[-1]
        if lane == 0:
            continue
        add = index.owner
        const = add.operands[1].owner if isinstance(add, ops.Binary) else None
        if not (
            isinstance(add, ops.Binary)
            and add.kind == "add"
            and add.operands[0] is base
            and isinstance(const, ops.Constant)
            and const.value == lane
        ):
            return f"lane {lane} of a chunk copy is not at its first column + {lane}"
    return ""
