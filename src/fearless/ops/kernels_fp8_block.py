"""The Tile kernel behind `fearless.ops.w8a8_block_fp8_matmul` (DeepSeek-V3's block-scaled fp8
GEMM), and its autotuned launch.

C (M, N) = (A * As) @ (B * Bs)^T: A (M, K) and B (N, K) in one fp8 dtype, As (M, KB) f32 one
scale per row of A and block of `block_k` columns, Bs (NB, KB) f32 one scale per block of
`block_n` rows and `block_k` columns of B. Block (i, j) owns a (BM, BN) tile of C. For each
K block kb it multiplies A's and B's fp8 tiles on the tensor cores into a fresh f32 partial
(STEPS steps of BK columns, BK dividing block_k, so that one partial never spans two scale
blocks), multiplies the partial by As[rows, kb] (per row) and Bs[cols // block_n, kb] (per
column: any block_n, also one that is not a multiple of BN) and adds it to the f32
accumulator; the tile is stored in the output dtype. The scales are gathered (bounds-checked:
rows and columns past C's edge read 0, and their products are dropped by the store). B is read
transposed by the load (`order=(1, 0)`), never copied.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile

from .kernels_rows import kernel_of, size_class


def make_fp8_block_matmul(in_dt, out_dt):
    """c (M, N) in out_dt = the block-scaled product of a (M, K) and b (N, K) in fp8 `in_dt`."""

    @tile.kernel
    def fp8_block_matmul(
        c: tile.Part[out_dt],
        a: tile.Tensor[in_dt],
        b: tile.Tensor[in_dt],
        a_scale: tile.Tensor[fl.f32],
        b_scale: tile.Tensor[fl.f32],
        BLOCK_N: tile.Const[int],
        BK: tile.Const[int],
        STEPS: tile.Const[int],
    ):
        BM, BN = c.shape
        i, j = c.index
        rows = i * BM + tile.arange(BM)
        groups = (j * BN + tile.arange(BN)) // BLOCK_N  # each column's block of B's rows
        steps = tile.num_tiles(a, 1, (BM, BK))
        acc = tile.zeros((BM, BN), fl.f32)
        for kb in range(a_scale.shape[1]):
            part = tile.zeros((BM, BN), fl.f32)
            for s in range(min(STEPS, steps - kb * STEPS)):
                k = kb * STEPS + s
                ta = tile.load(a, (i, k), (BM, BK))
                tb = tile.load(b, (k, j), (BK, BN), order=(1, 0))  # B^T's (k, j) tile
                part = tile.mma(ta, tb, part)
            sa = tile.gather(a_scale, (rows, kb))
            sb = tile.gather(b_scale, (groups, kb))
            acc = acc + part * (sa[:, None] * sb[None, :])
        c.store(acc.astype(out_dt))

    return fp8_block_matmul


def _config(shape, bk, occupancy):
    return dict(shape=shape, bk=bk, occupancy=occupancy)


# (BM, BN) tiles and the K step; TileGym's kernel takes (128, block_n) tiles and K steps of
# block_k, with BM down to M's power of two for small M.
FP8_BLOCK_CONFIGS = [
    _config((128, 128), 128, 2),
    _config((128, 128), 64, 2),
    _config((64, 128), 128, 2),
    _config((128, 256), 128, 1),
    _config((64, 64), 128, 4),
]


def _key(c, a, b, a_scale, b_scale, block_n, block_k, *_, **__):
    """M's size class, N, K, the block sizes and the dtypes (in and out)."""
    m, n = c.shape
    return size_class(m), n, a.shape[1], block_n, block_k, a.dtype.name, c.dtype.name


def step_of(bk: int, block_k: int) -> int:
    """The K step: `bk` or the largest power of two dividing block_k, whichever is smaller."""
    return min(bk, block_k & -block_k)


@fl.autotune(configs=FP8_BLOCK_CONFIGS, key=_key)
def fp8_block_matmul_tuned(c, a, b, a_scale, b_scale, block_n, block_k, *, shape, bk,
                           occupancy):  # fmt: skip
    """c (M, N) = (a * a_scale) @ (b * b_scale)^T, the scales per (row, K block) of a and per
    (block_n, block_k) block of b (fl.Tensors; block_k a multiple of 16)."""
    step = step_of(bk, block_k)
    kernel = kernel_of(make_fp8_block_matmul, a.dtype, c.dtype).options(occupancy=occupancy)
    with c.partition(shape) as part:
        kernel(part, a, b, a_scale, b_scale, block_n, step, block_k // step)
