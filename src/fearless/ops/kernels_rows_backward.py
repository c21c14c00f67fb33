"""The Tile kernels behind ops/backward_rows.py: the backward of softmax, rms_norm and
layer_norm over a row's last axis, and their autotuned launches.

Each kernel computes dx in f32 whatever the dtype, recomputing what the forward does not save
(rstd, mean). A row that fits registers (`next_pow2(n) <= MAX_ROW`) is one tile; a longer one
goes through `chunks` of the configuration's `chunk` columns: one pass (two for layer_norm's
mean and variance) for the row's sums, then one that writes dx.

rms_norm and layer_norm also give the weight's and bias's gradients, sums over every row.
Their kernel (one, `make_norm_bwd`) is persistent: block g of G walks its row tiles and adds
its rows' terms into row g of a (P, G, n) f32 partial sum, one plane per gradient (dw; dw and
db), then `make_column_sum` adds a plane's G rows. Only block g ever
touches row g (in registers across its rows, written once with `tile.scatter`; or, for chunked
rows, `tile.atomic_add`s in the block's program order), so the sums are deterministic: the
same inputs give the same bits on every run.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from ._io import zeros_beside
from .kernels_rows import kernel_of, next_pow2, rows_key, sm_count

MAX_ROW = 4096  # the longest row (a power of two) kept whole in registers; longer: chunks


@tile.function
def load_f32(x, at):
    """x's tile at `at` (a row tile or a chunk of one) in f32; no TMA, as every load here."""
    return tile.load_like(x, at, allow_tma=False).astype(fl.f32)


@tile.function
def weight_chunk(w, c, CH):
    """The weight's CH columns under chunk `c` of a row, in f32."""
    return tile.load(w, (c.index[1],), (CH,), allow_tma=False).astype(fl.f32)


# --------------------------------------------------------------------------- softmax


@tile.function
def softmax_bwd_rows(y, dy, at):
    """y * (dy - sum(dy * y)) for the rows at `at`, in f32."""
    yv = load_f32(y, at)
    g = load_f32(dy, at)
    return yv * (g - tile.sum(g * yv, axis=1, keepdims=True))


@tile.function
def softmax_bwd_chunked(y, dy, at, CH):
    """`softmax_bwd_rows` in chunks of CH columns: one pass for sum(dy * y), one that writes."""
    BM, _ = at.shape
    s = tile.zeros((BM, 1), fl.f32)
    for c in at.chunks((BM, CH)):
        yv = load_f32(y, c)
        g = load_f32(dy, c)
        s = s + tile.sum(g * yv, axis=1, keepdims=True)
    for c in at.chunks((BM, CH)):
        yv = load_f32(y, c)
        g = load_f32(dy, c)
        c.store((yv * (g - s)).astype(y.dtype))


def make_softmax_bwd(dt, persistent=False, chunk=0, **hints):
    """dx of softmax from its output y and dy: one block per row tile, or (`persistent`) one
    wave of blocks walking them; rows in chunks of `chunk` columns when it is not 0."""

    @tile.kernel(**hints)
    def softmax_bwd(dx: tile.Part[dt], y: tile.Tensor[dt], dy: tile.Tensor[dt]):
        if persistent:  # compile-time
            for t in dx.tiles():
                if chunk:  # compile-time
                    softmax_bwd_chunked(y, dy, t, chunk)
                else:
                    t.store(softmax_bwd_rows(y, dy, t).astype(dt))
        elif chunk:
            softmax_bwd_chunked(y, dy, dx, chunk)
        else:
            dx.store(softmax_bwd_rows(y, dy, dx).astype(dt))

    return softmax_bwd


# --------------------------------------------------------------------------- rms_norm


@tile.function
def rms_norm_bwd_rows(dy, x, w, at, eps):
    """(dx, dy * xhat) of rms_norm for the rows at `at`, in f32: xhat = x * rstd,
    dx = rstd * (w dy - xhat * mean(w dy * xhat))."""
    _, BN = at.shape
    n = x.shape[1].astype(fl.f32)
    v = load_f32(x, at)
    g = load_f32(dy, at)
    wg = g * tile.load(w, (0,), (BN,), allow_tma=False).astype(fl.f32)
    r = tile.rsqrt(tile.sum(v * v, axis=1, keepdims=True) / n + eps)
    xhat = v * r
    dx = r * (wg - xhat * (tile.sum(wg * xhat, axis=1, keepdims=True) / n))
    return dx, g * xhat


@tile.function
def part_sums(sums, plane, g, j, t, CH):
    """Add the (CH,) column sums `t` into chunk j of row g of `sums`' plane: one tiled atomic
    add (a TMA reduction; the columns past n are dropped)."""
    tile.atomic_store_add(sums, (plane, g, j), t.reshape((1, 1, CH)))


@tile.function
def rms_norm_bwd_chunked(dy, x, w, at, eps, CH, sums, g):
    """`rms_norm_bwd_rows` in chunks of CH columns, writing dx and adding dy * xhat into row
    `g` of `sums`' plane 0: one pass for sum(x^2) and sum(w dy x), one that writes."""
    BM, _ = at.shape
    n = x.shape[1].astype(fl.f32)
    ss = tile.zeros((BM, 1), fl.f32)
    sgx = tile.zeros((BM, 1), fl.f32)
    for c in at.chunks((BM, CH)):
        v = load_f32(x, c)
        wt = weight_chunk(w, c, CH)
        wg = load_f32(dy, c) * wt
        ss = ss + tile.sum(v * v, axis=1, keepdims=True)
        sgx = sgx + tile.sum(wg * v, axis=1, keepdims=True)
    r = tile.rsqrt(ss / n + eps)
    k = r * r * r * sgx / n  # rstd * mean(w dy * xhat) / x, as xhat = x * rstd
    for c in at.chunks((BM, CH)):
        v = load_f32(x, c)
        wt = weight_chunk(w, c, CH)
        gy = load_f32(dy, c)
        c.store((r * gy * wt - v * k).astype(x.dtype))
        part_sums(sums, 0, g, c.index[1], tile.sum(gy * v * r, axis=0), CH)


# --------------------------------------------------------------------------- layer_norm


@tile.function
def layer_norm_bwd_rows(dy, x, w, at, eps):
    """(dx, dy * xhat, dy) of layer_norm for the rows at `at`, in f32: xhat = (x - mean) *
    rstd, dx = rstd * (w dy - mean(w dy) - xhat * mean(w dy * xhat))."""
    _, BN = at.shape
    n = x.shape[1]
    nf = n.astype(fl.f32)
    v = load_f32(x, at)
    g = load_f32(dy, at)
    wg = g * tile.load(w, (0,), (BN,), allow_tma=False).astype(fl.f32)
    mean = tile.sum(v, axis=1, keepdims=True) / nf
    d = tile.where(tile.arange(BN) < n, v - mean, 0.0)
    r = tile.rsqrt(tile.sum(d * d, axis=1, keepdims=True) / nf + eps)
    xhat = d * r
    c1 = tile.sum(wg * xhat, axis=1, keepdims=True) / nf
    c2 = tile.sum(wg, axis=1, keepdims=True) / nf
    return r * (wg - c2 - xhat * c1), g * xhat, g


@tile.function
def layer_norm_bwd_chunked(dy, x, w, at, eps, CH, sums, g):
    """`layer_norm_bwd_rows` in chunks of CH columns, adding dy * xhat and dy into row `g` of
    `sums`' planes 0 and 1: a pass for the mean, one for the variance, sum(w dy) and sum(w dy
    (x - mean)), one that writes."""
    BM, _ = at.shape
    n = x.shape[1]
    nf = n.astype(fl.f32)
    sx = tile.zeros((BM, 1), fl.f32)
    for c in at.chunks((BM, CH)):
        sx = sx + tile.sum(load_f32(x, c), axis=1, keepdims=True)
    mean = sx / nf
    svar = tile.zeros((BM, 1), fl.f32)
    sg = tile.zeros((BM, 1), fl.f32)
    sgd = tile.zeros((BM, 1), fl.f32)
    for c in at.chunks((BM, CH)):
        inside = c.index[1] * CH + tile.arange(CH) < n
        d = tile.where(inside, load_f32(x, c) - mean, 0.0)
        wt = weight_chunk(w, c, CH)
        wg = load_f32(dy, c) * wt
        svar = svar + tile.sum(d * d, axis=1, keepdims=True)
        sg = sg + tile.sum(wg, axis=1, keepdims=True)
        sgd = sgd + tile.sum(wg * d, axis=1, keepdims=True)
    r = tile.rsqrt(svar / nf + eps)
    c1 = r * sgd / nf  # mean(w dy * xhat)
    c2 = sg / nf  # mean(w dy)
    for c in at.chunks((BM, CH)):
        cols = c.index[1] * CH + tile.arange(CH)
        d = tile.where(cols < n, load_f32(x, c) - mean, 0.0)
        xhat = d * r
        wt = weight_chunk(w, c, CH)
        gy = load_f32(dy, c)
        c.store((r * (gy * wt - c2 - xhat * c1)).astype(x.dtype))
        part_sums(sums, 0, g, c.index[1], tile.sum(gy * xhat, axis=0), CH)
        part_sums(sums, 1, g, c.index[1], tile.sum(gy, axis=0), CH)


def make_norm_bwd(dt, centered, chunk=0, **hints):
    """dx of layer_norm (`centered`) or rms_norm, and the partial sums of dw (and of db, for
    layer_norm): row g of plane 0 (and 1) of a (P, G, n) f32 tensor, G the launch's grid
    (persistent)."""

    @tile.kernel(**hints)
    def norm_bwd(
        dx: tile.Part[dt],
        sums: tile.Atomic[fl.f32],
        dy: tile.Tensor[dt],
        x: tile.Tensor[dt],
        w: tile.Tensor[dt],
        eps: fl.f32,
    ):
        g = tile.block_id(0)
        BM, BN = dx.shape
        if chunk:  # compile-time, as `centered`
            for t in dx.tiles():
                if centered:
                    layer_norm_bwd_chunked(dy, x, w, t, eps, chunk, sums, g)
                else:
                    rms_norm_bwd_chunked(dy, x, w, t, eps, chunk, sums, g)
        else:
            acc_w = tile.zeros((BM, BN), fl.f32)
            acc_b = tile.zeros((BM, BN), fl.f32)
            for t in dx.tiles():
                if centered:
                    d, term_w, term_b = layer_norm_bwd_rows(dy, x, w, t, eps)
                    acc_b = acc_b + term_b
                else:
                    d, term_w = rms_norm_bwd_rows(dy, x, w, t, eps)
                t.store(d.astype(dt))
                acc_w = acc_w + term_w
            cols = tile.arange(BN)
            tile.scatter(sums, (0, g, cols), tile.sum(acc_w, axis=0))
            if centered:
                tile.scatter(sums, (1, g, cols), tile.sum(acc_b, axis=0))

    return norm_bwd


# --------------------------------------------------------------------------- column sums

COLUMN_TILE = (32, 64)  # (rows, columns) of partial sums a column_sum block adds per step


def make_column_sum(dt):
    """out[j] = sum over i of sums[p, i, j] (plane p of an f32 (P, G, n) partial sum), written
    in `dt`."""

    @tile.kernel
    def column_sum(
        out: tile.Part[dt], sums: tile.Tensor[fl.f32], p: fl.i32, TILE_M: tile.Const[int]
    ):
        (BN,) = out.shape
        j = out.index[0]
        acc = tile.zeros((TILE_M, BN), fl.f32)
        for i in range(tile.num_tiles(sums, 1, (1, TILE_M, BN))):
            rows = tile.load(sums, (p, i, j), (1, TILE_M, BN), allow_tma=False)
            acc = acc + rows.reshape((TILE_M, BN))
        out.store(tile.sum(acc, axis=0).astype(dt))

    return column_sum


def column_sum(sums, p, out):
    """out (n,) = plane p of sums (P, G, n), summed over its rows."""
    tm, tn = COLUMN_TILE
    part = out.partition((min(tn, next_pow2(out.shape[0])),))
    kernel_of(make_column_sum, out.dtype)(part, sums, p, tm)
    part.unpartition()


# --------------------------------------------------------------------------- launches


def _bwd(rows, occupancy, num_worker_warps, chunk, persistent=True):
    return dict(rows=rows, occupancy=occupancy, num_worker_warps=num_worker_warps,
                chunk=chunk, persistent=persistent)  # fmt: skip


# `chunk` is the chunk of a row longer than MAX_ROW; shorter rows are one tile whatever it is.
# The first configuration (FEARLESS_AUTOTUNE=0) fits every shape. No chunk below 2048: tileiras
# unrolls the chunk loops (their trip counts are static), so its compile time grows with the
# number of chunks (a row of 8192 in chunks of 512: 11 s, of 2048: 3 s).
NORM_BWD_CONFIGS = [
    _bwd(1, 2, None, 2048),
    _bwd(1, 4, None, 2048),
    _bwd(1, 1, 8, 4096),
    _bwd(2, 2, None, 2048),
]
SOFTMAX_BWD_CONFIGS = [
    _bwd(1, 4, None, 2048, persistent=False),
    _bwd(1, 2, 8, 4096, persistent=False),
    _bwd(2, 4, None, 2048, persistent=False),
    _bwd(1, 4, None, 2048),
]


def _launch(op, dx, first, *rest, partials, rows, occupancy, num_worker_warps, chunk, persistent):
    """Run backward kernel `op` on the 2-D `dx` and inputs with one configuration. `partials`
    (how many (G, n) f32 partial sums the kernel adds into, planes of one (P, G, n) tensor) > 0
    makes it persistent on a grid of G blocks; returns those partial sums, zeros where no row
    was (None for softmax)."""
    m, n = first.shape
    bn = next_pow2(n)
    chunk = min(chunk, bn) if bn > MAX_ROW else 0
    if rows > 1 and rows * (chunk or bn) > 8192:
        raise fl.LaunchContractError(
            f"{rows} rows of {chunk or bn} do not fit one block's registers"
        )
    tiles = math.ceil(m / rows)
    grid = max(1, min(tiles, sm_count() * (occupancy or 1)))
    sums = [zeros_beside(dx, (partials, grid, n), fl.f32)] if partials else []
    if m == 0:
        return sums[0] if sums else None
    if partials:
        kernel = kernel_of(make_norm_bwd, dx.dtype, op == "layer_norm", chunk=chunk)
    else:
        kernel = kernel_of(make_softmax_bwd, dx.dtype, chunk=chunk, persistent=persistent)
    kernel = kernel.options(occupancy=occupancy, num_worker_warps=num_worker_warps)
    # a configuration the tuner tries may fail to compile: `dx` is the caller's again
    with dx.partition((rows, bn)) as part:
        if partials or persistent:
            kernel.launch(grid, part, *sums, first, *rest)
        else:
            kernel(part, first, *rest)
    return sums[0] if sums else None


def _rows_of_x(dy, x, *_, **__):
    return rows_key(x)


@fl.autotune(configs=SOFTMAX_BWD_CONFIGS, key=rows_key)
def softmax_bwd_tuned(y, dy, dx, **config):
    """dx (M, n) = softmax's backward of its 2-D output y and gradient dy."""
    _launch("softmax", dx, y, dy, partials=0, **config)


@fl.autotune(configs=NORM_BWD_CONFIGS, key=_rows_of_x)
def rms_norm_bwd_tuned(dy, x, w, eps, dx, **config):
    """dx (M, n) of rms_norm, and the (1, G, n) f32 partial sums of dw."""
    return _launch("rms_norm", dx, dy, x, w, eps, partials=1, **config)


@fl.autotune(configs=NORM_BWD_CONFIGS, key=_rows_of_x)
def layer_norm_bwd_tuned(dy, x, w, eps, dx, **config):
    """dx (M, n) of layer_norm, and the (2, G, n) f32 partial sums of dw and db."""
    return _launch("layer_norm", dx, dy, x, w, eps, partials=2, **config)
