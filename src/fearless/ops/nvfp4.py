"""NVFP4 quantization (TileGym's experimental `nvfp4_quantize`): `fearless.ops.nvfp4_quantize`,
on the kernel of ops/kernels_nvfp4.py.

x (rows, cols) in f32, f16 or bf16, cols a multiple of 16, is cut into blocks of 128 rows by
64 columns and each row of a block into four groups of 16 values. Returns (packed, scales):
  - packed (rows, cols // 2) uint8: x * s_enc / scale of its group rounded to fp4 e2m1 (round
    half to even, saturating at +-6), two to a byte, column 2k in the low nibble and 2k + 1 in
    the high one;
  - scales (blocks * 512,) uint8: per group, max(max|x| / 6 * s_enc, 2^-16) as an f8e4m3fn
    byte (0 for the groups and rows of a last partial block that lie past x), block
    (bm, bn) at bytes [(bm * ceil(cols / 64) + bn) * 512, ... + 512), its (128, 4) grid of
    scales swizzled: row r, group c at byte (r % 32) * 16 + (r // 32) * 4 + c (the layout of
    the scale factors that Blackwell's block-scaled tensor cores read).
A zero over a zero scale (a group whose scale rounds to 0 in f8e4m3fn, below 2^-10 before
rounding) gives the code 0; any other value over it saturates to +-6. Forward only: an input
that requires grad is refused.
"""

from __future__ import annotations

from typing import Any

from .. import dtypes
from ..runtime.location import argument_error
from ._io import FLOATS, number, operand, output, result, view
from ._replay import replayable
from ._route import untraceable
from .kernels_nvfp4 import GROUP, SCALE_BYTES, TILE_M, TILE_N, nvfp4_quantize_launch

OP = "nvfp4_quantize"


@untraceable(OP)  # no torch operator: never traced by torch.compile
@replayable()
def nvfp4_quantize(x: Any, s_enc: Any = 1.0) -> tuple[Any, Any]:
    """TileGym's `nvfp4_quantize`: (packed (rows, cols // 2) uint8, two fp4 e2m1 codes a byte,
    scales (blocks * 512,) uint8, swizzled f8e4m3fn scales of 16 values each) for x (rows, cols)
    in f32, f16 or bf16 with cols a multiple of 16, scaled by the global `s_enc`. Forward
    only. No torch operator: torch.compile cannot trace it (`_route.untraceable`)."""
    scale = number(s_enc, OP, "s_enc")
    a = operand(x, OP, "x", FLOATS)
    if len(a.shape) != 2:
        raise argument_error(
            f"`fearless.ops.{OP}` quantizes a matrix (rows, cols), but `x` has shape {a.shape}",
            help="reshape it first, e.g. `x.reshape(-1, x.shape[-1])`",
        )
    rows, cols = a.shape
    if cols % GROUP:
        raise argument_error(
            f"`fearless.ops.{OP}` needs cols (x's last axis, {cols}) a multiple of {GROUP}: "
            f"each scale covers {GROUP} values of a row",
            help=f"pad the columns to {-(-cols // GROUP) * GROUP} with zeros",
        )
    blocks_m, blocks_n = -(-rows // TILE_M), -(-cols // TILE_N)
    packed, packed_ret = output(a, (rows, cols // 2), dtypes.u8)
    scales, scales_ret = output(a, (blocks_m * blocks_n * SCALE_BYTES,), dtypes.u8)
    if blocks_m * blocks_n:
        grid = view(scales, (blocks_m, blocks_n, SCALE_BYTES))
        nvfp4_quantize_launch(packed, grid, a.tensor, scale)
    return result(a, packed, packed_ret), result(a, scales, scales_ret)
