"""Elementwise cases: vecadd (c = a + b) and saxpy (out = alpha * x + y), f32, bandwidth-bound.

Bytes counted: each input read once and the output written once (12 bytes per element).
The fearless kernels are `examples/simt_kernels.py`'s and the Tile examples `vecadd` and `saxpy`
(1024-element tiles). The two cases differ only in saxpy's scalar `alpha`, passed before the
arrays to every kernel (`SCALARS`), so one function builds either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import dry, tile_track
from .harness import Ctx, DeviceCase, Prepared, device_impls, run_device_case
from .kernels_cuda import f32, i64, ptr
from .model import Record
from .peers import Peers

FAMILY = "elementwise"
CASES = ("vecadd", "saxpy")
ALPHA = 2.5
# Each case's scalar arguments, passed before its two input arrays (and its Tile example).
SCALARS: dict[str, tuple[float, ...]] = {"vecadd": (), "saxpy": (ALPHA,)}
TILE_CASES: dict[str, Callable[[], tile_track.TileCase]] = {
    "vecadd": tile_track.vecadd_case,
    "saxpy": tile_track.saxpy_case,
}


def size(quick: bool) -> int:
    return 1 << (27 if quick else 28)


def expected(name: str, a: Any, b: Any) -> Any:
    """The case's result on float64 inputs (torch tensors or NumPy arrays)."""
    return a + b if name == "vecadd" else ALPHA * a + b


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    n = size(ctx.quick)
    out: list[Record] = []
    for name in CASES:
        if name in selected:
            out += _case(ctx, name, n)
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


def _case(ctx: Ctx, name: str, n: int) -> list[Record]:
    torch = ctx.torch
    scalars = SCALARS[name]
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    params: dict[str, Any] = {"n": n, "dtype": "f32"}
    if scalars:
        params["alpha"] = ALPHA
    case = DeviceCase(
        name,
        FAMILY,
        "f32",
        reference=lambda: expected(name, a.double(), b.double()),
        bytes=12 * n,
        params=params,
    )

    def new() -> Any:
        return torch.empty(n, device="cuda")

    def simt() -> Prepared:
        ctx.peers.fearless_gpu()
        k = getattr(ctx.peers.simt_examples(), name)
        c, prep = new(), k.prepare(dry.grid(n), 256)  # saxpy declares no block; vecadd 256
        return Prepared(lambda: k(prep, *scalars, a, b, c), c, note="prepared launch")

    def tile() -> Prepared:
        return _tile(ctx, TILE_CASES[name](), new(), [a, b], scalars)

    def cuda_cpp() -> Prepared:
        c = new()
        args = [*map(f32, scalars), ptr(a), ptr(b), ptr(c), i64(n)]
        return Prepared(ctx.peers.cuda_cpp().launcher(name, n, args), c)

    def triton() -> Prepared:
        c = new()
        return Prepared(getattr(ctx.peers.triton(), f"{name}_launch")(*scalars, a, b, c), c)

    def cutile() -> Prepared:
        c = new()
        return Prepared(getattr(ctx.peers.cutile(), f"{name}_launch")(*scalars, a, b, c), c)

    def eager() -> Prepared:
        c = new()
        if name == "vecadd":
            return Prepared(lambda: torch.add(a, b, out=c), c)
        return Prepared(lambda: torch.add(b, a, alpha=ALPHA, out=c), c)

    return run_device_case(ctx, case, device_impls(simt, tile, cuda_cpp, triton, cutile, eager))


# ------------------------------------------------------------------------------- dry run


def dry_run(peers: Peers, selected: set[str]) -> list[Record]:
    rng = np.random.default_rng(5)
    n = 1000  # not a multiple of the block or the tile: the edges are exercised
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    out: list[Record] = []
    for name in CASES:
        if name in selected:
            out += _dry_case(peers, name, a, b)
    return out


def _dry_case(peers: Peers, name: str, a: np.ndarray, b: np.ndarray) -> list[Record]:
    import fearless as fl

    from .check import rel_err_numpy

    n, scalars = len(a), SCALARS[name]
    ref = expected(name, a.astype(np.float64), b.astype(np.float64))

    def simt() -> float:
        k = getattr(peers.simt_examples(), name)
        dry.compile_simt(peers.arch, k)
        c = np.full(n, np.nan, np.float32)
        k[dry.grid(n), 256](*scalars, a, b, c)
        return rel_err_numpy(c, ref)

    def tile() -> float:
        kernel, tc = tile_track.resolve(peers.tile_examples(), TILE_CASES[name]())
        c = fl.asarray(np.full(n, np.nan, np.float32))
        part = c.partition(tc.tile)
        args = tile_track.bind(kernel, part, [a, b], scalars, consts=tc.consts)
        tile_track.compile_for(kernel, args, peers.arch)
        kernel(*args)
        return rel_err_numpy(part.unpartition().numpy(), ref)

    return dry.fearless_records(name, FAMILY, "f32", simt, tile, n=n, dtype="f32")
