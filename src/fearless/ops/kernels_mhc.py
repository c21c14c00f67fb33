"""The Tile kernels behind TileGym's mHC operators (`fearless.ops.mhc_gemm_rms_scale`,
`mhc_apply_residual`, `mhc_sinkhorn`), and their autotuned launches.

- `make_mhc_gemm_rms`: block (s, i, j) multiplies the (BM, BK) tiles of x by w's over split s
  of K (`per` K tiles each) into a partial (BM, BN) f32 product, and sums the squares of the same x tiles into the
  rows' partial sum of squares (stored once per column tile, so every block owns what it
  writes; the finalize reads column tile 0's). The product is in tf32 where x or w is f32,
  else in x's dtype, as TileGym's.
- `make_mhc_finalize`: block i sums the splits of its rows over every column (one tile as wide
  as N rounded up), r = sqrt(sum of squares / K), and writes y = product * alpha / r + bias with
  sigmoid on columns [0, n), 2 sigmoid on [n, 2n) (alpha_pre, alpha_post, then alpha_res).
- `make_mhc_apply_residual`: block (b, 0, c) writes the n rows (padded to a power of two) of
  out[b] (n, C) over TILE_C columns: sum_j h_res[i, j] x[b, j] + h_post[i] f_out[b], the
  coefficients gathered from y's row, in f32.
- `make_mhc_sinkhorn` gathers row b's n x n block of y (from column 2n), exponentiates it and
  normalises rows then columns 20 times in f32, into a scratch (M, n, n); `make_mhc_merge`
  writes the scratch back over that block of y, each block rewriting its own tile of y.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile

from ._io import empty_beside
from .kernels_rows import kernel_of, next_pow2, size_class

SINKHORN_ITERS = 20  # TileGym's


def make_mhc_gemm_rms(xdt, wdt):
    """Partial x @ w (S, M, N) and partial sums of squares of x's rows (S, M, column tiles)."""
    mdt = fl.tf32 if fl.f32 in (xdt, wdt) else xdt

    @tile.kernel
    def mhc_gemm_rms(
        y_acc: tile.Part[fl.f32],
        r_acc: tile.Part[fl.f32],
        x: tile.Tensor[xdt],
        w: tile.Tensor[wdt],
        per: int,
        BK: tile.Const[int],
    ):
        _, BM, BN = y_acc.shape
        s, i, j = y_acc.index
        k_tiles = tile.num_tiles(x, 1, (BM, BK))
        acc = tile.zeros((BM, BN), fl.f32)
        sq = tile.zeros((BM, 1), fl.f32)
        for k in range(s * per, min(s * per + per, k_tiles)):
            a = tile.load(x, (i, k), (BM, BK))
            b = tile.load(w, (k, j), (BK, BN))
            acc = tile.mma(a.astype(mdt), b.astype(mdt), acc)
            a32 = a.astype(fl.f32)
            sq = sq + tile.sum(a32 * a32, axis=1, keepdims=True)
        y_acc.store(acc.reshape((1, BM, BN)))
        r_acc.store(sq.reshape((1, BM, 1)))

    return mhc_gemm_rms


def make_mhc_finalize(ydt):
    """y (M, N) in `ydt` and r (M, 1) f32 from the partials of `make_mhc_gemm_rms`."""

    @tile.kernel
    def mhc_finalize(
        y: tile.Part[ydt],
        r: tile.Part[fl.f32],
        y_acc: tile.Tensor[fl.f32],
        r_acc: tile.Tensor[fl.f32],
        bias: tile.Tensor[ydt],
        n: int,
        k: int,
        alpha_pre: fl.f32,
        alpha_post: fl.f32,
        alpha_res: fl.f32,
    ):
        BM, NP = y.shape
        i, _ = y.index
        acc = tile.zeros((BM, NP), fl.f32)
        sq = tile.zeros((BM, 1), fl.f32)
        for s in range(y_acc.shape[0]):
            acc = acc + tile.load(y_acc, (s, i, 0), (1, BM, NP)).reshape((BM, NP))
            sq = sq + tile.load(r_acc, (s, i, 0), (1, BM, 1)).reshape((BM, 1))
        rms = tile.sqrt(sq / k)
        col = tile.arange(NP, fl.i32).reshape((1, NP))
        pre = col < n
        post = (col >= n) & (col < 2 * n)
        scale = tile.where(pre, alpha_pre, tile.where(post, alpha_post, alpha_res))
        b = tile.load(bias, (0,), (NP,)).astype(fl.f32).reshape((1, NP))
        lin = acc * scale / rms + b
        sig = 1.0 / (1.0 + tile.exp(-lin))
        out = tile.where(pre, sig, tile.where(post, 2.0 * sig, lin))
        y.store(out.astype(ydt))
        r.store(rms)

    return mhc_finalize


def _gemm_cfg(bm, bn, bk, split, occupancy):
    return dict(bm=bm, bn=bn, bk=bk, split=split, occupancy=occupancy)


# TileGym's space: TILE_M 64/128, TILE_N 32, TILE_K 64/128, SPLIT_K 1..16 (few rows, long K).
MHC_GEMM_CONFIGS = [
    _gemm_cfg(64, 32, 128, 8, 2),
    _gemm_cfg(64, 32, 64, 16, 2),
    _gemm_cfg(128, 32, 128, 4, 1),
    _gemm_cfg(64, 64, 128, 4, 2),
    _gemm_cfg(64, 32, 128, 1, 2),
]


def _gemm_key(x, w, bias, *_, **__):
    """Rows by size class, K by size class, N, and the three dtypes."""
    m, k = x.shape
    return size_class(m), size_class(k), w.shape[1], x.dtype.name, w.dtype.name, bias.dtype.name


@fl.autotune(configs=MHC_GEMM_CONFIGS, key=_gemm_key)
def mhc_gemm_rms_scale_tuned(x, w, bias, n, alphas, y, r, *, bm, bn, bk, split, occupancy):
    """y (M, N) and r (M, 1) of TileGym's mhc_gemm_rms_scale (fl.Tensors, M, K and N >= 1)."""
    m, k = x.shape
    nn = w.shape[1]
    bm = min(bm, next_pow2(m))
    bn = min(bn, next_pow2(nn))
    bk = min(bk, next_pow2(k))
    k_tiles = -(-k // bk)
    per = -(-k_tiles // max(1, min(split, k_tiles)))
    splits = -(-k_tiles // per)  # none empty
    col_tiles = -(-nn // bn)
    y_acc = empty_beside(x, (splits, m, nn), fl.f32)
    r_acc = empty_beside(x, (splits, m, col_tiles), fl.f32)
    gemm = kernel_of(make_mhc_gemm_rms, x.dtype, w.dtype)
    with y_acc.partition((1, bm, bn)) as yp, r_acc.partition((1, bm, 1)) as rp:
        gemm.options(occupancy=occupancy)(yp, rp, x, w, per, bk)
    np_ = next_pow2(nn)
    fm = max(1, min(64, 4096 // np_, next_pow2(m)))
    fin = kernel_of(make_mhc_finalize, y.dtype)
    with y.partition((fm, np_)) as yp, r.partition((fm, 1)) as rp:
        fin(yp, rp, y_acc, r_acc, bias, n, k, *alphas)


def make_mhc_apply_residual(xdt, fdt, ydt):
    """out (B, n, C) in `xdt` = h_res @ x (B, n, C) + h_post f_out, coefficients from y."""

    @tile.kernel
    def mhc_apply_residual(
        out: tile.Part[xdt],
        x: tile.Tensor[xdt],
        f_out: tile.Tensor[fdt],
        y: tile.Tensor[ydt],
    ):
        _, NP, TC = out.shape
        b, _, c = out.index
        n = x.shape[1]
        rows = tile.arange(NP, fl.i32)
        live = rows < n
        post = tile.gather(y, (b, n + rows), mask=live).astype(fl.f32).reshape((NP, 1))
        f = tile.load(f_out, (b, c), (1, TC)).astype(fl.f32)
        acc = post * f
        for j in range(n):
            h = tile.gather(y, (b, 2 * n + rows * n + j), mask=live).astype(fl.f32)
            xr = tile.load(x, (b, j, c), (1, 1, TC)).reshape((1, TC)).astype(fl.f32)
            acc = acc + h.reshape((NP, 1)) * xr
        out.store(acc.astype(xdt).reshape((1, NP, TC)))

    return mhc_apply_residual


def _res_cfg(tile_c, occupancy):
    return dict(tile_c=tile_c, occupancy=occupancy)


MHC_RESIDUAL_CONFIGS = [_res_cfg(1024, 2), _res_cfg(512, 4), _res_cfg(2048, 1), _res_cfg(256, 4)]


def _res_key(x, f_out, y, out):
    b, n, c = x.shape
    return size_class(b), n, size_class(c), x.dtype.name, f_out.dtype.name, y.dtype.name


@fl.autotune(configs=MHC_RESIDUAL_CONFIGS, key=_res_key)
def mhc_apply_residual_tuned(x, f_out, y, out, *, tile_c, occupancy):
    """out (B, n, C) of TileGym's mhc_apply_residual from x (B, n, C), f_out (B, C), y."""
    n, c = x.shape[1], x.shape[2]
    tc = min(tile_c, max(1, 4096 // next_pow2(n)), next_pow2(c))
    make = kernel_of(make_mhc_apply_residual, x.dtype, f_out.dtype, y.dtype)
    with out.partition((1, next_pow2(n), tc)) as part:
        make.options(occupancy=occupancy)(part, x, f_out, y)


def make_mhc_sinkhorn(ydt):
    """z (M, n, n) f32: Sinkhorn-Knopp of exp of each row's n x n block of y (column 2n on)."""

    @tile.kernel
    def mhc_sinkhorn(z: tile.Part[fl.f32], y: tile.Tensor[ydt], n: int, ITERS: tile.Const[int]):
        _, NP, _ = z.shape
        b, _, _ = z.index
        rows = tile.arange(NP, fl.i32).reshape((NP, 1))
        cols = tile.arange(NP, fl.i32).reshape((1, NP))
        live = (rows < n) & (cols < n)
        v = tile.gather(y, (b, 2 * n + rows * n + cols), mask=live).astype(fl.f32)
        mat = tile.where(live, tile.exp(v), 0.0)
        live_row = rows < n
        live_col = cols < n
        for _ in range(ITERS):
            rs = tile.sum(mat, axis=1, keepdims=True)
            mat = mat / tile.where(live_row, rs, 1.0)  # padding rows: 0 / 1, not 0 / 0
            cs = tile.sum(mat, axis=0, keepdims=True)
            mat = mat / tile.where(live_col, cs, 1.0)
        z.store(mat.reshape((1, NP, NP)))

    return mhc_sinkhorn


def make_mhc_merge(ydt):
    """y's tiles again, with each row's n x n block from column 2n taken from z (M, n, n)."""

    @tile.kernel
    def mhc_merge(y: tile.Part[ydt], z: tile.Tensor[fl.f32], n: int):
        _, T = y.shape
        b, j = y.index
        row = tile.load_like(y, y).astype(fl.f32)
        cols = tile.arange(T, fl.i32).reshape((1, T)) + j * T
        block = (cols >= 2 * n) & (cols < 2 * n + n * n)
        off = tile.where(block, cols - 2 * n, 0)
        v = tile.gather(z, (b, off // n, off % n), mask=block)
        y.store(tile.where(block, v, row).astype(ydt))

    return mhc_merge


def _sk_cfg(tile_y, occupancy):
    return dict(tile_y=tile_y, occupancy=occupancy)


MHC_SINKHORN_CONFIGS = [_sk_cfg(128, 4), _sk_cfg(256, 2), _sk_cfg(64, 8)]


def _sk_key(y, n, *_, **__):
    return size_class(y.shape[0]), y.shape[1], n, y.dtype.name


@fl.autotune(configs=MHC_SINKHORN_CONFIGS, key=_sk_key, restore_value=["y"])
def mhc_sinkhorn_tuned(y, n, *, tile_y, occupancy):
    """TileGym's mhc_sinkhorn on y (M, >= 2n + n^2), in place (an fl.Tensor, M and n >= 1)."""
    m, width = y.shape
    np_ = next_pow2(n)
    z = empty_beside(y, (m, n, n), fl.f32)
    sk = kernel_of(make_mhc_sinkhorn, y.dtype)
    with z.partition((1, np_, np_)) as zp:
        sk.options(occupancy=occupancy)(zp, y, n, SINKHORN_ITERS)
    merge = kernel_of(make_mhc_merge, y.dtype)
    with y.partition((1, min(tile_y, next_pow2(width)))) as yp:
        merge(yp, z, n)
