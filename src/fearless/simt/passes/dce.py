"""Dead-code elimination: drop ops without side effects whose results are unused.

Runs to a fixed point; `check.bounds`, stores and terminators are never removed.
"""

from __future__ import annotations

from ...ir.core import Effect, Function
from .options import PassOptions

_REMOVABLE = (Effect.PURE, Effect.READ)


def run(fn: Function, options: PassOptions) -> None:
    changed = True
    while changed:
        changed = False
        used = {v for op in fn.ops() for v in op.operands}
        for b in fn.blocks:
            kept = [
                op
                for op in b.ops
                if not (
                    op.effect in _REMOVABLE
                    and op.results
                    and not any(r in used for r in op.results)
                )
            ]
            if len(kept) != len(b.ops):
                b.ops = kept
                changed = True
