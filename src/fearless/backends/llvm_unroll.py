"""Full unrolling of the short `range` loops that index a thread's local arrays.

`simt.local.array` lives in registers only once every index is a constant, that is once LLVM
unrolls the loops over it. LLVM's own threshold stops at about 8 steps (a `range(16)` loop
left the array in local memory), so a loop that

- counts a constant `range(start, stop, step)` of at most MAX_STEPS steps (the header's
  `k < stop` against the back edge's `k + step`, entered with a constant), in
- a kernel that holds a local array,

gets `!llvm.loop !{self, !"llvm.loop.unroll.full"}` on its back edge. llvmlite writes no
self-referencing node, so the node carries the marker string SELF first and
`backends/llvm.py` turns it into `distinct !{!n, ...}` before parsing (`link_loop_ids`).
"""

from __future__ import annotations

import re
from typing import Any

from llvmlite import ir

from ..ir import ops
from ..ir.core import Block

# Loops of MIN_STEPS to MAX_STEPS steps are marked: shorter ones LLVM unrolls by itself (and
# marking them changes its schedule of kernels already measured), longer ones would be code.
MIN_STEPS, MAX_STEPS = 9, 64
SELF = "fearless.loop.self"
_SELF_NODE = re.compile(r'^(!\d+) = !\{\s*!"' + re.escape(SELF) + r'"\s*,', re.MULTILINE)


def unroll_id(lw: Any, op: ops.Br) -> Any:
    """The loop id to put on the branch `op`: the back edge of a short constant `range` loop
    in a kernel with local arrays (one id per loop, shared by its `continue`s); else None."""
    if not _has_local_arrays(lw):
        return None
    header = op.dest
    steps = _constant_steps(lw.fn.blocks, header, op)
    if steps is None or not MIN_STEPS <= steps <= MAX_STEPS:
        return None
    ids: dict[Block, Any] = lw.__dict__.setdefault("_loop_ids", {})
    if header not in ids:
        module = lw.module
        hint = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.full")])
        ids[header] = module.add_metadata([ir.MetaDataString(module, SELF), hint])
    return ids[header]


def link_loop_ids(text: str) -> str:
    """`!7 = !{!"fearless.loop.self", !6}` -> `!7 = distinct !{!7, !6}`: LLVM's loop ids."""
    return _SELF_NODE.sub(lambda m: f"{m.group(1)} = distinct !{{{m.group(1)},", text)


def _has_local_arrays(lw: Any) -> bool:
    found: bool | None = lw.__dict__.get("_has_local_arrays")
    if found is None:
        found = any(isinstance(op, ops.LocalAlloc) for op in lw.fn.ops())
        lw.__dict__["_has_local_arrays"] = found
    return found


def _constant_steps(blocks: list[Block], header: Block, back: ops.Br) -> int | None:
    """The step count of `for k in range(a, b, c)` with constant a, b and c > 0 whose header is
    `header` and whose back edge is `back`; None for any other branch."""
    term = header.ops[-1] if header.ops else None
    if not (isinstance(term, ops.CondBr) and header.args and back.operands):
        return None
    k = header.args[0]
    cond = term.cond.owner
    step = back.operands[0].owner
    if not (
        isinstance(cond, ops.Compare)
        and cond.pred == "lt"
        and cond.operands[0] is k
        and isinstance(step, ops.Binary)
        and step.kind == "add"
        and step.operands[0] is k
    ):
        return None
    stop, by = _const(cond.operands[1]), _const(step.operands[1])
    entries = [
        b.ops[-1]
        for b in blocks
        if b.ops
        and header in b.ops[-1].successors()
        and b.ops[-1].operands[:1] != [back.operands[0]]
        and b.ops[-1] is not back
    ]
    starts = {_const(ops.branch_args(t, header)[0]) for t in entries if _is_entry(t, k)}
    if stop is None or by is None or by <= 0 or len(starts) != 1 or None in starts:
        return None
    (start,) = starts
    assert start is not None
    return max(0, -(-(stop - start) // by))


def _is_entry(term: ops.Op, k: Any) -> bool:
    """A branch into the loop from outside: its counter argument is not `k + step`."""
    first = term.operands[:1]
    owner = first[0].owner if first else None
    return not (isinstance(owner, ops.Binary) and owner.operands[0] is k)


def _const(v: Any) -> int | None:
    owner = v.owner
    if isinstance(owner, ops.Constant) and type(owner.value) is int:
        return int(owner.value)
    return None
