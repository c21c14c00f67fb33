"""Tile kernel parameters without a launch: `P` (a partition), `T` (a tensor), and `SIGNATURES`,
the specialisations of the Tile examples that tests/gpu/test_tile_gpu.py launches."""

from __future__ import annotations

from fearless import bf16, f16, f32
from fearless.abi import TileParam, array_align


def P(name, dt, tile, shape):
    return TileParam(name, "part", dt, len(tile), tile, align=array_align(0, shape, dt.itemsize))


def T(name, dt, shape):
    return TileParam(name, "tensor", dt, len(shape), align=array_align(0, shape, dt.itemsize))


def S(name, dt):
    return TileParam(name, "scalar", dt)


SIGNATURES = {
    "vecadd": (P("z", f32, (128,), (1000,)), T("x", f32, (1000,)), T("y", f32, (1000,))),
    "softmax_f32": (P("out", f32, (4, 128), (37, 100)), T("x", f32, (37, 100))),
    "softmax_bf16": (P("out", bf16, (4, 128), (37, 100)), T("x", bf16, (37, 100))),
    "matmul_f16": (
        P("c", f16, (64, 64), (200, 130)),
        T("a", f16, (200, 96)),
        T("b", f16, (96, 130)),
        TileParam("BK", "const", value=32),
    ),
    "matmul_bf16": (
        P("c", bf16, (64, 64), (200, 130)),
        T("a", bf16, (200, 96)),
        T("b", bf16, (96, 130)),
        TileParam("BK", "const", value=32),
    ),
    "rms_norm": (
        P("out", f32, (4, 128), (21, 100)),
        T("x", f32, (21, 100)),
        T("w", f32, (100,)),
        S("eps", f32),
    ),
    "layer_norm": (
        P("out", f32, (4, 128), (21, 100)),
        T("x", f32, (21, 100)),
        T("w", f32, (100,)),
        T("b", f32, (100,)),
        S("eps", f32),
    ),
    "saxpy": (
        P("out", f32, (128,), (1000,)),
        S("alpha", f32),
        T("x", f32, (1000,)),
        T("y", f32, (1000,)),
    ),
    "transpose": (P("out", f32, (32, 16), (68, 100)), T("x", f32, (100, 68))),
    "sum_tiles:partials": (
        P("out", f32, (1,), (8,)),
        T("x", f32, (70000,)),
        TileParam("TILE", "const", value=1024),
    ),
    "sum_tiles:final": (
        P("out", f32, (1,), (1,)),
        T("x", f32, (8,)),
        TileParam("TILE", "const", value=16),
    ),
    "fill_ones": (P("z", f32, (128,), (1000,)),),
    "add7": (P("z", f32, (128,), (1000,)), *(T(a, f32, (1000,)) for a in "abcdefg")),
}
