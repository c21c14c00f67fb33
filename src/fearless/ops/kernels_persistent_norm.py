"""The Tile kernel behind `fearless.ops.persistent_layer_norm` (TileGym's persistent layer
norm forward, which also gives each row's mean and rstd), and its autotuned launch.

One wave of blocks (about one per SM times the occupancy, `kernel.launch(grid, ...)`) walks the
(BLOCK_N, BLOCK_D) row tiles of y (`for t in y.tiles()`; block g takes tiles g, g + G, ...),
loading the weight and bias once per block, as TileGym's static persistent schedule does. The
statistics are ops.layer_norm's (kernels_rows.layer_norm_stats: centred variance, f32). Two
forms: `compute` stores each row's mean and rstd through `tile.scatter` into f32 (N,) outputs
(`tile.Atomic`: only the block that owns a row tile writes its rows, so no two writes meet);
otherwise the kernel reads the caller's mean and rstd and normalises with them.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from .kernels_rows import kernel_of, layer_norm_stats, next_pow2, size_class, sm_count


def make_persistent_layer_norm(dt, compute, **hints):
    """y = layer_norm(x) * w + b over x's (N, D) rows, x, w, b and y in `dt`; with `compute`
    the rows' mean and rstd go to f32 (N,) outputs, else they are read from f32 (N,) inputs."""

    @tile.function
    def affine(y, x, w, b, eps, mean, rstd):
        _, BN = y.shape
        wt = tile.load(w, (0,), (BN,)).astype(fl.f32)
        bt = tile.load(b, (0,), (BN,)).astype(fl.f32)
        n = x.shape[1]
        for t in y.tiles():
            BM, _ = t.shape
            rows = t.index[0] * BM + tile.arange(BM)
            v = tile.load_like(x, t, latency=4).astype(fl.f32)
            if compute:  # compile-time
                d, mu, r = layer_norm_stats(v, n, eps)
                tile.scatter(mean, rows, mu.reshape((BM,)))
                tile.scatter(rstd, rows, r.reshape((BM,)))
            else:
                mu = tile.load(mean, (t.index[0],), (BM,)).reshape((BM, 1))
                r = tile.load(rstd, (t.index[0],), (BM,)).reshape((BM, 1))
                d = v - mu
            t.store((d * r * wt + bt).astype(dt), allow_tma=False)

    if compute:

        @tile.kernel(**hints)
        def persistent_layer_norm(
            y: tile.Part[dt],
            mean: tile.Atomic[fl.f32],
            rstd: tile.Atomic[fl.f32],
            x: tile.Tensor[dt],
            w: tile.Tensor[dt],
            b: tile.Tensor[dt],
            eps: fl.f32,
        ):
            affine(y, x, w, b, eps, mean, rstd)

        return persistent_layer_norm

    @tile.kernel(**hints)
    def persistent_layer_norm_given(
        y: tile.Part[dt],
        x: tile.Tensor[dt],
        w: tile.Tensor[dt],
        b: tile.Tensor[dt],
        mean: tile.Tensor[fl.f32],
        rstd: tile.Tensor[fl.f32],
    ):
        affine(y, x, w, b, 0.0, mean, rstd)

    return persistent_layer_norm_given


def _cfg(rows, occupancy, num_worker_warps=None):
    return dict(rows=rows, occupancy=occupancy, num_worker_warps=num_worker_warps)


# TileGym's space: BLOCK_N of 2..32 rows, one block per SM (occupancy 1), its default 8 rows
# on Hopper; a tile keeps at most 65536 elements (its register predicate).
PERSISTENT_NORM_CONFIGS = [
    _cfg(8, 1),
    _cfg(4, 1),
    _cfg(2, 1, 8),
    _cfg(16, 1),
    _cfg(32, 1),
    _cfg(4, 2),
    _cfg(1, 2, 8),
]

MAX_TILE = 65536  # elements of one block's (BLOCK_N, BLOCK_D) tile


def block_d(d):
    """The tile's width: D rounded up to a power of two (TileGym's BLOCK_D)."""
    return next_pow2(d)


def _key(x, w, b, eps, y, mean, rstd, given, **__):
    """N's size class, D, the dtype, and whether mean and rstd are given."""
    n, d = x.shape
    return size_class(n), d, x.dtype.name, given


@fl.autotune(configs=PERSISTENT_NORM_CONFIGS, key=_key)
def persistent_layer_norm_tuned(x, w, b, eps, y, mean, rstd, given, *, rows, occupancy,
                                num_worker_warps):  # fmt: skip
    """y (N, D) = layer_norm(x) * w + b (fl.Tensors of one dtype) on a persistent grid; the
    rows' mean and rstd into `mean`, `rstd` (f32 (N,)), or read from them when `given`."""
    n, d = x.shape
    bd = block_d(d)
    rows = max(1, min(rows, MAX_TILE // bd))
    make = kernel_of(make_persistent_layer_norm, x.dtype, not given)
    kernel = make.options(occupancy=occupancy, num_worker_warps=num_worker_warps)
    grid = max(1, min(math.ceil(n / rows), sm_count() * occupancy))
    with y.partition((rows, bd)) as part:
        if given:
            kernel.launch(grid, part, x, w, b, mean, rstd)
        else:
            kernel.launch(grid, part, mean, rstd, x, w, b, eps)
