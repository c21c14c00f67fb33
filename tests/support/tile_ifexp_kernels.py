"""A Tile kernel with conditional expressions and its runner: shared by tests/test_tile_ifexp.py and
tests/gpu/test_simt_coords_gpu.py."""

from __future__ import annotations

import numpy as np

import fearless as fl
from fearless import tile


@tile.kernel
def signed_relu(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], SCALE: tile.Const[int]):
    """Per element: x where x > 0 else 0 (a tile and a literal); the block's total picks the
    sign (a 0-d condition); SCALE > 1 (a Const) picks an arm when the kernel is specialised."""
    v = tile.load_like(x, z)
    w = v if v > 0.0 else 0.0
    u = w * 3.0 if SCALE > 1 else w
    z.store(u if tile.sum(v) > 0.0 else -u)


def _run(x: np.ndarray, scale: int) -> np.ndarray:
    zp = fl.zeros(len(x), dtype=fl.f32).partition((64,))
    signed_relu(zp, fl.asarray(x), scale)
    return zp.unpartition().numpy()
