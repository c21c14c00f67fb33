"""Integer ranges of SIMT IR values that their definitions fix: a constant, an array length, a
special register, a thread index, a widened narrower integer. The loop lowering asks whether a
`range` counter's next value can wrap (simt/loops.py), and the bounds-check elimination which
quantities stay far from the dtype's edges (simt/passes/bounds_elim.py).
"""

from __future__ import annotations

from ...dtypes import int_range
from ..core import ScalarType, Value
from . import ops

# Array lengths (and so every index that a length bounds) are below this: the house's
# assumption about memory, which leaves room to add offsets and steps below 2^48 without
# wrapping an i64.
MAX_LENGTH = 1 << 62
# A thread's global index, ctaid * ntid + tid: below 2^31 blocks of 1024 threads; a grid- or
# block-stride counter, below its stop (which the loop lowering clamps to MAX_LENGTH) plus one
# step of at most MAX_THREAD_INDEX.
MAX_THREAD_INDEX = 1 << 41
MAX_STRIDE_COUNTER = MAX_LENGTH + MAX_THREAD_INDEX
# Upper bounds, inclusive, of the PTX special registers (CUDA's limits: a block of at most 1024
# threads, 64 along z; a grid of 2^31 - 1 blocks along x, 65535 along y and z): `ntid.x` may be
# 1024 itself; the others are below 2^31.
REG_LIMITS = {
    **{f"{r}.{a}": 1024 for r in ("tid", "ntid") for a in "xy"},
    "tid.z": 64,
    "ntid.z": 64,
    **{f"{r}.{a}": 65535 for r in ("ctaid", "nctaid") for a in "yz"},
    "laneid": 32,
}


def value_bounds(v: Value) -> tuple[int, int]:
    """(lo, hi) with lo <= v <= hi for an integer scalar or index `v`: its dtype's range
    unless its definition says more."""
    if not isinstance(v.type, ScalarType):  # a thread index or a stride counter
        return 0, MAX_STRIDE_COUNTER - 1
    full = int_range(v.dtype)
    op = v.owner
    if isinstance(op, ops.Constant) and type(op.value) is int:
        return op.value, op.value
    if isinstance(op, ops.ArrayLen):
        return 0, MAX_LENGTH - 1
    if isinstance(op, ops.SpecialReg):
        return 0, REG_LIMITS.get(op.reg, 1 << 31)
    if isinstance(op, ops.IndexToInt):
        return 0, MAX_STRIDE_COUNTER - 1
    if isinstance(op, ops.Cast):
        src = op.operands[0]
        if isinstance(src.type, ScalarType) and src.dtype.is_int:
            lo, hi = value_bounds(src)
            if full[0] <= lo and hi <= full[1]:  # every value of the source survives as it is
                return lo, hi
    return full
