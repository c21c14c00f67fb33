"""Sum reduction of a float32 vector to one value (bytes counted: the input, read once).

fearless SIMT runs `kernels_simt.block_sum` once: SUM_BLOCKS (8192) blocks of 256 threads, each
thread adds a strided share of x (coalesced across threads), `simt.block.reduce` adds a block's
threads, and one `simt.atomic.add` per block adds it into a one-element `AtomicSlice`, zeroed
inside the timed run (`zero_()`, a memset, before the launch). The CUDA C++ twin runs the same
algorithm (warp shuffles, a shared buffer, `atomicAdd`). Triton and cuTile Python use their standard two-stage
form (1024 programs each reduce a strided set of blocks, then one program sums the partials),
and so does the Tile example: `sum_tiles` launched twice (x into 1024 partials in 4096-element
tiles, then the partials into one value; tile_track.sum_cases). torch calls its own reduction
kernel. Inputs are uniform in [0, 1) so the sum is well conditioned and the float32 check is
meaningful.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dry, tile_track
from .harness import Ctx, DeviceCase, Prepared, device_impls, run_device_case
from .kernels_cuda import i64, ptr
from .model import Record
from .peers import Peers

FAMILY = "reduce"
CASES = ("sum",)
PEER_PARTIALS = 1024  # programs of the Triton and cuTile first stage


def size(quick: bool) -> int:
    return 1 << (26 if quick else 28)


def tile_launches(examples: Any, x: Any, partials: Any, out: Any) -> list[tuple[Any, Any]]:
    """The Tile sum's two launches, (kernel, args) each: x into `partials`, then into `out`."""
    import fearless as fl

    steps = []
    for case, dst, src in zip(tile_track.sum_cases(), (partials, out), (x, partials), strict=True):
        kernel, tc = tile_track.resolve(examples, case)
        part = fl.asarray(dst).partition(tc.tile)
        steps.append((kernel, tile_track.bind(kernel, part, [src], consts=tc.consts)))
    return steps


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    if "sum" not in selected:
        return []
    torch = ctx.torch
    n = size(ctx.quick)
    x = torch.rand(n, device="cuda")
    case = DeviceCase(
        "sum",
        FAMILY,
        "f32",
        reference=lambda: x.double().sum().reshape(1),
        bytes=4 * n,
        params={"n": n, "dtype": "f32"},
    )

    def simt() -> Prepared:
        from . import kernels_simt as K

        ctx.peers.fearless_gpu()
        out = torch.empty(1, device="cuda")
        prep = K.block_sum.prepare(K.SUM_BLOCKS)

        def go() -> None:
            out.zero_()
            K.block_sum(prep, x, out)

        return Prepared(go, out, note=f"{K.SUM_BLOCKS} blocks, block.reduce, atomic.add")

    def cuda_cpp() -> Prepared:
        from .kernels_simt import SUM_BLOCK, SUM_BLOCKS

        out = torch.empty(1, device="cuda")
        args = [ptr(x), i64(n), ptr(out)]
        launch = ctx.peers.cuda_cpp().launcher(
            "block_sum", n, args, grid=SUM_BLOCKS, block=SUM_BLOCK
        )

        def go() -> None:
            out.zero_()
            launch()

        return Prepared(go, out, note=f"{SUM_BLOCKS} blocks, atomicAdd")

    def triton() -> Prepared:
        out, part = torch.empty(1, device="cuda"), torch.empty(PEER_PARTIALS, device="cuda")
        return Prepared(ctx.peers.triton().sum_launch(x, out, part), out, note="two stages")

    def cutile() -> Prepared:
        out, part = torch.empty(1, device="cuda"), torch.empty(PEER_PARTIALS, device="cuda")
        return Prepared(ctx.peers.cutile().sum_launch(x, out, part), out, note="two stages")

    def tile() -> Prepared:
        ctx.peers.fearless_gpu()
        p = tile_track.SUM_PARTIALS
        out, part = torch.empty(1, device="cuda"), torch.empty(p, device="cuda")
        (k1, a1), (k2, a2) = tile_launches(ctx.peers.tile_examples(), x, part, out)

        def go() -> None:
            k1(*a1)
            k2(*a2)

        return Prepared(go, out, note=f"two stages, {p} partials")

    def eager() -> Prepared:
        return Prepared(lambda: torch.sum(x).reshape(1))

    return run_device_case(ctx, case, device_impls(simt, tile, cuda_cpp, triton, cutile, eager))


def dry_run(peers: Peers, selected: set[str]) -> list[Record]:
    if "sum" not in selected:
        return []
    from . import kernels_simt as K
    from .check import rel_err_numpy

    # SIMT: 8 blocks of 256 threads, each thread adds 34 or 35 elements (the four-way loop and
    # its tail); Tile: 18 tiles of 4096, the last partial, over 8 partials. Both extents divide by 4 like the GPU run's, so the Tile cubins compiled
    # here are the GPU run's specialisations.
    n, n_partials = 70000, 8
    x = np.random.default_rng(9).random(n, dtype=np.float32)
    ref = np.array([x.astype(np.float64).sum()])

    def body() -> float:
        dry.compile_simt(peers.arch, K.block_sum)
        total = np.zeros(1, np.float32)
        K.block_sum[8, K.SUM_BLOCK](x, total)
        return rel_err_numpy(total, ref)

    def tile() -> float:
        partials = np.full(n_partials, np.nan, np.float32)
        total = np.full(1, np.nan, np.float32)
        for kernel, args in tile_launches(peers.tile_examples(), x, partials, total):
            tile_track.compile_for(kernel, args, peers.arch)
            kernel(*args)
        return rel_err_numpy(total, ref)

    return dry.fearless_records("sum", FAMILY, "f32", body, tile, n=n, dtype="f32")
