"""Transpose of a float32 (rows x cols) matrix into a new (cols x rows) one, both row-major.

Bytes counted: read once, written once. fearless SIMT (`kernels_simt.transpose`) and its CUDA
C++ twin move 32 x 32 tiles through shared memory (rows padded to 33: no bank conflicts) with
blocks of 32 x TRANSPOSE_ROWS threads: each thread reads 32 / TRANSPOSE_ROWS elements of its
tile of x (coalesced), a barrier, then writes as many elements of out (coalesced; SIMT's
`tile_index_2d(k, 32)`) from the tile's transposed slots. Triton, cuTile Python and the Tile
example `transpose` move 64 x 64 tiles; torch copies a transposed view. The matrix is not
square, so a swapped index shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dry, tile_track
from .harness import Ctx, DeviceCase, Prepared, device_impls, run_device_case
from .kernels_cuda import i64, ptr
from .model import Record
from .peers import Peers

FAMILY = "transpose"
CASES = ("transpose",)
TILE = 32  # kernels_simt.TILE: the SIMT kernel's (and its twin's) tile


def shape(quick: bool) -> tuple[int, int]:
    return (2048, 8192) if quick else (4096, 16384)


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    if "transpose" not in selected:
        return []
    torch = ctx.torch
    rows, cols = shape(ctx.quick)
    n = rows * cols
    x = torch.randn(rows, cols, device="cuda")
    case = DeviceCase(
        "transpose",
        FAMILY,
        "f32",
        reference=lambda: x.double().t(),
        bytes=8 * n,
        params={"rows": rows, "cols": cols, "dtype": "f32"},
    )

    def new() -> Any:
        return torch.empty(cols, rows, device="cuda")

    def tiles() -> tuple[int, int]:
        """The grid: x's tiles, (tile rows, tile columns); block (bx, by) writes out's (by, bx)."""
        return (rows + TILE - 1) // TILE, (cols + TILE - 1) // TILE

    def simt() -> Prepared:
        from . import kernels_simt as K

        ctx.peers.fearless_gpu()
        y, prep = new(), K.transpose.prepare(tiles())
        note = f"32x32 shared tiles, 32x{K.TRANSPOSE_ROWS} threads"
        return Prepared(lambda: K.transpose(prep, x, y), y, note=note)

    def cuda_cpp() -> Prepared:
        y = new()
        args = [ptr(x), i64(rows), i64(cols), ptr(y)]
        from .kernels_simt import TRANSPOSE_ROWS

        block = (TILE, TRANSPOSE_ROWS)
        launch = ctx.peers.cuda_cpp().launcher("transpose", n, args, grid=tiles(), block=block)
        return Prepared(launch, y, note=f"32x32 shared tiles, 32x{TRANSPOSE_ROWS} threads")

    def triton() -> Prepared:
        y = new()
        return Prepared(ctx.peers.triton().transpose_launch(x, y), y, note="64x64 tiles")

    def cutile() -> Prepared:
        y = new()
        return Prepared(ctx.peers.cutile().transpose_launch(x, y), y, note="64x64 tiles")

    def tile() -> Prepared:
        import fearless as fl

        ctx.peers.fearless_gpu()
        kernel, tc = tile_track.resolve(ctx.peers.tile_examples(), tile_track.transpose_case())
        y = new()
        args = tile_track.bind(kernel, fl.asarray(y).partition(tc.tile), [x], consts=tc.consts)
        return Prepared(lambda: kernel(*args), y, note="x".join(map(str, tc.tile)) + " tiles")

    def eager() -> Prepared:
        y = new()
        return Prepared(lambda: y.copy_(x.t()), y)

    return run_device_case(ctx, case, device_impls(simt, tile, cuda_cpp, triton, cutile, eager))


def dry_run(peers: Peers, selected: set[str]) -> list[Record]:
    if "transpose" not in selected:
        return []
    from . import kernels_simt as K
    from .check import rel_err_numpy

    # Not square and not whole 64 x 64 tiles; the extents divide by 4 like the GPU run's, so
    # the Tile cubin compiled here is the GPU run's specialisation.
    rows, cols = 100, 68
    x = np.random.default_rng(3).standard_normal((rows, cols)).astype(np.float32)

    def body() -> float:
        dry.compile_simt(peers.arch, K.transpose)
        y = np.full((cols, rows), np.nan, np.float32)
        grid = ((rows + K.TILE - 1) // K.TILE, (cols + K.TILE - 1) // K.TILE)
        K.transpose[grid, (K.TILE, K.TRANSPOSE_ROWS)](x, y)  # partial tiles on both edges
        return rel_err_numpy(y, x.T)

    def tile() -> float:
        import fearless as fl

        kernel, tc = tile_track.resolve(peers.tile_examples(), tile_track.transpose_case())
        part = fl.asarray(np.full((cols, rows), np.nan, np.float32)).partition(tc.tile)
        args = tile_track.bind(kernel, part, [x], consts=tc.consts)
        tile_track.compile_for(kernel, args, peers.arch)
        kernel(*args)
        return rel_err_numpy(part.unpartition().numpy(), x.T)

    return dry.fearless_records(
        "transpose", FAMILY, "f32", body, tile, rows=rows, cols=cols, dtype="f32"
    )
