"""NVIDIA cuTile Python's samples (github.com/NVIDIA/cutile-python, `samples/`) written in
fearless Tile: the same computation, tiled the same way, as fearless kernels.

One kernel (or kernel factory) per sample, each with a host function that chooses the tiles
and the grid as the sample's wrapper does:

| sample                 | here                                                  |
|------------------------|-------------------------------------------------------|
| VectorAddition.py      | `vec_add_1d`, `vec_add_2d`, `vec_add_1d_gather`,      |
|                        | `vec_add_2d_gather`; host `vec_add`                   |
| MatMul.py              | `make_matmul`, `make_persistent_matmul`; `matmul`     |
| BatchMatMul.py         | `make_batch_matmul`; `batch_matmul`                   |
| Transpose.py           | `transpose`, `transpose_by_order`; `cutile_transpose` |
| LayerNorm.py           | `make_layer_norm_fwd`; `layer_norm_fwd`               |
|                        | `make_layer_norm_bwd`, `make_layer_norm_bwd_dwdb`;    |
|                        | `layer_norm_bwd`                                      |
| AttentionFMHA.py       | `make_fmha`; `fmha`                                   |

What a fearless kernel does differently everywhere: a block writes only its own tile of each
output (`tile.Part`, from `out.partition(tile_shape)`), so where a cuTile kernel stores at
`ct.bid(...)`, the fearless kernel stores `out`'s tile and the grid is the partition's; a
block writes its tile in pieces with `out.chunks(shape)` (LayerNorm's forward).

A write at computed coordinates (VectorAddition's `ct.scatter`) may land in any block's
elements, so fearless takes it only into a `tile.Atomic[T]` parameter, launched on the grid
the host chooses (`kernel.launch(grid, ...)`), the sample's grid.

Where a port differs from its sample:
- MatMul with f32 inputs converts the tiles to tf32 for the tensor cores, as the sample does
  (`x.astype(fl.tf32)`, f32 sums).
- BatchMatMul's float8_e4m3fn case is the same kernel with f8e4m3fn operands and an f32 C
  (`batch_matmul(A, B, out_dtype=fl.f32)`), as the sample's.
- LayerNorm's backward accumulates its partial dW/dB under a spin lock per group (`while
  ct.atomic_cas(...) == 1: pass`, plain loads and stores, `ct.atomic_xchg` release); the port
  adds with `tile.atomic_add` into `tile.Atomic` partial sums instead: the same sums, no lock.
  fearless takes the lock form too, inside `with tile.unsafe():` (examples/triton_tutorials.py
  ports Triton's tutorial, which has the same lock).

    python examples/cutile_samples.py      # runs each one (GPU if usable, else the simulator)
"""

import math

import numpy as np

import fearless as fl
from fearless import tile

INV_LOG_2 = 1.0 / math.log(2)


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _sm_count() -> int:
    """The GPU's SM count (the persistent grid); 4 on the simulator."""
    if fl.get_target() != "cuda":
        return 4
    from fearless.runtime import driver

    return driver.device_info().sm_count


# ------------------------------------------------------------------------- VectorAddition


@tile.kernel
def vec_add_1d(c: tile.Part[fl.f32], a: tile.Tensor[fl.f32], b: tile.Tensor[fl.f32]):
    """VectorAddition.py `vec_add_kernel_1d`: block `bid` adds the TILE-element chunks `bid`
    of `a` and `b`. TILE is `c`'s tile (the sample's Const), the block's chunk `c.index`."""
    (TILE,) = c.shape
    (bid,) = c.index
    c.store(tile.load(a, (bid,), (TILE,)) + tile.load(b, (bid,), (TILE,)))


@tile.kernel
def vec_add_2d(c: tile.Part[fl.f32], a: tile.Tensor[fl.f32], b: tile.Tensor[fl.f32]):
    """VectorAddition.py `vec_add_kernel_2d`: block (bid_x, bid_y) adds the (TILE_X, TILE_Y)
    tiles (bid_x, bid_y) of `a` and `b`."""
    TILE_X, TILE_Y = c.shape
    bid_x, bid_y = c.index
    a_tile = tile.load(a, (bid_x, bid_y), (TILE_X, TILE_Y))
    b_tile = tile.load(b, (bid_x, bid_y), (TILE_X, TILE_Y))
    c.store(a_tile + b_tile)


@tile.kernel
def vec_add_1d_gather(
    c: tile.Atomic[fl.f32], a: tile.Tensor[fl.f32], b: tile.Tensor[fl.f32], TILE: tile.Const[int]
):
    """VectorAddition.py `vec_add_kernel_1d_gather`: block `bid` gathers elements
    bid * TILE + [0, TILE) of `a` and `b` (zero past the end) and scatters their sum to `c`
    (dropped past the end). `c` is a `tile.Atomic` output (see the module docstring)."""
    indices = tile.block_id(0) * TILE + tile.arange(TILE, fl.i32)
    tile.scatter(c, indices, tile.gather(a, indices) + tile.gather(b, indices))


@tile.kernel
def vec_add_2d_gather(
    c: tile.Atomic[fl.f32],
    a: tile.Tensor[fl.f32],
    b: tile.Tensor[fl.f32],
    TILE_X: tile.Const[int],
    TILE_Y: tile.Const[int],
):
    """VectorAddition.py `vec_add_kernel_2d_gather`: the (TILE_X, TILE_Y) tile of block
    (bid_x, bid_y) by gather and scatter, row and column indices broadcast together."""
    x = (tile.block_id(0) * TILE_X + tile.arange(TILE_X, fl.i32))[:, None]
    y = (tile.block_id(1) * TILE_Y + tile.arange(TILE_Y, fl.i32))[None, :]
    tile.scatter(c, (x, y), tile.gather(a, (x, y)) + tile.gather(b, (x, y)))


def vec_add(a, b, use_gather=False):
    """`a + b` for 1-D or 2-D f32 arrays, with the sample's tiles: TILE = the next power of two
    of N up to 1024 (1-D); TILE_Y so for the columns and TILE_X = 1024 // TILE_Y (2-D). With
    `use_gather`, the gather/scatter kernels on the sample's grid."""
    a, b = fl.asarray(a), fl.asarray(b)
    if a.shape != b.shape or a.ndim > 2:
        raise ValueError("vec_add takes two 1-D or 2-D arrays of the same shape")
    if a.ndim == 1:
        tiles: tuple[int, ...] = (min(1024, next_pow2(a.shape[0])),)
    else:
        tile_y = min(1024, next_pow2(a.shape[1]))
        tiles = (max(1, 1024 // tile_y), tile_y)
    if use_gather:
        c = fl.empty(a.shape, dtype=a.dtype)
        grid = tuple(math.ceil(n / t) for n, t in zip(a.shape, tiles, strict=True))
        kernel = vec_add_1d_gather if a.ndim == 1 else vec_add_2d_gather
        kernel.launch(grid, c, a, b, *tiles)
        return c
    part = fl.empty(a.shape, dtype=a.dtype).partition(tiles)
    (vec_add_1d if a.ndim == 1 else vec_add_2d)(part, a, b)
    return part.unpartition()


# --------------------------------------------------------------------------------- MatMul


def _matmul_tile(A, B, bidx, bidy, tm, tn, tk, dt):
    """The (tm, tn) tile (bidx, bidy) of A @ B in f32, over K in steps of tk (zero padding past
    the edges), as the sample's K loop; the product cast to `dt`. Inlined into its callers."""
    accumulator = tile.zeros((tm, tn), fl.f32)
    for k in range(tile.num_tiles(A, 1, (tm, tk))):
        a = tile.load(A, (bidx, k), (tm, tk), padding=0)
        b = tile.load(B, (k, bidy), (tk, tn), padding=0)
        if dt == fl.f32:  # compile-time: the tensor cores take f32 tiles as tf32
            a, b = a.astype(fl.tf32), b.astype(fl.tf32)
        accumulator = tile.mma(a, b, accumulator)
    return accumulator.astype(dt)


def make_matmul(dt):
    """MatMul.py `matmul_kernel`: C = A @ B, each block one (tm, tn) tile of C, accumulated in
    f32 over K in steps of tk. The sample's `swizzle_2d` (groups of 8 rows of tiles) is the
    partition's order here, `C.partition((tm, tn), order=tile.grouped(8))`: the same groups,
    numbered as Triton numbers them (in a last, short group the rows may come in another
    order). f32 tiles multiply as tf32, as the sample's."""

    @tile.kernel
    def matmul_kernel(
        C: tile.Part[dt], A: tile.Tensor[dt], B: tile.Tensor[dt], tk: tile.Const[int]
    ):
        tm, tn = C.shape
        bidx, bidy = C.index
        C.store(_matmul_tile(A, B, bidx, bidy, tm, tn, tk, dt))

    return matmul_kernel


def make_persistent_matmul(dt):
    """MatMul.py `persistent_matmul_kernel`: as `make_matmul`, launched on min(SMs, tiles)
    blocks, each looping over its tiles (`for t in C.tiles()`: tiles b, b + G, ..., as the
    sample's `range(bid, upper_bound, num_tile_blocks)`), in the grouped order."""

    @tile.kernel
    def persistent_matmul_kernel(
        C: tile.Part[dt], A: tile.Tensor[dt], B: tile.Tensor[dt], tk: tile.Const[int]
    ):
        for t in C.tiles():
            tm, tn = t.shape
            bidx, bidy = t.index
            t.store(_matmul_tile(A, B, bidx, bidy, tm, tn, tk, dt))

    return persistent_matmul_kernel


_MATMULS: dict = {}


def matmul_tiles(dt) -> tuple[int, int, int]:
    """The sample's (tm, tn, tk): (128, 256, 64) for 2-byte dtypes, else (32, 32, 32)."""
    return (128, 256, 64) if dt.itemsize == 2 else (32, 32, 32)


def matmul(A, B, persistent=False, tiles=None):
    """C = A @ B (f16, bf16 or f32; C in A's dtype) with the sample's tiles unless `tiles`."""
    A, B = fl.asarray(A), fl.asarray(B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0] or A.dtype != B.dtype:
        raise ValueError(f"cannot multiply {A.shape} {A.dtype} by {B.shape} {B.dtype}")
    kernels = _MATMULS.get(A.dtype)
    if kernels is None:
        kernels = _MATMULS[A.dtype] = (make_matmul(A.dtype), make_persistent_matmul(A.dtype))
    tm, tn, tk = tiles or matmul_tiles(A.dtype)
    m, n = A.shape[0], B.shape[1]
    part = fl.empty((m, n), dtype=A.dtype).partition((tm, tn), order=tile.grouped(8))
    if persistent:
        count = math.ceil(m / tm) * math.ceil(n / tn)
        kernels[1].launch(min(_sm_count(), count), part, A, B, tk)
    else:
        kernels[0](part, A, B, tk)
    return part.unpartition()


# ---------------------------------------------------------------------------- BatchMatMul


def make_batch_matmul(dt, out_dt=None):
    """BatchMatMul.py `batch_matmul_kernel`: C[b] = A[b] @ B[b] for (Batch, M, K) and
    (Batch, K, N); block (b, i, j) computes C's (1, tm, tn) tile (b, i, j) from (1, tm, tk) and
    (1, tk, tn) tiles reshaped to 2-D, accumulating in f32; C in `out_dt` (default `dt`)."""
    out_dt = out_dt or dt

    @tile.kernel
    def batch_matmul_kernel(
        C: tile.Part[out_dt], A: tile.Tensor[dt], B: tile.Tensor[dt], tk: tile.Const[int]
    ):
        _, tm, tn = C.shape
        pid_batch, pidx, pidy = C.index
        accumulator = tile.zeros((tm, tn), fl.f32)
        for k in range(tile.cdiv(A.shape[2], tk)):
            a = tile.load(A, (pid_batch, pidx, k), (1, tm, tk), padding=0).reshape((tm, tk))
            b = tile.load(B, (pid_batch, k, pidy), (1, tk, tn), padding=0).reshape((tk, tn))
            accumulator = tile.mma(a, b, accumulator)
        C.store(accumulator.astype(out_dt).reshape((1, tm, tn)))

    return batch_matmul_kernel


_BMMS: dict = {}


def batch_matmul(A, B, out_dtype=None, tiles=(128, 256, 128)):
    """C = A @ B per batch item, with the sample's (tm, tn, tk) = (128, 256, 128) unless
    `tiles`; the grid is (Batch, M tiles, N tiles), as the sample's."""
    A, B = fl.asarray(A), fl.asarray(B)
    if A.ndim != 3 or B.ndim != 3 or A.shape[0] != B.shape[0] or A.shape[2] != B.shape[1]:
        raise ValueError(f"cannot batch-multiply {A.shape} by {B.shape}")
    out_dt = out_dtype or A.dtype
    kernel = _BMMS.get((A.dtype, out_dt))
    if kernel is None:
        kernel = _BMMS[(A.dtype, out_dt)] = make_batch_matmul(A.dtype, out_dt)
    tm, tn, tk = tiles
    part = fl.empty((A.shape[0], A.shape[1], B.shape[2]), dtype=out_dt).partition((1, tm, tn))
    kernel(part, A, B, tk)
    return part.unpartition()


# ------------------------------------------------------------------------------ Transpose


def make_transpose(dt):
    """Transpose.py `transpose_kernel`: y = x.T, x's (tm, tn) tile (i, j) transposed into y's
    (tn, tm) tile (j, i). The block owns y's tile, so its index is y's: the sample's block
    (bidx, bidy) is block (bidy, bidx) here (the grid is y's, the sample's transposed)."""

    @tile.kernel
    def transpose_kernel(y: tile.Part[dt], x: tile.Tensor[dt]):
        tn, tm = y.shape
        bidy, bidx = y.index
        y.store(tile.transpose(tile.load(x, (bidx, bidy), (tm, tn))))

    return transpose_kernel


def make_transpose_by_order(dt):
    """`make_transpose` with the transpose in the load: `tile.load(..., order=(1, 0))` reads
    x's (tm, tn) tile (i, j) as a (tn, tm) tile (cuTile Python's `order=`)."""

    @tile.kernel
    def transpose_by_order(y: tile.Part[dt], x: tile.Tensor[dt]):
        bidy, bidx = y.index
        y.store(tile.load(x, (bidy, bidx), y.shape, order=(1, 0)))

    return transpose_by_order


transpose = make_transpose(fl.f32)
transpose_by_order = make_transpose_by_order(fl.f32)
_TRANSPOSES: dict = {fl.f32: (transpose, transpose_by_order)}


def cutile_transpose(x, by_order=False):
    """x.T for a 2-D x, with the sample's tiles: (tm, tn) = (128, 128) for 2-byte dtypes, else
    (32, 32); y's tiles are (tn, tm)."""
    x = fl.asarray(x)
    if x.ndim != 2:
        raise ValueError("cutile_transpose takes a 2-D array")
    kernels = _TRANSPOSES.get(x.dtype)
    if kernels is None:
        kernels = _TRANSPOSES[x.dtype] = (make_transpose(x.dtype), make_transpose_by_order(x.dtype))
    tm, tn = (128, 128) if x.dtype.itemsize == 2 else (32, 32)
    part = fl.empty((x.shape[1], x.shape[0]), dtype=x.dtype).partition((tn, tm))
    kernels[by_order](part, x)
    return part.unpartition()


# ------------------------------------------------------------------------------ LayerNorm


def make_layer_norm_fwd(dt):
    """LayerNorm.py `layer_norm_fwd`: one block per row m of X (M, N): the mean over the row in
    chunks of TILE_N (stored to Mean[m]), the variance in chunks (1 / sqrt(var + eps) stored
    to Rstd[m]), then Y[m] = (X[m] - mean) * rstd * W + B, all in f32 (Y in `dt`).

    Y is partitioned into whole rows (1, NP), NP = N's next power of two, so the block owns its
    row, and writes it chunk by chunk as the sample does (`Y.chunks((1, TILE_N))`)."""

    @tile.kernel
    def layer_norm_fwd(
        Y: tile.Part[dt],
        Mean: tile.Part[fl.f32],
        Rstd: tile.Part[fl.f32],
        X: tile.Tensor[dt],
        W: tile.Tensor[dt],
        B: tile.Tensor[dt],
        eps: fl.f32,
        TILE_N: tile.Const[int],
    ):
        _, NP = Y.shape
        bid_m, _ = Y.index
        num_tiles = tile.num_tiles(X, 1, (1, TILE_N))
        N = X.shape[1].astype(fl.f32)

        mean = tile.zeros((1, TILE_N), fl.f32)
        for j in range(num_tiles):
            mean = mean + tile.load(X, (bid_m, j), (1, TILE_N), padding=0).astype(fl.f32)
        mean = tile.sum(mean, axis=1) / N
        Mean.store(mean)

        var = tile.zeros((1, TILE_N), fl.f32)
        for j in range(num_tiles):
            tx = tile.load(X, (bid_m, j), (1, TILE_N), padding=0).astype(fl.f32)
            mask = (j * TILE_N + tile.arange(TILE_N)) < X.shape[1]
            centered = tile.where(mask, tx - mean, 0.0)
            var = var + centered * centered
        var = tile.sum(var, axis=1) / N
        rstd = 1.0 / tile.sqrt(var + eps)
        Rstd.store(rstd)

        CH = min(TILE_N, NP)
        for c in Y.chunks((1, CH)):  # the row of Y in chunks, as the sample's third loop
            j = c.index[1]
            tx = tile.load_like(X, c, padding=0).astype(fl.f32)
            tw = tile.load(W, (j,), (CH,), padding=0).astype(fl.f32)
            tb = tile.load(B, (j,), (CH,), padding=0).astype(fl.f32)
            c.store(((tx - mean) * rstd * tw + tb).astype(dt))

    return layer_norm_fwd


_LAYER_NORMS: dict = {}


def layer_norm_fwd(x, weight, bias, eps, tile_n=1024):
    """(y, mean, rstd) of LayerNorm over the last axis of x (M, N): the sample's forward, one
    block per row, reductions in chunks of `tile_n` (1024 in the sample)."""
    x, weight, bias = fl.asarray(x), fl.asarray(weight), fl.asarray(bias)
    if x.ndim != 2 or weight.shape != (x.shape[1],) or bias.shape != (x.shape[1],):
        raise ValueError("layer_norm_fwd takes x (M, N), weight (N,) and bias (N,)")
    kernel = _LAYER_NORMS.get(x.dtype)
    if kernel is None:
        kernel = _LAYER_NORMS[x.dtype] = make_layer_norm_fwd(x.dtype)
    m, n = x.shape
    y = fl.empty((m, n), dtype=x.dtype).partition((1, next_pow2(n)))
    mean = fl.empty((m,), dtype=fl.f32).partition((1,))
    rstd = fl.empty((m,), dtype=fl.f32).partition((1,))
    kernel(y, mean, rstd, x, weight, bias, float(eps), tile_n)
    return y.unpartition(), mean.unpartition(), rstd.unpartition()


def layer_norm_bwd_terms(X, W, DY, m, j, mean, rstd, TILE_N):
    """LayerNorm.py `bwd_helper`: dy, xhat and w * dy of chunk j of row m (0 past N)."""
    N = X.shape[1]
    tx = tile.load(X, (m, j), (1, TILE_N)).astype(fl.f32)
    tw = tile.load(W, (j,), (TILE_N,)).astype(fl.f32)
    tdy = tile.load(DY, (m, j), (1, TILE_N)).astype(fl.f32)
    inside = j * TILE_N + tile.arange(TILE_N) < N
    xhat = tile.where(inside, (tx - mean) * rstd, 0.0)
    wdy = tile.where(inside, tw * tdy, 0.0)
    return tdy, xhat, wdy


def make_layer_norm_bwd(dt):
    """LayerNorm.py's backward, part 1 (`layer_norm_bwd_dx_partial_dwdb`): one block per row m
    computes dX[m] in chunks of TILE_N, and adds its dW and dB terms into group m % G of the
    (G, N) partial sums.

    The difference: the sample serialises those additions with a spin lock per group
    (`atomic_cas` acquire, plain load, add, store, `atomic_xchg` release); fearless adds with
    `tile.atomic_add` into `tile.Atomic` partial sums instead, which is the same sum without a
    lock (and without a `while` loop, which Tile kernels do not have)."""

    @tile.kernel
    def layer_norm_bwd_dx_partial_dwdb(
        DX: tile.Part[dt],
        DW: tile.Atomic[fl.f32],
        DB: tile.Atomic[fl.f32],
        X: tile.Tensor[dt],
        DY: tile.Tensor[dt],
        W: tile.Tensor[dt],
        Mean: tile.Tensor[fl.f32],
        Rstd: tile.Tensor[fl.f32],
        TILE_N: tile.Const[int],
    ):
        _, NP = DX.shape
        CH = min(TILE_N, NP)
        m = DX.index[0]
        N = X.shape[1]
        group = m % DW.shape[0]
        mean = tile.load(Mean, (m,), (1,))
        rstd = tile.load(Rstd, (m,), (1,))
        c1 = tile.zeros((1, CH), fl.f32)
        c2 = tile.zeros((1, CH), fl.f32)
        for j in range(tile.num_tiles(X, 1, (1, CH))):
            _, xhat, wdy = layer_norm_bwd_terms(X, W, DY, m, j, mean, rstd, CH)
            c1 = c1 + xhat * wdy
            c2 = c2 + wdy
        c1 = tile.sum(c1, axis=1) / N.astype(fl.f32)
        c2 = tile.sum(c2, axis=1) / N.astype(fl.f32)
        for c in DX.chunks((1, CH)):
            j = c.index[1]
            tdy, xhat, wdy = layer_norm_bwd_terms(X, W, DY, m, j, mean, rstd, CH)
            c.store(((wdy - (xhat * c1 + c2)) * rstd).astype(dt))
            cols = j * CH + tile.arange(CH)
            inside = cols < N
            tile.atomic_add(DW, (group, cols), (tdy * xhat).reshape((CH,)), mask=inside)
            tile.atomic_add(DB, (group, cols), tdy.reshape((CH,)), mask=inside)

    return layer_norm_bwd_dx_partial_dwdb


def make_layer_norm_bwd_dwdb(dt):
    """LayerNorm.py `layer_norm_bwd_dwdb`: dW and dB of column tile n, summing the G partial
    rows TILE_M at a time."""

    @tile.kernel
    def layer_norm_bwd_dwdb(
        FINAL_DW: tile.Part[dt],
        FINAL_DB: tile.Part[dt],
        DW: tile.Tensor[fl.f32],
        DB: tile.Tensor[fl.f32],
        TILE_M: tile.Const[int],
    ):
        (TILE_N,) = FINAL_DW.shape
        n = FINAL_DW.index[0]
        dw = tile.zeros((TILE_M, TILE_N), fl.f32)
        db = tile.zeros((TILE_M, TILE_N), fl.f32)
        for i in range(tile.num_tiles(DW, 0, (TILE_M, TILE_N))):
            dw = dw + tile.load(DW, (i, n), (TILE_M, TILE_N))
            db = db + tile.load(DB, (i, n), (TILE_M, TILE_N))
        FINAL_DW.store(tile.sum(dw, axis=0).astype(dt))
        FINAL_DB.store(tile.sum(db, axis=0).astype(dt))

    return layer_norm_bwd_dwdb


_LAYER_NORM_BWDS: dict = {}


def layer_norm_bwd(dy, x, weight, mean, rstd, group=64, tile_n=1024, tile_m=32):
    """(dx, dw, db) of LayerNorm from the forward's mean and rstd: the sample's backward, its
    partial sums in `group` rows (64 in the sample), reduced `tile_m` rows at a time."""
    dy, x, weight = fl.asarray(dy), fl.asarray(x), fl.asarray(weight)
    mean, rstd = fl.asarray(mean), fl.asarray(rstd)
    m, n = x.shape
    kernels = _LAYER_NORM_BWDS.get(x.dtype)
    if kernels is None:
        kernels = _LAYER_NORM_BWDS[x.dtype] = (
            make_layer_norm_bwd(x.dtype),
            make_layer_norm_bwd_dwdb(x.dtype),
        )
    dx = fl.empty((m, n), dtype=x.dtype).partition((1, next_pow2(n)))
    dw_part, db_part = fl.zeros((group, n)), fl.zeros((group, n))
    kernels[0](dx, dw_part, db_part, x, dy, weight, mean, rstd, tile_n)
    cols = min(tile_n, next_pow2(n))
    dw = fl.empty((n,), dtype=x.dtype).partition((cols,))
    db = fl.empty((n,), dtype=x.dtype).partition((cols,))
    kernels[1](dw, db, dw_part, db_part, tile_m)
    return dx.unpartition(), dw.unpartition(), db.unpartition()


# ---------------------------------------------------------------------------- AttentionFMHA


def make_fmha(dt, causal=False, even_k=True, **hints):
    """AttentionFMHA.py `fmha_kernel`: softmax(Q K^T * qk_scale) V per (batch, head), flash
    attention's online softmax in base 2: block (b, h, i) takes Q's (TILE_M, TILE_D) tile i,
    walks K and V in (TILE_N, TILE_D) tiles j (K loaded transposed with `order=(0, 1, 3, 2)`,
    latency hints 2 and 4 as the sample), masks keys past the end (`even_k` False) and, if
    `causal`, keys after the query (queries start at `input_pos`), and keeps the running max
    m_i, the sum l_i and the f32 accumulator. Grouped-query attention: query head h reads KV
    head h // QUERY_GROUP_SIZE. CAUSAL and EVEN_K are the factory's (Python bools) as the
    sample's ConstBool parameters; `hints` are tileiras's (the sample sets occupancy=2).

    Differences: the block owns Out's (1, 1, TILE_M, TILE_D) tile
    (b, h, i), so the grid is Out's partition's, (Batch * Heads, M tiles) where the sample's
    is (M tiles, Batch * Heads); H is not a parameter (the head is the tile's index)."""

    @tile.kernel(**hints)
    def fmha_kernel(
        Out: tile.Part[dt],
        Q: tile.Tensor[dt],
        K: tile.Tensor[dt],
        V: tile.Tensor[dt],
        qk_scale: fl.f32,
        input_pos: fl.i32,
        TILE_N: tile.Const[int],
        QUERY_GROUP_SIZE: tile.Const[int],
    ):
        _, _, TILE_M, TILE_D = Out.shape
        batch_idx, head_idx, bid_x, _ = Out.index
        off_kv_h = head_idx // QUERY_GROUP_SIZE
        qk_scale = qk_scale * INV_LOG_2

        offs_m = (bid_x * TILE_M + tile.arange(TILE_M) + input_pos)[:, None]  # [TILE_M, 1]
        offs_n_tile = tile.arange(TILE_N)[None, :]  # [1, TILE_N]

        m_i = tile.full((TILE_M, 1), -math.inf, fl.f32)
        l_i = tile.zeros((TILE_M, 1), fl.f32)
        acc = tile.zeros((TILE_M, TILE_D), fl.f32)
        q = tile.load(Q, (batch_idx, head_idx, bid_x, 0), (1, 1, TILE_M, TILE_D))
        q = q.reshape((TILE_M, TILE_D))

        m_end = input_pos + (bid_x + 1) * TILE_M
        k_seqlen = K.shape[2]
        if causal:
            # from this tile of keys on, a key may come after a query or past the end
            mask_start = min((input_pos + bid_x * TILE_M) // TILE_N, k_seqlen // TILE_N)
            Tc = tile.cdiv(min(m_end, k_seqlen), TILE_N)
        else:
            Tc = tile.cdiv(k_seqlen, TILE_N)
            mask_start = k_seqlen // TILE_N

        for j in range(0, Tc):
            k = tile.load(
                K, (batch_idx, off_kv_h, 0, j), (1, 1, TILE_D, TILE_N), order=(0, 1, 3, 2),
                latency=2,
            )  # fmt: skip
            qk = tile.mma(q, k.reshape((TILE_D, TILE_N)), tile.zeros((TILE_M, TILE_N), fl.f32))
            # the sample's `if (CAUSAL or not EVEN_K) and j >= mask_start`: the outer `if` is
            # decided at compile time, the inner one is a run-time `tile.if`
            if causal or not even_k:  # noqa: SIM102
                if j >= mask_start:
                    offs_n = j * TILE_N + offs_n_tile
                    mask = tile.full((TILE_M, TILE_N), True, fl.bool_)
                    if not even_k:
                        mask = mask & (offs_n < k_seqlen)
                    if causal:
                        mask = mask & (offs_m >= offs_n)
                    qk = qk + tile.where(mask, 0.0, -math.inf)

            # online softmax; qk_scale applied after the max, as the sample does
            m_ij = max(m_i, tile.max(qk, axis=-1, keepdims=True) * qk_scale)
            p = tile.exp2(qk * qk_scale - m_ij, flush_to_zero=True)
            l_ij = tile.sum(p, axis=-1, keepdims=True)
            alpha = tile.exp2(m_i - m_ij, flush_to_zero=True)
            l_i = l_i * alpha + l_ij
            acc = acc * alpha
            v = tile.load(V, (batch_idx, off_kv_h, j, 0), (1, 1, TILE_N, TILE_D), latency=4)
            acc = tile.mma(p.astype(dt), v.reshape((TILE_N, TILE_D)), acc)
            m_i = m_ij

        acc = tile.truediv(acc, l_i, rounding_mode=tile.RoundingMode.APPROX, flush_to_zero=True)
        Out.store(acc.reshape((1, 1, TILE_M, TILE_D)).astype(dt))

    return fmha_kernel


_FMHAS: dict = {}


def fmha(Q, K, V, qk_scale=None, input_pos=0, tile_m=128, tile_n=128, query_group_size=1,
         causal=False):  # fmt: skip
    """Attention of Q (Batch, Heads, SeqLen_Q, D) over K, V (Batch, KV_Heads, SeqLen_KV, D),
    KV_Heads * query_group_size == Heads, with the sample's checks, defaults (tiles of 128,
    qk_scale 1 / sqrt(D)) and occupancy=2."""
    Q, K, V = fl.asarray(Q), fl.asarray(K), fl.asarray(V)
    if Q.ndim != 4 or K.ndim != 4 or V.ndim != 4:
        raise ValueError("Q, K and V must be 4-D (Batch, Heads, SeqLen, Dim)")
    if not Q.shape[0] == K.shape[0] == V.shape[0]:
        raise ValueError("Batch dimensions must match for Q, K, V")
    if K.shape[1] * query_group_size != Q.shape[1]:
        raise ValueError("K_Heads * query_group_size must equal Q_Heads")
    if Q.shape[3] != K.shape[3] or K.shape[2] != V.shape[2] or V.shape[3] != Q.shape[3]:
        raise ValueError("Q, K and V must share D, and K and V the KV sequence length")
    if not Q.dtype == K.dtype == V.dtype:
        raise ValueError("Q, K and V must have the same dtype")
    batch, heads, seq_q, d = Q.shape
    even_k = K.shape[2] % tile_n == 0
    key = (Q.dtype, causal, even_k)
    kernel = _FMHAS.get(key)
    if kernel is None:
        kernel = _FMHAS[key] = make_fmha(Q.dtype, causal, even_k, occupancy=2)
    scale = 1.0 / math.sqrt(d) if qk_scale is None else qk_scale
    out = fl.empty((batch, heads, seq_q, d), dtype=Q.dtype).partition((1, 1, tile_m, d))
    kernel(out, Q, K, V, float(scale), int(input_pos), tile_n, query_group_size)
    return out.unpartition()


# ----------------------------------------------------------------- ahead of time (no GPU)

# Launches `fearless compile examples/cutile_samples.py --arch sm_90` prepares: the module-level
# kernels at their samples' shapes (VectorAddition 1,000,000 and 2048 x 1024 with the sample's
# tiles; Transpose 1024 x 512 in f32, tiles of 32). The factories' kernels compile at launch.


def _f32(*shape: int) -> tile.Spec:
    """A fresh f32 Spec (a Spec partitioned for an output is moved, like a tensor)."""
    return tile.Spec(shape, fl.f32)


vec_add_1d.specialise(_f32(1_000_000).partition((1024,)), _f32(1_000_000), _f32(1_000_000))
vec_add_2d.specialise(_f32(2048, 1024).partition((1, 1024)), _f32(2048, 1024), _f32(2048, 1024))
transpose.specialise(_f32(512, 1024).partition((32, 32)), _f32(1024, 512))
transpose_by_order.specialise(_f32(512, 1024).partition((32, 32)), _f32(1024, 512))


def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    print("vec_add max error:", np.abs(vec_add(a, b).numpy() - (a + b)).max())
    print("vec_add (gather) exact:", np.array_equal(vec_add(a, b, True).numpy(), a + b))
    x = rng.standard_normal((100, 70)).astype(np.float32)
    print("transpose exact:", np.array_equal(cutile_transpose(x, by_order=True).numpy(), x.T))
    A = rng.standard_normal((96, 80)).astype(np.float32)
    B = rng.standard_normal((80, 72)).astype(np.float32)
    print("matmul max error:", np.abs(matmul(A, B).numpy() - A @ B).max())


if __name__ == "__main__":
    main()
