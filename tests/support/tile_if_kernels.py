"""Tile kernels with `if` statements: shared by tests/test_tile_if.py and tests/gpu/test_tile_gpu.py."""

from __future__ import annotations

import fearless as fl
from fearless import tile


@tile.kernel
def even_odd(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load_like(x, z)
    if tile.block_id(0) % 2 == 0:
        z.store(v)
    else:
        z.store(-v)
