"""Tile-track examples: vecadd, saxpy, row softmax, matmul, rms_norm, layer_norm, transpose, a
sum reduction, and the launch-overhead kernels fill_ones and add7.

Each kernel runs on the simulator anywhere and compiles through tileiras to a cubin with no
GPU (`fearless compile examples/tile_kernels.py --arch sm_90`). Kernels whose dtypes vary are
made by small factories; the module-level names are the kernels `fearless inspect` finds.

    python examples/tile_kernels.py      # runs each one (GPU if usable, else the simulator)
"""

import math

import numpy as np

import fearless as fl
from fearless import tile


@tile.kernel
def vecadd(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


def softmax_rows(x, at, tma):
    """softmax of `x`'s rows at `at` (a Part, or a tile `part.tiles()` gave), in f32.

    The row goes straight to registers unless `tma`. The hardware exp and one division per
    row: the per-element exact exp and division would cost more than the memory traffic of a
    bf16 row."""
    rows = tile.load_like(x, at, padding=-math.inf, allow_tma=tma).astype(fl.f32)
    e = tile.exp(rows - tile.max(rows, axis=1, keepdims=True), approx=True)
    return e * (1.0 / tile.sum(e, axis=1, keepdims=True))


def softmax_chunked(x, at, CH, tma):
    """`softmax_rows` for rows too long for registers: one pass over the row's chunks of CH
    columns for its max and sum (online: the sum rescaled when the max grows), then one that
    writes each chunk. The second pass reads the row again, from L2 while it is recent."""
    BM, _ = at.shape
    m = tile.full((BM, 1), -math.inf, fl.f32)
    s = tile.zeros((BM, 1), fl.f32)
    for c in at.chunks((BM, CH)):
        v = tile.load_like(x, c, padding=-math.inf, allow_tma=tma).astype(fl.f32)
        m_new = tile.maximum(m, tile.max(v, axis=1, keepdims=True))
        s = s * tile.exp(m - m_new, approx=True) + tile.sum(
            tile.exp(v - m_new, approx=True), axis=1, keepdims=True
        )
        m = m_new
    r = 1.0 / s
    for c in at.chunks((BM, CH)):
        v = tile.load_like(x, c, padding=-math.inf, allow_tma=tma).astype(fl.f32)
        c.store((tile.exp(v - m, approx=True) * r).astype(x.dtype))


def make_softmax(dt, tma=False, persistent=False, chunk=0, **hints):
    """Row softmax: each block owns BM whole rows (BN, a power of two, covers a row); with
    `persistent`, one wave of blocks walks the row tiles (`out.tiles()`, launched with
    `kernel.launch(grid, ...)`); with `chunk`, long rows go through registers `chunk` columns
    at a time (`softmax_chunked`). `hints` are tileiras's kernel hints: on the H200 they matter
    more than anything else here (bench/tile_bench.py sweeps them; results in
    bench/results/h200-2026-12-02-tile/)."""
    if chunk:  # rows in chunks of `chunk` columns (softmax_chunked)

        @tile.kernel(**hints)
        def softmax(out: tile.Part[dt], x: tile.Tensor[dt]):
            softmax_chunked(x, out, chunk, tma)

        return softmax
    if persistent:

        @tile.kernel(**hints)
        def softmax(out: tile.Part[dt], x: tile.Tensor[dt]):
            for t in out.tiles():
                t.store(softmax_rows(x, t, tma).astype(dt))

        return softmax

    @tile.kernel(**hints)
    def softmax(out: tile.Part[dt], x: tile.Tensor[dt]):
        out.store(softmax_rows(x, out, tma).astype(dt))

    return softmax


# Tuned for the suite's shapes: f32 rows of 1024 and bf16 rows of 8192, one row per block.
softmax_f32 = make_softmax(fl.f32, occupancy=8)
softmax_bf16 = make_softmax(fl.bf16, occupancy=4, num_worker_warps=8)


def matmul_tile(a, b, i, j, BM, BN, BK):
    """Tile (i, j) of A @ B, (BM, BN) accumulated in f32 over K in steps of BK: a plain
    function, inlined into the kernels that call it."""
    acc = tile.zeros((BM, BN), fl.f32)
    for k in range(tile.num_tiles(a, 1, (BM, BK))):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    return acc


def make_matmul(dt):
    """C = A @ B with A, B and C in `dt` and the product accumulated in f32 (as torch.matmul)."""

    @tile.kernel
    def matmul(c: tile.Part[dt], a: tile.Tensor[dt], b: tile.Tensor[dt], BK: tile.Const[int]):
        BM, BN = c.shape
        i, j = c.index
        c.store(matmul_tile(a, b, i, j, BM, BN, BK).astype(dt))

    return matmul


matmul_f16 = make_matmul(fl.f16)
matmul_bf16 = make_matmul(fl.bf16)


def rms_norm_rows(x, at, w, eps, tma):
    """x * rsqrt(mean(x^2) + eps) * w for `x`'s rows at `at`, in f32 (loads as softmax_rows)."""
    _, BN = at.shape
    n = x.shape[1].astype(fl.f32)
    v = tile.load_like(x, at, allow_tma=tma).astype(fl.f32)
    ms = tile.sum(v * v, axis=1, keepdims=True) / n
    return v * tile.rsqrt(ms + eps) * tile.load(w, (0,), (BN,), allow_tma=tma).astype(fl.f32)


def make_rms_norm(dt=fl.f32, tma=False, persistent=False, chunk=0, **hints):
    """RMS norm per row, in f32 whatever `dt` (x, w and out are `dt`); the forms and hints of
    `make_softmax`."""
    if persistent:

        @tile.kernel(**hints)
        def rms_norm(out: tile.Part[dt], x: tile.Tensor[dt], w: tile.Tensor[dt], eps: fl.f32):
            for t in out.tiles():
                t.store(rms_norm_rows(x, t, w, eps, tma).astype(dt))

        return rms_norm

    @tile.kernel(**hints)
    def rms_norm(out: tile.Part[dt], x: tile.Tensor[dt], w: tile.Tensor[dt], eps: fl.f32):
        out.store(rms_norm_rows(x, out, w, eps, tma).astype(dt))

    return rms_norm


def layer_norm_rows(x, at, w, b, eps, tma):
    """(x - mean) * rsqrt(var + eps) * w + b for `x`'s rows at `at`, in f32."""
    _, BN = at.shape
    n = x.shape[1]
    v = tile.load_like(x, at, allow_tma=tma).astype(fl.f32)
    mean = tile.sum(v, axis=1, keepdims=True) / n.astype(fl.f32)
    d = tile.where(tile.arange(BN) < n, v - mean, 0.0)
    var = tile.sum(d * d, axis=1, keepdims=True) / n.astype(fl.f32)
    wt = tile.load(w, (0,), (BN,), allow_tma=tma).astype(fl.f32)
    bt = tile.load(b, (0,), (BN,), allow_tma=tma).astype(fl.f32)
    return d * tile.rsqrt(var + eps) * wt + bt


def make_layer_norm(dt=fl.f32, tma=False, persistent=False, chunk=0, **hints):
    """Layer norm per row, in f32 whatever `dt`; the forms and hints of `make_softmax`."""
    if persistent:

        @tile.kernel(**hints)
        def layer_norm(
            out: tile.Part[dt],
            x: tile.Tensor[dt],
            w: tile.Tensor[dt],
            b: tile.Tensor[dt],
            eps: fl.f32,
        ):
            for t in out.tiles():
                t.store(layer_norm_rows(x, t, w, b, eps, tma).astype(dt))

        return layer_norm

    @tile.kernel(**hints)
    def layer_norm(
        out: tile.Part[dt],
        x: tile.Tensor[dt],
        w: tile.Tensor[dt],
        b: tile.Tensor[dt],
        eps: fl.f32,
    ):
        out.store(layer_norm_rows(x, out, w, b, eps, tma).astype(dt))

    return layer_norm


# Like softmax, the norms load rows straight to registers; occupancy=8 suits rows of 1024 f32.
rms_norm = make_rms_norm(occupancy=8)
layer_norm = make_layer_norm(occupancy=8)


@tile.kernel
def saxpy(out: tile.Part[fl.f32], alpha: fl.f32, x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    out.store(alpha * tile.load_like(x, out) + tile.load_like(y, out))


@tile.kernel
def transpose(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """out = x.T: out's (BM, BN) tile (i, j) is the transpose of x's (BN, BM) tile (j, i)."""
    BM, BN = out.shape
    i, j = out.index
    out.store(tile.transpose(tile.load(x, (j, i), (BN, BM))))


@tile.kernel
def sum_tiles(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], TILE: tile.Const[int]):
    """out[p] = the sum of x's TILE-element tiles p, p + P, p + 2P, ... (P = len(out)).

    `out` is partitioned into 1-element tiles, one block each, so a whole sum is two launches:
    into P partials, then with `out` of one element and the partials as `x`. Sums in f32."""
    acc = tile.zeros((TILE,), fl.f32)
    for k in range(tile.block_id(0), tile.num_tiles(x, 0, (TILE,)), tile.num_blocks(0)):
        acc = acc + tile.load(x, (k,), (TILE,))
    out.store(tile.sum(acc))


# Autotuned versions for any shape (fl.autotune picks per shape and dtype, once, and keeps the
# winner on disk). The spaces come from the H200 sweeps in bench/results/h200-2026-12-02-tile/:
# rows per block, occupancy and worker warps for the row kernels; tile shape, K step,
# occupancy and clusters for the GEMM. `fearless bench --cases shapes` runs them over TileGym's
# benchmark grids.
def _row(rows, occupancy, num_worker_warps, persistent=False, tma=False, chunk=0):
    return dict(rows=rows, occupancy=occupancy, num_worker_warps=num_worker_warps,
                persistent=persistent, tma=tma, chunk=chunk)  # fmt: skip


ROW_CONFIGS = [
    _row(1, 8, None),
    _row(1, 4, 8),
    _row(1, 2, 8),
    _row(1, 1, 16),
    _row(2, 4, None),
    _row(4, 4, 8),
    # structural variants: one wave of blocks walking the rows (TileGym's static persistent
    # schedule: grid = SMs x occupancy), and TMA loads
    _row(1, 4, None, persistent=True),
    _row(1, 4, 8, persistent=True),
    _row(2, 4, None, persistent=True),
    _row(1, 2, 8, tma=True),
    _row(1, 4, None, persistent=True, tma=True),
]
# Long softmax rows in chunks (softmax_chunked): a row of 16384 bf16 does not fit registers.
SOFTMAX_CONFIGS = [
    *ROW_CONFIGS,
    _row(1, 4, None, chunk=4096),
    _row(1, 2, 8, chunk=4096),
    _row(1, 4, None, chunk=2048),
]


def _gemm(shape, BK, occupancy, num_ctas, persistent=False):
    return dict(shape=shape, BK=BK, occupancy=occupancy, num_ctas=num_ctas,
                persistent=persistent)  # fmt: skip


GEMM_CONFIGS = [
    _gemm((128, 128), 64, 2, None),
    _gemm((128, 128), 64, 1, None),
    _gemm((128, 128), 32, 2, None),
    _gemm((256, 128), 64, None, 2),
    _gemm((128, 256), 64, None, 2),
    _gemm((64, 128), 64, 2, None),
    _gemm((64, 64), 64, 4, None),  # small problems: more blocks than SMs
    # TileGym's SM90 spaces: large tiles over clusters of 2 and 4
    _gemm((256, 256), 64, 1, 2),
    _gemm((256, 256), 64, 1, 4),
    _gemm((512, 256), 64, 1, 2),
    # persistent and grouped (8 rows of tiles per group): one wave of blocks loops over tiles
    _gemm((128, 128), 64, 2, None, persistent=True),
    _gemm((128, 128), 64, 1, None, persistent=True),
    _gemm((256, 128), 64, None, 2, persistent=True),
    _gemm((256, 256), 64, 1, 2, persistent=True),
    _gemm((128, 512), 64, 1, 4, persistent=True),
    _gemm((256, 256), 128, 1, 2, persistent=True),
]
_ROW_KERNELS: dict = {}


def _row_kernel(make, dt, tma, persistent, chunk):
    """One kernel per (factory, dtype, form), shared by every configuration (hints make
    variants)."""
    key = (make, dt, tma, persistent, chunk)
    kernel = _ROW_KERNELS.get(key)
    if kernel is None:
        kernel = _ROW_KERNELS[key] = make(dt, tma=tma, persistent=persistent, chunk=chunk)
    return kernel


ROW_FACTORIES = {"softmax": None, "rms_norm": None, "layer_norm": None}  # set below


def prepare_rows(
    op, out, x, *rest, rows, occupancy, num_worker_warps, persistent=False, tma=False, chunk=0
):
    """The launch of row kernel `op` with one configuration, prepared: (launch, partition).
    `launch()` runs it again on the same arguments; `partition.unpartition()` ends it. The
    `*_tuned` functions call it once per call; the benchmark times `launch` itself."""
    x, out = fl.asarray(x), fl.asarray(out)
    n = next_pow2(x.shape[1])
    if rows > 1 and rows * n > 8192:
        raise fl.LaunchContractError(f"{rows} rows of {n} do not fit one block's registers")
    chunk = min(chunk, n)
    kernel = _row_kernel(ROW_FACTORIES[op], x.dtype, tma, persistent, chunk).options(
        occupancy=occupancy, num_worker_warps=num_worker_warps
    )
    part = out.partition((rows, n))
    args = (part, x, *[fl.asarray(r) if hasattr(r, "shape") else r for r in rest])
    if not persistent:
        return (lambda: kernel(*args)), part
    grid = max(1, min(math.ceil(x.shape[0] / rows), _sm_count() * (occupancy or 1)))
    return (lambda: kernel.launch(grid, *args)), part


def _row_launch(op, out, x, *rest, **config):
    launch, part = prepare_rows(op, out, x, *rest, **config)
    launch()
    part.unpartition()  # `out` is the caller's again


@fl.autotune(configs=SOFTMAX_CONFIGS, key=["x"])
def softmax_tuned(x, out, **config):
    """out = softmax(x, axis=1) for a 2-D x of any dtype the kernel takes (f32, f16, bf16)."""
    _row_launch("softmax", out, x, **config)


@fl.autotune(configs=ROW_CONFIGS, key=["x"])
def rms_norm_tuned(x, w, eps, out, **config):
    _row_launch("rms_norm", out, x, w, eps, **config)


@fl.autotune(configs=ROW_CONFIGS, key=["x"])
def layer_norm_tuned(x, w, b, eps, out, **config):
    _row_launch("layer_norm", out, x, w, b, eps, **config)


ROW_FACTORIES.update(softmax=make_softmax, rms_norm=make_rms_norm, layer_norm=make_layer_norm)
_MATMULS: dict = {}


def make_matmul_persistent(dt):
    """`make_matmul`, persistent: each block walks its tiles of C (`c.tiles()`), so a launch
    on one wave of blocks (`matmul.launch(grid, ...)`) loops instead of launching a block per
    tile; with `order=tile.grouped(8)` on C, neighbouring tiles share A rows and B columns."""

    @tile.kernel
    def matmul(c: tile.Part[dt], a: tile.Tensor[dt], b: tile.Tensor[dt], BK: tile.Const[int]):
        for t in c.tiles():
            i, j = t.index
            BM, BN = t.shape
            t.store(matmul_tile(a, b, i, j, BM, BN, BK).astype(dt))

    return matmul


def _sm_count():
    """The GPU's SM count (a persistent grid is a multiple of it); 4 on the simulator."""
    if fl.get_target() != "cuda":
        return 4
    from fearless.runtime import driver

    return driver.device_info().sm_count


def prepare_matmul(a, b, c, *, shape, BK, occupancy, num_ctas, persistent):
    """The launch of c = a @ b with one configuration, prepared: (launch, partition of c)."""
    a, b, c = fl.asarray(a), fl.asarray(b), fl.asarray(c)
    kernels = _MATMULS.get(a.dtype)
    if kernels is None:
        kernels = _MATMULS[a.dtype] = (make_matmul(a.dtype), make_matmul_persistent(a.dtype))
    kernel = kernels[persistent].options(occupancy=occupancy, num_ctas=num_ctas)
    part = c.partition(shape, order=tile.grouped(8))  # TileGym's swizzle: L2 reuse
    if not persistent:
        return (lambda: kernel(part, a, b, BK)), part
    tiles = math.ceil(c.shape[0] / shape[0]) * math.ceil(c.shape[1] / shape[1])
    blocks = _sm_count() * (occupancy or 1) // (num_ctas or 1) * (num_ctas or 1)
    grid = max(1, min(tiles, blocks))
    return (lambda: kernel.launch(grid, part, a, b, BK)), part


@fl.autotune(configs=GEMM_CONFIGS, key=["a", "b"])
def matmul_tuned(a, b, c, *, shape, BK, occupancy, num_ctas, persistent):
    """c = a @ b (f16 or bf16, f32 accumulation) with the fastest tiles for these shapes."""
    launch, part = prepare_matmul(a, b, c, shape=shape, BK=BK, occupancy=occupancy,
                                  num_ctas=num_ctas, persistent=persistent)  # fmt: skip
    launch()
    part.unpartition()


# Launch-overhead kernels with 1 and 8 array arguments (vecadd has 3): tiny by design.
@tile.kernel
def fill_ones(z: tile.Part[fl.f32]):
    z.store(tile.full(z.shape, 1.0, fl.f32))


@tile.kernel
def add7(
    z: tile.Part[fl.f32],
    a: tile.Tensor[fl.f32],
    b: tile.Tensor[fl.f32],
    c: tile.Tensor[fl.f32],
    d: tile.Tensor[fl.f32],
    e: tile.Tensor[fl.f32],
    f: tile.Tensor[fl.f32],
    g: tile.Tensor[fl.f32],
):
    s = tile.load_like(a, z) + tile.load_like(b, z) + tile.load_like(c, z)
    s = s + tile.load_like(d, z) + tile.load_like(e, z) + tile.load_like(f, z)
    z.store(s + tile.load_like(g, z))


# Launches that `fearless compile examples/tile_kernels.py --arch sm_90` prepares ahead of time
# (no GPU needed): the benchmark suite's shapes. A specialisation depends on the tile shape,
# the Consts and how the extents divide (by up to 16 bytes), not on the extents themselves, so
# each cubin also serves every other launch whose extents divide the same way.
_f32_rows = tile.Spec((65536, 1024), fl.f32)
vecadd.specialise(
    tile.Spec((1 << 28,), fl.f32).partition((1024,)),
    tile.Spec((1 << 28,), fl.f32),
    tile.Spec((1 << 28,), fl.f32),
)
softmax_f32.specialise(_f32_rows.partition((1, 1024)), _f32_rows)
softmax_bf16.specialise(
    tile.Spec((8192, 8192), fl.bf16).partition((1, 8192)), tile.Spec((8192, 8192), fl.bf16)
)
rms_norm.specialise(_f32_rows.partition((1, 1024)), _f32_rows, tile.Spec((1024,), fl.f32), fl.f32)
layer_norm.specialise(
    _f32_rows.partition((1, 1024)),
    _f32_rows,
    tile.Spec((1024,), fl.f32),
    tile.Spec((1024,), fl.f32),
    fl.f32,
)
for _mm, _dt in ((matmul_f16, fl.f16), (matmul_bf16, fl.bf16)):
    _sq = tile.Spec((8192, 8192), _dt)
    _mm.specialise(_sq.partition((128, 128)), _sq, _sq, 64)
_vec = tile.Spec((1 << 28,), fl.f32)
saxpy.specialise(_vec.partition((1024,)), fl.f32, _vec, _vec)
_tall, _wide = tile.Spec((16384, 4096), fl.f32), tile.Spec((4096, 16384), fl.f32)
transpose.specialise(_tall.partition((64, 64)), _wide)
# The sum's two launches: 2^28 into 1024 partials in tiles of 4096, then the partials into one.
_partials = tile.Spec((1024,), fl.f32)
sum_tiles.specialise(_partials.partition((1,)), _vec, 4096)
sum_tiles.specialise(tile.Spec((1,), fl.f32).partition((1,)), _partials, 1024)
# The launch-overhead cases: arrays of 1024 elements, one tile each.
_small = tile.Spec((1024,), fl.f32)
fill_ones.specialise(_small.partition((1024,)))
add7.specialise(_small.partition((1024,)), *[_small] * 7)


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def main() -> None:
    rng = np.random.default_rng(0)
    x = fl.asarray(rng.standard_normal(1000).astype(np.float32))
    y = fl.asarray(rng.standard_normal(1000).astype(np.float32))
    zp = fl.empty(1000, dtype=fl.f32).partition((256,))
    vecadd(zp, x, y)
    print("vecadd max error:", np.abs(zp.unpartition().numpy() - (x.numpy() + y.numpy())).max())

    m, n = 100, 300
    a = fl.asarray(rng.standard_normal((m, n)).astype(np.float32))
    op = fl.empty((m, n), dtype=fl.f32).partition((4, next_pow2(n)))
    softmax_f32(op, a)
    ref = np.exp(a.numpy() - a.numpy().max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    print("softmax max error:", np.abs(op.unpartition().numpy() - ref).max())


if __name__ == "__main__":
    main()
