"""Loop facts of one kernel's lowering: the blocks on a CFG cycle (a block collective there
keeps its last barrier), and full unrolling of the short `range` loops over local arrays.

`simt.local.array` lives in registers only once every index is a constant, that is once LLVM
unrolls the loops over it. LLVM's own threshold stops at about 8 steps (a `range(16)` loop
left the array in local memory), so a loop that

- counts a constant `range(start, stop, step)` of at most MAX_STEPS steps (the header's
  `k < stop` against the back edge's `k + step`, entered with a constant), in
- a kernel that holds a local array,

gets `!llvm.loop !{self, !"llvm.loop.unroll.full"}` on its back edge (`Loops.loop_id`). llvmlite writes no
self-referencing node, so the node carries the marker string SELF first and
`backends/llvm/ptx.py` turns it into `distinct !{!n, ...}` before parsing (`link_loop_ids`).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from llvmlite import ir

from ...ir.analysis import cyclic_blocks
from ...ir.core import Block, Function, Value
from ...ir.simt import ops

# Loops of MIN_STEPS to MAX_STEPS steps are marked: shorter ones LLVM unrolls by itself (and
# marking them changes its schedule of kernels already measured), longer ones would be code.
MIN_STEPS, MAX_STEPS = 9, 64
SELF = "fearless.loop.self"
_SELF_NODE = re.compile(r'^(!\d+) = !\{\s*!"' + re.escape(SELF) + r'"\s*,', re.MULTILINE)


class Loops:
    """The loops of one kernel's lowering: which blocks may run again, and the loop ids, one
    per short constant loop (shared by its `continue`s), none in a kernel without local arrays."""

    def __init__(self, fn: Function, module: ir.Module) -> None:
        self.fn = fn
        self.module = module
        self.active = any(isinstance(op, ops.LocalAlloc) for op in fn.ops())
        self.ids: dict[Block, Any] = {}

    @functools.cached_property
    def cyclic(self) -> set[Block]:
        """The blocks a thread can run again (on a CFG cycle)."""
        return cyclic_blocks(self.fn)

    def loop_id(self, back: ops.Br) -> Any:
        """The id to put on the branch `back` if it is the back edge of a constant `range` loop
        of MIN_STEPS to MAX_STEPS steps; else None."""
        if not self.active:
            return None
        header = back.dest
        steps = _constant_steps(self.fn, header, back)
        if steps is None or not MIN_STEPS <= steps <= MAX_STEPS:
            return None
        if header not in self.ids:
            m = self.module
            hint = m.add_metadata([ir.MetaDataString(m, "llvm.loop.unroll.full")])
            self.ids[header] = m.add_metadata([ir.MetaDataString(m, SELF), hint])
        return self.ids[header]


def link_loop_ids(text: str) -> str:
    """`!7 = !{!"fearless.loop.self", !6}` -> `!7 = distinct !{!7, !6}`: LLVM's loop ids."""
    return _SELF_NODE.sub(lambda m: f"{m.group(1)} = distinct !{{{m.group(1)},", text)


def _constant_steps(fn: Function, header: Block, back: ops.Br) -> int | None:
    """The step count of `for k in range(a, b, c)` with constant a, b and c > 0 whose header is
    `header` and whose back edge is `back`; None for any other branch."""
    term = header.ops[-1] if header.ops else None
    if not (isinstance(term, ops.CondBr) and header.args and back.operands):
        return None
    k = header.args[0]
    cond = term.cond.owner
    if not (
        isinstance(cond, ops.Compare)
        and cond.pred == "lt"
        and cond.operands[0] is k
        and _advances(back.operands[0], k)
    ):
        return None
    step = back.operands[0].owner
    assert isinstance(step, ops.Binary)
    stop, by = _const(cond.operands[1]), _const(step.operands[1])
    # The counter's first value: what every edge from outside the loop passes to `k`.
    into = [ops.branch_args(p.ops[-1], header)[0] for p in fn.predecessors()[header]]
    starts = {_const(v) for v in into if not _advances(v, k)}
    if stop is None or by is None or by <= 0 or len(starts) != 1 or None in starts:
        return None
    (start,) = starts
    assert start is not None
    return max(0, -(-(stop - start) // by))


def _advances(v: Value, k: Value) -> bool:
    """Whether `v` is `k + something`: a back edge's next counter."""
    owner = v.owner
    return isinstance(owner, ops.Binary) and owner.kind == "add" and owner.operands[0] is k


def _const(v: Value) -> int | None:
    owner = v.owner
    if isinstance(owner, ops.Constant) and type(owner.value) is int:
        return int(owner.value)
    return None
