"""GEMM, C = A @ B on square n x n x n problems in fp16 and bf16, f32 accumulation.

TFLOP/s counted as 2 n^3. Peers: torch (cuBLAS), Triton (the tutorial kernel, one fixed
Hopper configuration), cuTile Python (plain tile kernel) and TileGym's tuned matmul when
installed; the Tile track runs its `matmul_<dtype>` example (output in the input dtype). The
SIMT GEMM (kernels_simt.make_gemm) and its CUDA C++ twin stage 64 x 64 tiles of a and b in
shared memory and sum in f32 on the CUDA cores: SIMT has no tensor-core `mma`, so they run far
below the matrix units, at every size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import dry, tile_track
from .harness import Builder, Ctx, DeviceCase, Prepared, device_impls, run_device_case
from .kernels_cuda import i64, ptr
from .model import Record
from .peers import Peers

FAMILY = "gemm"
DTYPES = ("f16", "bf16")
SIZES = (1024, 2048, 4096, 8192)
QUICK_SIZES = (2048, 8192)
CASES = tuple(f"gemm_{dt}_{n}" for dt in DTYPES for n in SIZES)
SIMT_NOTE = "64 x 64 shared-memory tiles, 16 rows a thread, f32 FMA (no tensor cores)"


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

    def simt() -> Prepared:
        from . import kernels_simt as K

        ctx.peers.fearless_gpu()
        k = K.gemm_f16 if dt == "f16" else K.gemm_bf16
        c, prep = new(), k.prepare(K.gemm_grid(n, n))
        return Prepared(lambda: k(prep, a, b, c), c, note=SIMT_NOTE)

    def cuda_cpp() -> Prepared:
        from . import kernels_simt as K

        c = new()
        args = [ptr(a), ptr(b), i64(n), i64(n), i64(n), ptr(c)]
        launch = ctx.peers.cuda_cpp().launcher(
            f"gemm_{dt}", n * n, args, grid=K.gemm_grid(n, n), block=(K.GEMM_TILE, K.GEMM_ROWS)
        )
        return Prepared(launch, c, note=SIMT_NOTE)

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

    # ragged, and past one SIMT tile (64) on every axis: edge tiles and several K steps
    m, n, k = 70, 75, 130
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
        ref = _values(a2.numpy(), dt) @ _values(b2.numpy(), dt)

        def simt(dt: str = dt, a2: Any = a2, b2: Any = b2, ref: Any = ref) -> float:
            kern = K.gemm_f16 if dt == "f16" else K.gemm_bf16
            dry.compile_simt(peers.arch, kern)
            c = fl.asarray(np.full((m, n), np.nan, np.float32), dtype=kern_dtype(dt))
            kern[K.gemm_grid(m, n), (K.GEMM_TILE, K.GEMM_ROWS)](a2, b2, c)
            return rel_err_numpy(_values(c.numpy(), dt), ref)

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
