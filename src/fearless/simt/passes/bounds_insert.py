"""Insert a `check.bounds` before every load, store and atomic (an atomic is a "write" site).

    %v = load %a, %i            ->   %n = len %a
                                     check.bounds {sites=(0,)} %i, %n
                                     %v = load %a, %i

A 2-D access gets one check per axis: `a[r, c]` needs 0 <= r < shape[0] and 0 <= c < shape[1]
(a check of the flat offset r * shape[1] + c would let `a[0, shape[1]]` read row 1):

    %v = load %a, %r, %c        ->   %n0 = len {axis=0} %a
                                     check.bounds {sites=(0,)} %r, %n0
                                     %n1 = len {axis=1} %a
                                     check.bounds {sites=(1,)} %c, %n1
                                     %v = load %a, %r, %c

Each check gets a site number indexing `options.sites`, which records what the check guards
(read or write, the parameter, the axis of a 2-D array, the user's location) for the device
error message.
`bounds_elim` then removes the checks a dominating guard proves.
"""

from __future__ import annotations

from typing import Literal

from ...abi import SiteInfo
from ...ir.core import Function, Op
from ...ir.simt import ops
from .options import PassOptions


def run(fn: Function, options: PassOptions) -> None:
    if not options.insert_checks:
        return
    for block in fn.blocks:
        new_ops: list[Op] = []
        for op in block.ops:
            if isinstance(op, ops.Load | ops.Store | ops.AtomicRMW | ops.AtomicCAS):
                arr = op.operands[0]
                kind: Literal["read", "write"] = "read" if isinstance(op, ops.Load) else "write"
                indices = op.indices
                for axis, idx in enumerate(indices):
                    site = len(options.sites)
                    shown_axis = axis if len(indices) > 1 else None
                    unsafe = options.in_unsafe(op.loc)
                    options.sites.append(SiteInfo(kind, arr.name, op.loc, shown_axis, unsafe))
                    length = ops.ArrayLen(arr, op.loc, axis)
                    check = ops.BoundsCheck(idx, length.result, site, op.loc)
                    for new in (length, check):
                        new.block = block
                        new_ops.append(new)
            new_ops.append(op)
        block.ops = new_ops
