"""SIMT kernels over tiles of threads (owners, steps, transpose): shared by tests/test_simt_tiles.py
and tests/gpu/test_simt_block_stride_gpu.py."""

from __future__ import annotations

import fearless as fl
from fearless import simt
from fearless_bench.kernels_simt import TILE, make_transpose

STEPS = 4  # rows per thread of the 32 x 8 block


SHORT = 5  # a tile of 5 rows


# The bench's transpose at blocks of 32 x 8: each thread moves STEPS rows of a 32 x 32 tile.
transpose = make_transpose(TILE // STEPS)


@simt.kernel
def owners(steps: int, out: simt.DisjointSlice[fl.i64, 2]):
    """out[r, c] = 1 + the writer's step + 10 * its row in the block, over tiles of SHORT rows."""
    for k in range(steps):
        g = simt.thread.tile_index_2d(k, SHORT)
        if g.row < out.shape[0] and g.col < out.shape[1]:
            out[g] = 1 + k + 10 * simt.threadIdx.y


@simt.kernel
def step_of(k: int, out: simt.DisjointSlice[fl.i64, 2]):
    """Step k alone, unguarded: a step past the tile must fail its bounds check."""
    g = simt.thread.tile_index_2d(k, SHORT)
    out[g] = k
