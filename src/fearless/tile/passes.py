"""The Tile track's pass pipeline over tile IR: verify, remove dead ops, verify again.

Passes are plain functions `run(fn) -> None`, listed in order in `PIPELINE`; the verifier is
`ir/tile/verifier.py`. Ownership needs no pass: `tile.store` has no index operand
(`ir/tile/ops.py`), so a block can only write its own tile.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import config
from ..ir.core import Block, Effect, Function, Value
from ..ir.tile import ops
from ..ir.tile.verifier import verify


def dce(fn: Function) -> None:
    """Remove pure and read-only ops whose results nobody uses (innermost first, to a fixpoint).

    %1 = tile.constant {value=0} : tile<f32>     <- a retried loop's discarded init

    Loops and ifs stay (they may store), and so do the values their blocks yield.
    """

    def used_in(block: Block, used: set[Value]) -> None:
        for op in block.ops:
            used.update(op.operands)
            for region in ops.regions(op):
                used_in(region, used)

    def sweep(block: Block, used: set[Value]) -> bool:
        changed = False
        keep = []
        for op in block.ops:
            for region in ops.regions(op):
                changed |= sweep(region, used)
            dead = op.effect in (Effect.PURE, Effect.READ) and not any(
                r in used for r in op.results
            )
            if dead:
                changed = True
            else:
                keep.append(op)
        block.ops = keep
        return changed

    while True:
        used: set[Value] = set()
        used_in(fn.entry, used)
        if not sweep(fn.entry, used):
            return


PIPELINE: list[Callable[[Function], None]] = [verify, dce, verify]


def run_pipeline(fn: Function) -> None:
    """Run `PIPELINE`: the frontend's IR is always verified (the first entry); the verifier's
    later runs, after each pass, only under FEARLESS_VERIFY=1."""
    for i, p in enumerate(PIPELINE):
        if p is verify and i > 0 and not config.verify_each_pass():
            continue
        p(fn)
