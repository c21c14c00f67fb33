"""Row-wise cases on a float32 (rows x cols) matrix: softmax, rms_norm, layer_norm.

Bytes counted: the matrix read once and written once, plus the weight (and bias) vectors.
fearless SIMT runs each as one safe kernel (`kernels_simt.py`), one block per row, the row's
statistics through `simt.block.reduce`: rows of at most 1024 columns, a multiple of 4, held in
registers as chunks of 4 moved by vector loads and stores (`kernels_simt_chunks.py`:
`simt.thread.block_column(k, 4)`, `v[k] = x[i]`); other rows of at most 1024 held in registers
a column at a time (`simt.local.array`, `block_column(k)`); longer ones walked by
`simt.thread.block_stride` (x read twice). The CUDA C++ twin runs the chunk algorithm with
float4 (warp shuffles and a shared buffer). Triton, cuTile Python and the Tile
example keep a whole row in one block; TileGym (when installed) and torch eager run their own
kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import dry, tile_track
from .harness import Builder, Ctx, DeviceCase, Impls, Prepared, device_impls, run_device_case
from .kernels_cuda import f32, i64, ptr
from .model import Record, Skip
from .peers import Peers

FAMILY = "rows"
CASES = ("softmax", "rms_norm", "layer_norm")
EPS = 1e-5
TILE_KERNELS = {"softmax": "softmax_f32", "rms_norm": "rms_norm", "layer_norm": "layer_norm"}
SIMT_NOTE = "a block per row, block.reduce"


def shape(quick: bool) -> tuple[int, int]:
    return (16384, 1024) if quick else (65536, 1024)


def operands(name: str, x: Any, w: Any, b: Any) -> tuple[list[Any], list[float]]:
    """The case's input arrays and scalars, in the order the Tile examples and the Triton and
    cuTile peers (`<case>_launch(*inputs, *scalars, out)`) take them."""
    inputs = {"softmax": [x], "rms_norm": [x, w], "layer_norm": [x, w, b]}[name]
    return inputs, ([] if name == "softmax" else [EPS])


def references(torch: Any, x: Any, w: Any, b: Any) -> dict[str, Callable[[], Any]]:
    def softmax() -> Any:
        return torch.softmax(x.double(), dim=1)

    def rms_norm() -> Any:
        xd = x.double()
        return xd * torch.rsqrt(xd.pow(2).mean(dim=1, keepdim=True) + EPS) * w.double()

    def layer_norm() -> Any:
        xd = x.double()
        return torch.nn.functional.layer_norm(xd, (xd.shape[1],), w.double(), b.double(), EPS)

    return {"softmax": softmax, "rms_norm": rms_norm, "layer_norm": layer_norm}


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    torch = ctx.torch
    rows, cols = shape(ctx.quick)
    out: list[Record] = []
    for name in CASES:
        if name not in selected:
            continue
        x = torch.randn(rows, cols, device="cuda")
        w = torch.randn(cols, device="cuda")
        b = torch.randn(cols, device="cuda")
        vectors = {"softmax": 0, "rms_norm": 1, "layer_norm": 2}[name]
        case = DeviceCase(
            name,
            FAMILY,
            "f32",
            reference=references(torch, x, w, b)[name],
            bytes=8 * rows * cols + 4 * cols * vectors,
            params={"rows": rows, "cols": cols, "dtype": "f32"},
        )
        out += run_device_case(ctx, case, _impls(ctx, name, x, w, b))
    return out


def _impls(ctx: Ctx, name: str, x: Any, w: Any, b: Any) -> Impls:
    torch = ctx.torch
    rows, cols = x.shape
    n = rows * cols
    inputs, scalars = operands(name, x, w, b)

    def new() -> Any:
        return torch.empty(rows, cols, device="cuda")

    def simt() -> Prepared:
        from . import kernels_simt as K

        ctx.peers.fearless_gpu()
        y = new()
        kernel, threads = K.row_kernel(name, cols)
        prep = kernel.prepare(rows, threads)
        args = (*inputs, *scalars, y)
        form = kernel.name.rsplit("_", 1)[-1]  # softmax_chunks, rms_norm_registers, layer_norm
        note = {"chunks": "chunks of 4 (vector loads)", "registers": "registers"}.get(
            form, "block_stride"
        )
        return Prepared(lambda: kernel(prep, *args), y, note=f"{SIMT_NOTE}, {note}")

    def cuda_cpp() -> Prepared:
        from .kernels_simt_chunks import CHUNK_COLS, CHUNK_THREADS, CHUNK_WIDTH

        if cols > CHUNK_COLS or cols % CHUNK_WIDTH:
            raise Skip(
                f"the CUDA C++ twins hold rows of at most {CHUNK_COLS} columns, a multiple of "
                f"{CHUNK_WIDTH}, in float4 registers"
            )
        m = ctx.peers.cuda_cpp()
        y = new()
        px, py, c = ptr(x), ptr(y), i64(cols)
        args = {
            "softmax": [px, py, c],
            "rms_norm": [px, ptr(w), c, f32(EPS), py],
            "layer_norm": [px, ptr(w), ptr(b), c, f32(EPS), py],
        }[name]
        launch = m.launcher(name, n, args, grid=rows, block=CHUNK_THREADS)
        return Prepared(launch, y, note=f"{SIMT_NOTE}, float4 chunks")

    def tile() -> Prepared:
        import fearless as fl

        ctx.peers.fearless_gpu()
        case = tile_track.row_case(TILE_KERNELS[name], cols, name)
        kernel, tc = tile_track.resolve(ctx.peers.tile_examples(), case)
        y = new()
        part = fl.asarray(y).partition(tc.tile)
        args = tile_track.bind(kernel, part, inputs, scalars, tc.consts)
        return Prepared(lambda: kernel(*args), y, note=f"tile {tc.tile}")

    def triton() -> Prepared:
        kt, y = ctx.peers.triton(), new()
        return Prepared(getattr(kt, f"{name}_launch")(*inputs, *scalars, y), y)

    def cutile() -> Prepared:
        kc, y = ctx.peers.cutile(), new()
        return Prepared(getattr(kc, f"{name}_launch")(*inputs, *scalars, y), y)

    tilegym, eager = peer_builders(ctx, name, x, w, b)
    return device_impls(simt, tile, cuda_cpp, triton, cutile, eager, tilegym=tilegym)


def peer_builders(ctx: Ctx, name: str, x: Any, w: Any, b: Any) -> tuple[Builder, Builder]:
    """TileGym's and torch's `name` on (x, w, b): functional, so their results are checked
    (also the shapes family's)."""
    torch = ctx.torch
    cols = x.shape[1]

    def tilegym() -> Prepared:
        ops = ctx.peers.tilegym().ops
        run = {
            "softmax": lambda: ops.softmax(x),
            "rms_norm": lambda: ops.rms_norm(x, None, w, EPS),
            "layer_norm": lambda: ops.layer_norm_legacy(x, None, w, b, EPS),
        }[name]
        return Prepared(run, note="tilegym.ops, cutile backend")

    def eager() -> Prepared:
        fn = torch.nn.functional
        run = {
            "softmax": lambda: torch.softmax(x, dim=1),
            "rms_norm": lambda: fn.rms_norm(x, (cols,), w, EPS),
            "layer_norm": lambda: fn.layer_norm(x, (cols,), w, b, EPS),
        }[name]
        return Prepared(run)

    return tilegym, eager


# ------------------------------------------------------------------------------- dry run


def numpy_reference(name: str, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    xd = x.astype(np.float64)
    if name == "softmax":
        e = np.exp(xd - xd.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if name == "rms_norm":
        return xd / np.sqrt((xd * xd).mean(axis=1, keepdims=True) + EPS) * w
    mu = xd.mean(axis=1, keepdims=True)
    return (xd - mu) / np.sqrt(xd.var(axis=1, keepdims=True) + EPS) * w + b


def dry_run(peers: Peers, selected: set[str]) -> list[Record]:
    import fearless as fl

    from . import kernels_simt as K
    from .check import rel_err_numpy

    rows, cols = 9, 37  # cols not a power of two: the Tile row tile is padded
    rng = np.random.default_rng(11)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32)
    b = rng.standard_normal(cols).astype(np.float32)
    out: list[Record] = []
    for name in CASES:
        if name not in selected:
            continue
        ref = numpy_reference(name, x, w, b)

        def simt(name: str = name, ref: np.ndarray = ref) -> float:
            kernel, threads = K.row_kernel(name, cols)
            dry.compile_simt(peers.arch, kernel)
            y = np.full((rows, cols), np.nan, np.float32)
            inputs, scalars = operands(name, x, w, b)
            kernel[rows, threads](*inputs, *scalars, y)  # a block per row
            return rel_err_numpy(y, ref)

        def tile(name: str = name, ref: np.ndarray = ref) -> float:
            inputs, scalars = operands(name, x, w, b)
            examples = peers.tile_examples()
            # Compile the GPU run's row tile (its cubin is what the GPU run loads) ...
            gpu_cols = shape(quick=False)[1]
            case = tile_track.row_case(TILE_KERNELS[name], gpu_cols, name)
            kernel, tc = tile_track.resolve(examples, case)
            gpu_part = fl.asarray(np.zeros((rows, cols), np.float32)).partition(tc.tile)
            gpu_args = tile_track.bind(kernel, gpu_part, inputs, scalars, tc.consts)
            tile_track.compile_for(kernel, gpu_args, peers.arch)
            # ... and simulate this size's own tile: a padded, partial row tile.
            kernel, tc = tile_track.resolve(examples, tile_track.row_case(case.kernel, cols, name))
            part = fl.asarray(np.full((rows, cols), np.nan, np.float32)).partition(tc.tile)
            kernel(*tile_track.bind(kernel, part, inputs, scalars, tc.consts))
            return rel_err_numpy(part.unpartition().numpy(), ref)

        out += dry.fearless_records(
            name, FAMILY, "f32", simt, tile, rows=rows, cols=cols, dtype="f32"
        )
    return out
