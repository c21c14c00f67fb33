"""Insert a `check.bounds` before every load and store.

    %v = load %a, %i            ->   %n = len %a
                                     check.bounds {sites=(0,)} %i, %n
                                     %v = load %a, %i

Each check gets a site number indexing `options.sites`, which records what the check guards
(read or write, the parameter, the user's location) for the device error message.
`bounds_elim` then removes the checks a dominating guard proves.
"""

from __future__ import annotations

from ...abi import SiteInfo
from ...ir import ops
from ...ir.core import Function, Op
from .options import PassOptions


def run(fn: Function, options: PassOptions) -> None:
    if not options.insert_checks:
        return
    for block in fn.blocks:
        new_ops: list[Op] = []
        for op in block.ops:
            if isinstance(op, ops.Load | ops.Store):
                arr, idx = op.operands[0], op.operands[1]
                site = len(options.sites)
                if isinstance(op, ops.Load):
                    options.sites.append(SiteInfo("read", arr.name, op.loc))
                else:
                    options.sites.append(SiteInfo("write", arr.name, op.loc))
                length = ops.ArrayLen(arr, op.loc)
                check = ops.BoundsCheck(idx, length.result, site, op.loc)
                for new in (length, check):
                    new.block = block
                    new_ops.append(new)
            new_ops.append(op)
        block.ops = new_ops
