"""SIMT thread coordinates -> LLVM: `index.advance`, the step of `simt.thread.grid_stride`.

The raw coordinates (`simt.threadIdx.x`, `simt.laneid`, ...) are `thread.reg` ops, lowered by
`lower._KernelLowering._special_reg`; what is here is the witness arithmetic. The handler
is registered with `registry.lowers` and runs on `lower.py`'s `_KernelLowering`.

    %j = index.advance %i, %g : ThreadIndex  ->  %j = add nuw nsw i64 %i, %g
"""

from __future__ import annotations

from typing import Any

from ...ir.simt import ops
from .registry import lowers


@lowers(ops.IndexAdvance)
def lower_index_advance(lw: Any, op: ops.IndexAdvance) -> None:
    """The next grid-stride step: both operands are non-negative i64 far below 2^63."""
    i, g = (lw._v(v) for v in op.operands)
    lw._set(op.result, lw.builder.add(i, g, name="next", flags=("nuw", "nsw")))
