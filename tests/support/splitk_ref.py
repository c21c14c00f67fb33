"""The NumPy (float64) reference of TileGym's `splitk_reduce` (tests/ops/test_splitk_reduce.py's
torch reference restated in float64): what tests/test_ops_splitk_reduce.py compares
`fearless.ops.splitk_reduce` with."""

from __future__ import annotations

import numpy as np


def splitk_reduce_reference(part_o: np.ndarray, lse: np.ndarray) -> np.ndarray:
    """(B, H, D), float64: the splits' outputs part_o (B, H, S, D) weighed by 2 ** (lse - max)
    over the splits (lse (B, H, S), base 2) and divided by the weights' sum. TileGym's
    reference divides both sums by log(2), which cancels."""
    o, ls = part_o.astype(np.float64), lse.astype(np.float64)
    w = np.exp2(ls - ls.max(-1, keepdims=True))
    return (o * w[..., None]).sum(2) / w.sum(-1)[..., None]  # type: ignore[no-any-return]
