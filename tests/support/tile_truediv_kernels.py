"""The Tile true-division kernel: shared by tests/test_tile_truediv.py and
tests/gpu/test_tile_truediv_gpu.py."""

from __future__ import annotations

import fearless as fl
from fearless import tile


@tile.kernel
def divide(
    out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32], MODE: tile.Const[int]
):
    a = tile.load_like(x, out)
    b = tile.load_like(y, out)
    if MODE == 0:
        q = tile.truediv(a, b)
    elif MODE == 1:
        q = tile.truediv(a, b, rounding_mode=tile.RoundingMode.APPROX, flush_to_zero=True)
    else:
        q = tile.truediv(a, b, rounding_mode=tile.RoundingMode.FULL)
    out.store(q)
