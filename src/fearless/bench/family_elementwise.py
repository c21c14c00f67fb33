"""Elementwise cases: vecadd (c = a + b) and saxpy (out = alpha * x + y), f32, bandwidth-bound.

Bytes counted: each input read once and the output written once (12 bytes per element).
The fearless kernels are `examples/simt_kernels.py`'s and the Tile examples `vecadd` and `saxpy`
(1024-element tiles).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dry, tile_track
from .harness import Ctx, DeviceCase, Prepared, run_device_case
from .kernels_cuda import f32, i64, ptr
from .model import (
    CUDA_CPP,
    CUTILE,
    FEARLESS_SIMT,
    FEARLESS_TILE,
    TORCH,
    TRITON,
    Record,
)
from .peers import Peers

FAMILY = "elementwise"
CASES = ("vecadd", "saxpy")
ALPHA = 2.5


def size(quick: bool) -> int:
    return 1 << (27 if quick else 28)


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    n = size(ctx.quick)
    out: list[Record] = []
    if "vecadd" in selected:
        out += _vecadd(ctx, n)
    if "saxpy" in selected:
        out += _saxpy(ctx, n)
    return out


def _tile(
    ctx: Ctx, case: tile_track.TileCase, c: Any, inputs: list[Any], scalars: tuple[Any, ...] = ()
) -> Prepared:
    import fearless as fl

    ctx.peers.fearless_gpu()
    kernel, tc = tile_track.resolve(ctx.peers.tile_examples(), case)
    part = fl.asarray(c).partition(tc.tile)
    args = tile_track.bind(kernel, part, inputs, scalars, consts=tc.consts)
    return Prepared(lambda: kernel(*args), c, note=f"tile {tc.tile}")


def _vecadd(ctx: Ctx, n: int) -> list[Record]:
    torch = ctx.torch
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    case = DeviceCase(
        "vecadd",
        FAMILY,
        "f32",
        reference=lambda: a.double() + b.double(),
        bytes=12 * n,
        params={"n": n, "dtype": "f32"},
    )

    def new() -> Any:
        return torch.empty(n, device="cuda")

    def simt() -> Prepared:
        ctx.peers.fearless_gpu()
        k = ctx.peers.simt_examples().vecadd
        c, prep = new(), k.prepare(dry.grid(n))
        return Prepared(lambda: k(prep, a, b, c), c, note="prepared launch")

    def cuda_cpp() -> Prepared:
        c = new()
        return Prepared(
            ctx.peers.cuda_cpp().launcher("vecadd", n, [ptr(a), ptr(b), ptr(c), i64(n)]), c
        )

    def triton() -> Prepared:
        c = new()
        return Prepared(ctx.peers.triton().vecadd_launch(a, b, c), c)

    def cutile() -> Prepared:
        c = new()
        return Prepared(ctx.peers.cutile().vecadd_launch(a, b, c), c)

    def eager() -> Prepared:
        c = new()
        return Prepared(lambda: torch.add(a, b, out=c), c)

    impls = [
        (FEARLESS_SIMT, simt),
        (FEARLESS_TILE, lambda: _tile(ctx, tile_track.vecadd_case(), new(), [a, b])),
        (CUDA_CPP, cuda_cpp),
        (TRITON, triton),
        (CUTILE, cutile),
        (TORCH, eager),
    ]
    return run_device_case(ctx, case, impls)


def _saxpy(ctx: Ctx, n: int) -> list[Record]:
    torch = ctx.torch
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    case = DeviceCase(
        "saxpy",
        FAMILY,
        "f32",
        reference=lambda: ALPHA * x.double() + y.double(),
        bytes=12 * n,
        params={"n": n, "dtype": "f32", "alpha": ALPHA},
    )

    def new() -> Any:
        return torch.empty(n, device="cuda")

    def simt() -> Prepared:
        ctx.peers.fearless_gpu()
        k = ctx.peers.simt_examples().saxpy
        out, prep = new(), k.prepare(dry.grid(n), 256)
        return Prepared(lambda: k(prep, ALPHA, x, y, out), out, note="prepared launch")

    def cuda_cpp() -> Prepared:
        out = new()
        args = [f32(ALPHA), ptr(x), ptr(y), ptr(out), i64(n)]
        return Prepared(ctx.peers.cuda_cpp().launcher("saxpy", n, args), out)

    def triton() -> Prepared:
        out = new()
        return Prepared(ctx.peers.triton().saxpy_launch(ALPHA, x, y, out), out)

    def cutile() -> Prepared:
        out = new()
        return Prepared(ctx.peers.cutile().saxpy_launch(ALPHA, x, y, out), out)

    def eager() -> Prepared:
        out = new()
        return Prepared(lambda: torch.add(y, x, alpha=ALPHA, out=out), out)

    impls = [
        (FEARLESS_SIMT, simt),
        (FEARLESS_TILE, lambda: _tile(ctx, tile_track.saxpy_case(), new(), [x, y], (ALPHA,))),
        (CUDA_CPP, cuda_cpp),
        (TRITON, triton),
        (CUTILE, cutile),
        (TORCH, eager),
    ]
    return run_device_case(ctx, case, impls)


# ------------------------------------------------------------------------------- dry run


def dry_run(peers: Peers, selected: set[str]) -> list[Record]:
    import fearless as fl

    rng = np.random.default_rng(5)
    n = 1000  # not a multiple of the block or the tile: the edges are exercised
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    out: list[Record] = []

    if "vecadd" in selected:

        def simt_vecadd() -> float:
            k = peers.simt_examples().vecadd
            dry.compile_simt(peers.arch, k)
            c = np.full(n, np.nan, np.float32)
            k[dry.grid(n), 256](a, b, c)
            return _err(c, a.astype(np.float64) + b)

        def tile_vecadd() -> float:
            kernel, tc = tile_track.resolve(peers.tile_examples(), tile_track.vecadd_case())
            c = fl.asarray(np.full(n, np.nan, np.float32))
            part = c.partition(tc.tile)
            args = tile_track.bind(kernel, part, [a, b], consts=tc.consts)
            tile_track.compile_for(kernel, args, peers.arch)
            kernel(*args)
            return _err(part.unpartition().numpy(), a.astype(np.float64) + b)

        out.append(dry_record("vecadd", FEARLESS_SIMT, simt_vecadd, n))
        out.append(dry_record("vecadd", FEARLESS_TILE, tile_vecadd, n))

    if "saxpy" in selected:

        def simt_saxpy() -> float:
            k = peers.simt_examples().saxpy
            dry.compile_simt(peers.arch, k)
            c = np.full(n, np.nan, np.float32)
            k[dry.grid(n), 256](ALPHA, a, b, c)
            return _err(c, ALPHA * a.astype(np.float64) + b)

        def tile_saxpy() -> float:
            kernel, tc = tile_track.resolve(peers.tile_examples(), tile_track.saxpy_case())
            c = fl.asarray(np.full(n, np.nan, np.float32))
            part = c.partition(tc.tile)
            args = tile_track.bind(kernel, part, [a, b], [ALPHA], consts=tc.consts)
            tile_track.compile_for(kernel, args, peers.arch)
            kernel(*args)
            return _err(part.unpartition().numpy(), ALPHA * a.astype(np.float64) + b)

        out.append(dry_record("saxpy", FEARLESS_SIMT, simt_saxpy, n))
        out.append(dry_record("saxpy", FEARLESS_TILE, tile_saxpy, n))
    return out


def dry_record(case: str, impl: str, body: Any, n: int) -> Record:
    return dry.dry_record(case, FAMILY, impl, "f32", body, n=n, dtype="f32")


def _err(out: np.ndarray, ref: np.ndarray) -> float:
    from .check import rel_err_numpy

    return rel_err_numpy(out, ref)
