"""The ops family's `nvfp4_quantize` cases (TileGym's experimental NVFP4 quantization):
their `Spec`s, GPU-run builder and dry-run shape; family_ops_more.py lists them with its own.

Grid: x (rows, cols) bf16 of N(0, 1), s_enc 1.0, at 4096 x 4096, 8192 x 8192 and 16384 x 7168
(square activations and DeepSeek-V3's hidden size: TileGym's tests/benchmark has no NVFP4
benchmark at 75a1430). Memory bound: bytes = x read once, packed (rows, cols / 2) and the
scales (512 bytes per 128 x 64 block) written.

Peers: TileGym's `tilegym.ops.nvfp4_quantize` (cutile backend) casts to fp4 e2m1, which cuTile
takes on sm_100 and newer with Tile IR bytecode 13.3: on an H100 / H200 (sm_90) its record is
a skip that says so. Torch has no NVFP4 operator: its peer is the same math in torch eager
(`nvfp4_torch`: f32 group maxima, the scale rounded by torch's float8_e4m3fn cast, the e2m1
code counted from its rounding boundaries, the nibbles packed, the scales swizzled), which is
also the reference (it matches tests/support/nvfp4_ref.py byte for byte wherever a scale stays
within f8e4m3fn's 448, as it does on these inputs). Outputs are bytes: (packed, scales) joined and compared as numbers (the
family's check; any wrong code moves the error far past the threshold).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import family_ops_base as base
from .family_ops_base import Bench, Joined, Spec, randn
from .model import Skip

OP = "nvfp4_quantize"
SHAPES = ((4096, 4096), (8192, 8192), (16384, 7168))
DRY_SHAPE = (130, 80)  # a partial row block and a partial column block
TILE_M, TILE_N, GROUP = 128, 64, 16
E4M3_EPS = 1.5258789e-05  # the least scale before rounding (TileGym's)
# |v| past each bound raises the e2m1 magnitude code by one (0, 0.5, 1, 1.5, 2, 3, 4, 6); a
# tie goes to the even code: past the bound strictly (False) or from it on (True)
BOUNDS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False),
          (3.5, True), (5.0, False))  # fmt: skip


def nvfp4_specs() -> list[Spec]:
    return [Spec(OP, "bf16", shape) for shape in SHAPES]


def nvfp4_torch(torch: Any, x: Any, s_enc: float = 1.0) -> tuple[Any, Any]:
    """TileGym's NVFP4 quantization in torch eager: (packed (rows, cols // 2) uint8, scales
    (blocks * 512,) uint8), as ops/nvfp4.py documents it."""
    rows, cols = x.shape
    bm, bn = -(-rows // TILE_M), -(-cols // TILE_N)
    xp = torch.zeros(bm * TILE_M, bn * TILE_N, dtype=torch.float32, device=x.device)
    xp[:rows, :cols] = x.float()
    groups = xp.view(bm * TILE_M, bn * TILE_N // GROUP, GROUP)
    s = torch.tensor(s_enc, dtype=torch.float32)
    pre = (groups.abs().amax(-1) / 6.0 * s).clamp(min=E4M3_EPS)
    r = torch.arange(bm * TILE_M, device=x.device)[:, None]
    c = torch.arange(bn * TILE_N // GROUP, device=x.device)[None, :]
    scale = torch.where((r < rows) & (c * GROUP < cols), pre, 0.0).to(torch.float8_e4m3fn)
    grid = scale.view(torch.uint8).view(bm, 4, 32, bn, 4)  # row r = (r // 32, r % 32)
    scales = grid.permute(0, 3, 2, 1, 4).reshape(-1)  # byte (r % 32) * 16 + (r // 32) * 4 + c
    v = groups * (s / scale.float())[..., None]
    a = v.abs()
    code = torch.zeros_like(a, dtype=torch.uint8)
    for bound, from_it in BOUNDS:
        code += (a >= bound) if from_it else (a > bound)
    code |= (torch.signbit(v) & ~v.isnan()).to(torch.uint8) << 3
    codes = code.view(bm * TILE_M, bn * TILE_N)[:rows, :cols]
    return codes[:, 0::2] | (codes[:, 1::2] << 4), scales


def nvfp4_bench(torch: Any, s: Spec) -> Bench:
    rows, cols = s.shape
    x = randn(torch, s.dtype, rows, cols)

    def tilegym(tg: Any) -> Callable[[], Any]:
        if base.DEVICE == "cuda" and torch.cuda.get_device_capability()[0] < 10:
            major, minor = torch.cuda.get_device_capability()
            raise Skip(
                f"TileGym's nvfp4_quantize casts to fp4 e2m1, which cuTile takes on sm_100 and "
                f"newer with Tile IR bytecode 13.3; this GPU is sm_{major}{minor}"
            )
        return lambda: Joined(tg.nvfp4_quantize(x, 1.0))

    blocks = -(-rows // TILE_M) * -(-cols // TILE_N)
    return Bench(
        lambda fo: lambda: Joined(fo.nvfp4_quantize(x, 1.0)),
        tilegym,
        lambda: Joined(nvfp4_torch(torch, x)),
        lambda: Joined(nvfp4_torch(torch, x)).double(),
        bytes=rows * cols * x.element_size() + rows * cols // 2 + blocks * 512,
        tilegym_note="tilegym.ops.nvfp4_quantize (experimental), cutile backend",
    )
