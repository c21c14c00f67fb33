"""GEMM, C = A @ B on square n x n x n problems in fp16 and bf16, f32 accumulation.

TFLOP/s counted as 2 n^3. Peers: torch (cuBLAS), Triton (the tutorial kernel, one fixed
Hopper configuration), cuTile Python (plain tile kernel) and TileGym's tuned matmul when
installed; the Tile track runs its `matmul_<dtype>` example (output in the input dtype). fearless
SIMT has no shared memory yet, so its GEMM (and its CUDA C++ twin) is one thread per output
element: far below the matrix units, and run only up to `naive_max` to bound the suite's time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import dry, tile_track
from .harness import Builder, Ctx, DeviceCase, Prepared, device_impls, run_device_case
from .kernels_cuda import i64, ptr
from .model import Record, Skip
from .peers import Peers

FAMILY = "gemm"
DTYPES = ("f16", "bf16")
SIZES = (1024, 2048, 4096, 8192)
QUICK_SIZES = (2048, 8192)
CASES = tuple(f"gemm_{dt}_{n}" for dt in DTYPES for n in SIZES)
NAIVE_NOTE = "one thread per output element, no shared memory"


def naive_max(quick: bool) -> int:
    return 2048 if quick else 4096


def sizes(quick: bool) -> tuple[int, ...]:
    return QUICK_SIZES if quick else SIZES


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    out: list[Record] = []
    for dt in DTYPES:
        for n in sizes(ctx.quick):
            if f"gemm_{dt}_{n}" in selected:
                out += _gemm(ctx, dt, n)
    return out


def _gemm(ctx: Ctx, dt: str, n: int) -> list[Record]:
    torch = ctx.torch
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dt]
    a = torch.randn(n, n, device="cuda").to(tdt)
    b = torch.randn(n, n, device="cuda").to(tdt)
    case = DeviceCase(
        f"gemm_{dt}_{n}",
        FAMILY,
        dt,
        reference=lambda: a.double() @ b.double(),
        flops=2 * n**3,
        params={"m": n, "n": n, "k": n, "dtype": dt},
    )

    def new() -> Any:
        return torch.empty(n, n, device="cuda", dtype=tdt)

    def too_big() -> None:
        limit = naive_max(ctx.quick)
        if n > limit:
            raise Skip(
                f"naive GEMM ({NAIVE_NOTE}: fearless SIMT has none yet) runs only up to "
                f"{limit}^3, to bound the suite's time"
            )

    def simt() -> Prepared:
        from . import kernels_simt as K

        too_big()
        ctx.peers.fearless_gpu()
        k = K.gemm_f16 if dt == "f16" else K.gemm_bf16
        c, prep = new(), k.prepare(dry.grid(n * n))
        af, bf, cf = a.reshape(-1), b.reshape(-1), c.reshape(-1)
        return Prepared(lambda: k(prep, af, bf, n, n, cf), c, note=NAIVE_NOTE)

    def cuda_cpp() -> Prepared:
        too_big()
        c = new()
        args = [ptr(a), ptr(b), i64(n), i64(n), ptr(c), i64(n * n)]
        return Prepared(
            ctx.peers.cuda_cpp().launcher(f"gemm_{dt}", n * n, args), c, note=NAIVE_NOTE
        )

    def tile() -> Prepared:
        import fearless as fl

        ctx.peers.fearless_gpu()
        kernel, tc = tile_track.resolve(ctx.peers.tile_examples(), tile_track.gemm_case(dt))
        c = new()
        part = fl.asarray(c).partition(tc.tile)
        args = tile_track.bind(kernel, part, [a, b], consts=tc.consts)
        note = f"tile {tc.tile}, {tc.consts}"
        return Prepared(lambda: kernel(*args), c, note=note)

    def triton() -> Prepared:
        c = new()
        kt = ctx.peers.triton()
        return Prepared(kt.matmul_launch(a, b, c), c, note=f"config {kt.MATMUL_CONFIG}")

    def cutile() -> Prepared:
        c = new()
        return Prepared(ctx.peers.cutile().matmul_launch(a, b, c), c, note="tiles 128x128x64")

    tilegym, eager = peer_builders(ctx, a, b, new)
    impls = device_impls(simt, tile, cuda_cpp, triton, cutile, eager, tilegym=tilegym)
    return run_device_case(ctx, case, impls)


# ------------------------------------------------------------------------------- dry run


def dry_run(peers: Peers, selected: set[str]) -> list[Record]:
    """Each dtype once, at a small ragged size (its cases share the kernels)."""
    import fearless as fl

    from . import kernels_simt as K
    from .check import rel_err_numpy

    m, n, k = 19, 23, 40
    rng = np.random.default_rng(13)
    out: list[Record] = []
    for dt in DTYPES:
        names = [c for c in selected if c.startswith(f"gemm_{dt}_")]
        if not names:
            continue
        a32 = rng.standard_normal((m, k)).astype(np.float32)
        b32 = rng.standard_normal((k, n)).astype(np.float32)
        want = kern_dtype(dt)
        a2, b2 = fl.asarray(a32, dtype=want), fl.asarray(b32, dtype=want)  # Tile: 2-D
        a1, b1 = fl.asarray(a32.reshape(-1), dtype=want), fl.asarray(b32.reshape(-1), dtype=want)
        ref = _values(a2.numpy(), dt) @ _values(b2.numpy(), dt)

        def simt(dt: str = dt, a1: Any = a1, b1: Any = b1, ref: Any = ref) -> float:
            kern = K.gemm_f16 if dt == "f16" else K.gemm_bf16
            dry.compile_simt(peers.arch, kern)
            c = fl.empty(m * n, dtype=kern_dtype(dt))
            kern[dry.grid(m * n), 256](a1, b1, n, k, c)
            return rel_err_numpy(_values(c.numpy(), dt).reshape(m, n), ref)

        def tile(
            dt: str = dt, a2: Any = a2, b2: Any = b2, ref: Any = ref, want: Any = want
        ) -> float:
            kernel, tc = tile_track.resolve(peers.tile_examples(), tile_track.gemm_case(dt))
            # Compile the GPU run's tiles; simulate small ones, so the grid and the K loop
            # both take several steps over these ragged sizes.
            gpu_part = fl.zeros((m, n), dtype=want).partition(tc.tile)
            gpu_args = tile_track.bind(kernel, gpu_part, [a2, b2], consts=tc.consts)
            tile_track.compile_for(kernel, gpu_args, peers.arch)
            part = fl.asarray(np.full((m, n), np.nan, np.float32), dtype=want).partition((16, 16))
            args = tile_track.bind(kernel, part, [a2, b2], consts={**tc.consts, "BK": 16})
            kernel(*args)
            return rel_err_numpy(_values(part.unpartition().numpy(), dt), ref)

        params = {"m": m, "n": n, "k": k, "dtype": dt, "covers": sorted(names)}
        out += dry.fearless_records(f"gemm_{dt}", FAMILY, dt, simt, tile, **params)
    return out


def kern_dtype(dt: str) -> Any:
    import fearless as fl

    return fl.f16 if dt == "f16" else fl.bf16


def _values(stored: np.ndarray, dt: str) -> np.ndarray:
    """Host storage (f16 values, or bf16 raw bits) as float64 values."""
    from .check import bf16_to_f32

    vals = stored if dt == "f16" else bf16_to_f32(stored)
    return np.asarray(vals, dtype=np.float64)


def peer_builders(ctx: Ctx, a: Any, b: Any, new: Callable[[], Any]) -> tuple[Builder, Builder]:
    """TileGym's matmul and cuBLAS (torch) on a @ b (also the shapes family's)."""

    def tilegym() -> Prepared:
        ops = ctx.peers.tilegym().ops
        return Prepared(lambda: ops.matmul(a, b), note="tilegym.ops.matmul, cutile backend")

    def eager() -> Prepared:
        c = new()
        return Prepared(lambda: ctx.torch.matmul(a, b, out=c), c, note="cuBLAS")

    return tilegym, eager
