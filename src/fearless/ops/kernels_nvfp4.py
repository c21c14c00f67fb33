"""The Tile kernel behind `fearless.ops.nvfp4_quantize` (NVFP4 quantization, TileGym's
`nvfp4_quantize`), and its launch.

Block (i, j) reads the (128, 64) tile (i, j) of x (rows and columns past x's end read 0) in
f32, as 128 rows of four groups of 16 values. Per group, the scale is
max(max|x| / 6 * s_enc, 2^-16) rounded to f8e4m3fn; groups past x's last column or row get
scale 0. The (128, 4) grid of scale bytes is written swizzled into the block's 512 bytes of
`scales` (byte (r % 32) * 16 + (r // 32) * 4 + c for row r and group c: a reshape to
(4, 32, 4) and a permute); each value x * (s_enc / scale) is rounded to fp4 e2m1 and two of
them go into one byte of `packed`, the even column's code in the low nibble.

Tile IR has an f4E2M1FN type but fearless's Tile track does not, so the e2m1 code is computed
here with comparisons: its magnitude code (0..7 for 0, 0.5, 1, 1.5, 2, 3, 4, 6) counts the
rounding boundaries that |v| passes, each boundary strict or not as round-half-to-even wants
(a tie goes to the even code): anything past 5 is code 7 (6.0), so values past 6 and
infinity saturate; the sign bit is v's (of -0.0 too). A NaN (0 * inf: a zero over a zero scale) gives
code 0. The scale's byte is the f8e4m3fn scale's bits (`tile.bitcast`; past 448 it saturates to
448, 0x7E, as the GPU converts to f8).
"""

import fearless as fl
from fearless import tile
from fearless.dtypes import DType
from fearless.runtime.tensor import Tensor

from .kernels_rows import kernel_of

TILE_M = 128  # rows per block
TILE_N = 64  # columns per block: four groups of GROUP
GROUP = 16  # elements per scale
FP4_MAX = 6.0
E4M3_EPS = 1.5258789e-05  # the least scale before rounding, 2^-16 (TileGym's)
SCALE_BYTES = TILE_M * (TILE_N // GROUP)  # 512 per block
OCCUPANCY = 6  # TileGym's default


def make_nvfp4_quantize(in_dt: DType) -> tile.Kernel:
    """packed (rows, cols // 2) u8 and scales (row blocks, column blocks, 512) u8 of x (rows,
    cols) in `in_dt`, scaled by the run-time f32 s_enc."""

    @tile.kernel
    def nvfp4_quantize(
        packed: tile.Part[fl.u8],
        scales: tile.Part[fl.u8],
        x: tile.Tensor[in_dt],
        s_enc: fl.f32,
    ):
        i, j = packed.index
        groups = TILE_N // GROUP
        v = tile.load(x, (i, j), (TILE_M, TILE_N)).astype(fl.f32)
        g = tile.reshape(v, (TILE_M, groups, GROUP))
        amax = tile.max(tile.abs(g), axis=2, keepdims=True)  # (128, 4, 1)
        pre = tile.maximum(amax / FP4_MAX * s_enc, E4M3_EPS)
        rows = i * TILE_M + tile.reshape(tile.arange(TILE_M), (TILE_M, 1, 1))
        cols = j * TILE_N + tile.reshape(tile.arange(groups), (1, groups, 1)) * GROUP
        inside = (rows < x.shape[0]) & (cols < x.shape[1])
        scale8 = tile.where(inside, pre, 0.0).astype(fl.f8e4m3fn)
        scale = scale8.astype(fl.f32)
        byte = tile.bitcast(scale8, fl.u8)  # the scale's f8e4m3fn byte
        swizzled = tile.permute(tile.reshape(byte, (4, TILE_M // 4, groups)), (1, 0, 2))
        scales.store(tile.reshape(swizzled, (1, 1, SCALE_BYTES)))

        q = g * (s_enc / scale)
        a = tile.abs(q)
        # e2m1 magnitude codes, round half to even: ties at 0.25, 1.25, 2.5, 5 go down (to codes
        # 0, 2, 4, 6), at 0.75, 1.75, 3.5 up (to codes 2, 4, 6); past 5: 7 (6.0, saturated)
        code = (
            (a > 0.25).astype(fl.i32)
            + (a >= 0.75).astype(fl.i32)
            + (a > 1.25).astype(fl.i32)
            + (a >= 1.75).astype(fl.i32)
            + (a > 2.5).astype(fl.i32)
            + (a >= 3.5).astype(fl.i32)
            + (a > 5.0).astype(fl.i32)
        )
        negative = (tile.bitcast(q, fl.i32) < 0) & ~tile.isnan(q)  # -0.0 too; never a NaN
        code = code + tile.where(negative, 8, 0)
        pairs = tile.reshape(code, (TILE_M, TILE_N // 2, 2))
        nibble = tile.reshape(tile.arange(2) * 15 + 1, (1, 1, 2))  # x1 (even), x16 (odd)
        packed.store(tile.sum(pairs * nibble, axis=2).astype(fl.u8))

    return nvfp4_quantize


def nvfp4_quantize_launch(packed: Tensor, scales: Tensor, x: Tensor, s_enc: float) -> None:
    """Quantize x (rows, cols) fl.Tensor into packed (rows, cols // 2) u8 and scales
    (ceil(rows / 128), ceil(cols / 64), 512) u8 (cols a multiple of 16, x not empty)."""
    kernel = kernel_of(make_nvfp4_quantize, x.dtype).options(occupancy=OCCUPANCY)
    with (
        packed.partition((TILE_M, TILE_N // 2)) as p,
        scales.partition((1, 1, SCALE_BYTES)) as s,
    ):
        kernel(p, s, x, s_enc)
