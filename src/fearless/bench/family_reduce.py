"""Sum reduction of a float32 vector to one value (bytes counted: the input, read once).

fearless SIMT has no atomics and no shared memory yet, so its sum is `partial_sum` launched
until one value is left: each thread adds a strided slice (coalesced across threads), and
every pass shrinks the vector 256-fold (2^28 -> 2^20 -> 2^12 -> 2^4 -> 1: four launches).
The CUDA C++ twin runs the same passes. Triton and cuTile Python use their standard two-stage
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
FANIN = 256  # elements each thread adds per pass
PEER_PARTIALS = 1024  # programs of the Triton and cuTile first stage


def passes(n: int, fanin: int = FANIN) -> list[int]:
    """The output length of each partial_sum pass, down to 1."""
    out = []
    while n > 1:
        n = (n + fanin - 1) // fanin
        out.append(n)
    return out or [1]


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
        params={"n": n, "dtype": "f32", "passes": passes(n)},
    )

    def buffers() -> list[Any]:
        return [torch.empty(m, device="cuda") for m in passes(n)]

    def simt() -> Prepared:
        from . import kernels_simt as K

        ctx.peers.fearless_gpu()
        bufs = buffers()
        steps = [(K.partial_sum.prepare(dry.grid(len(b))), b) for b in bufs]
        srcs = [x, *bufs[:-1]]

        def go() -> None:
            for (prep, dst), src in zip(steps, srcs, strict=True):
                K.partial_sum(prep, src, dst)

        return Prepared(go, bufs[-1], note=f"{len(bufs)} partial_sum passes, no atomics")

    def cuda_cpp() -> Prepared:
        module = ctx.peers.cuda_cpp()
        bufs = buffers()
        srcs = [x, *bufs[:-1]]
        launches = [
            module.launcher(
                "partial_sum", b.numel(), [ptr(s), i64(s.numel()), ptr(b), i64(b.numel())]
            )
            for s, b in zip(srcs, bufs, strict=True)
        ]

        def go() -> None:
            for launch in launches:
                launch()

        return Prepared(go, bufs[-1], note=f"{len(bufs)} partial_sum passes")

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

    # Three SIMT passes at FANIN 256 with ragged ends; 18 Tile tiles of 4096, the last partial,
    # over 8 partials. Both extents divide by 4 like the GPU run's, so the Tile cubins compiled
    # here are the GPU run's specialisations.
    n, n_partials = 70000, 8
    x = np.random.default_rng(9).random(n, dtype=np.float32)
    ref = np.array([x.astype(np.float64).sum()])

    def body() -> float:
        dry.compile_simt(peers.arch, K.partial_sum)
        src = x
        for m in passes(n):
            dst = np.full(m, np.nan, np.float32)
            K.partial_sum[dry.grid(m), 256](src, dst)
            src = dst
        return rel_err_numpy(src, ref)

    def tile() -> float:
        partials = np.full(n_partials, np.nan, np.float32)
        total = np.full(1, np.nan, np.float32)
        for kernel, args in tile_launches(peers.tile_examples(), x, partials, total):
            tile_track.compile_for(kernel, args, peers.arch)
            kernel(*args)
        return rel_err_numpy(total, ref)

    return dry.fearless_records("sum", FAMILY, "f32", body, tile, n=n, dtype="f32")
