"""The Tile kernels behind fearless.ops' transpose and rope.

`make_transpose`: out's (BM, BN) tile (i, j) is the transpose of x's (BN, BM) tile (j, i).

`make_rope`: rotary position embedding as TileGym's rope kernel computes it, out of place. One
block per (batch, position) owns that row of every head of q and of k (tiles (1, QH, 1, D), QH
the heads rounded up to a power of two). With x1, x2 the halves of D and c, s the first half of
cos and sin at that position, the halves become x1 c - x2 s and x2 c + x1 s, computed in the
tensors' dtype as TileGym computes them (in f32 the kernel ran at 0.66 of TileGym's speed,
bench/results/h200-2026-12-03l-launch-rope); each half is read once, every read comes before
the first store, and each tile is stored whole. With `tables` f32 and 16-bit q and k (OLMo 2
and 3 keep their tables in f32), the halves are widened to f32, rotated there and stored in q's
dtype, one rounding: Hugging Face's `(q * cos + rotate_half(q) * sin).to(q.dtype)` for those
models.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile

from .kernels_rows import kernel_of, size_class


def make_transpose(dt, batched=False):
    """out = x.T, or per matrix of a batch (`batched`: tiles (1, BM, BN) of (B, N, M))."""

    @tile.kernel
    def transpose(out: tile.Part[dt], x: tile.Tensor[dt]):
        if batched:  # compile-time
            _, BM, BN = out.shape
            b, i, j = out.index
            v = tile.load(x, (b, j, i), (1, BN, BM)).reshape((BN, BM))
            out.store(tile.transpose(v).reshape((1, BM, BN)))
        else:
            BM, BN = out.shape
            i, j = out.index
            out.store(tile.transpose(tile.load(x, (j, i), (BN, BM))))

    return transpose


def _tr(bm, bn, occupancy=None):
    return dict(tile=(bm, bn), occupancy=occupancy)


# TileGym's transpose takes (128, 128) tiles for 16-bit tensors of 4096 or more on each side,
# (64, 64) otherwise; the tuner chooses per shape and dtype.
TRANSPOSE_CONFIGS = [_tr(64, 64), _tr(128, 128), _tr(64, 128), _tr(128, 64), _tr(64, 64, 4)]


def _transpose_key(x, *_, **__):
    return tuple(size_class(e) for e in x.shape)


@fl.autotune(configs=TRANSPOSE_CONFIGS, key=_transpose_key)
def transpose_tuned(x, out, *, tile, occupancy):
    """out = x.T (2-D) or each matrix of x transposed (3-D) in (BM, BN) tiles of out."""
    batched = len(x.shape) == 3
    kernel = kernel_of(make_transpose, x.dtype, batched).options(occupancy=occupancy)
    with out.partition((1, *tile) if batched else tile) as part:
        kernel(part, x)


@tile.function
def rope_halves(x, b, s, XH, D, seq):
    """The two halves of D of `x`'s XH heads at (batch b, position s), as (XH, 1, H) tiles;
    `seq` (compile-time): x is (B, S, H, D), else (B, H, S, D)."""
    H = D // 2
    if seq:
        x1 = tile.load(x, (b, s, 0, 0), (1, 1, XH, H)).reshape((XH, 1, H))
        x2 = tile.load(x, (b, s, 0, 1), (1, 1, XH, H)).reshape((XH, 1, H))
    else:
        x1 = tile.load(x, (b, 0, s, 0), (1, XH, 1, H)).reshape((XH, 1, H))
        x2 = tile.load(x, (b, 0, s, 1), (1, XH, 1, H)).reshape((XH, 1, H))
    return x1, x2


@tile.function
def rope_store(out, y, XH, D, seq):
    """Store the rotated heads `y` ((XH, 2, H): the two halves joined, which is (XH, D)
    row-major) into `out`'s own tile whole, (1, 1, XH, D) where `seq`, else (1, XH, 1, D)."""
    if seq:
        out.store(y.reshape((1, 1, XH, D)))
    else:
        out.store(y.reshape((1, XH, 1, D)))


@tile.function
def rotated(x1, x2, c, sn, dt, wide):
    """The halves (x1, x2) rotated by (c, sn) and joined into an (XH, 2, H) tile; `wide`
    (compile-time): 16-bit halves by f32 tables, rotated in f32 and rounded to `dt`."""
    if wide:
        x1, x2 = x1.astype(fl.f32), x2.astype(fl.f32)
    half = tile.arange(2).reshape((1, 2, 1))
    y = tile.where(half == 0, x1 * c - x2 * sn, x2 * c + x1 * sn)
    if wide:
        y = y.astype(dt)
    return y


def make_rope(dt, inverse=False, tables=None, seq=False):
    """rope's kernel; `inverse` rotates the other way (sin negated): its backward. `tables`:
    cos and sin's dtype when it is not `dt` (f32 with 16-bit `dt`: the halves are rotated in
    f32 and stored in `dt`). `seq`: q, k and the outputs are (B, S, H, D) (sequence-major),
    else (B, H, S, D)."""
    wide = tables is not None and tables != dt
    tdt = tables if wide else dt

    @tile.kernel
    def rope(
        qo: tile.Part[dt],
        ko: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        cos: tile.Tensor[tdt],
        sin: tile.Tensor[tdt],
        COS_BS: tile.Const[int],
    ):
        if seq:  # compile-time
            _, _, XQ, D = qo.shape
            _, _, XK, _ = ko.shape
            b, s, _, _ = qo.index
        else:
            _, XQ, _, D = qo.shape
            _, XK, _, _ = ko.shape
            b, _, s, _ = qo.index
        H = D // 2
        cb = b if COS_BS > 1 else 0
        c = tile.load(cos, (cb, s, 0), (1, 1, H))
        sn = tile.load(sin, (cb, s, 0), (1, 1, H))
        if inverse:  # compile-time
            sn = -sn
        # every load before the first store: a store may alias a later load for all the
        # compiler knows, so loads after it would wait for it
        q1, q2 = rope_halves(q, b, s, XQ, D, seq)
        k1, k2 = rope_halves(k, b, s, XK, D, seq)
        rope_store(qo, rotated(q1, q2, c, sn, dt, wide), XQ, D, seq)
        rope_store(ko, rotated(k1, k2, c, sn, dt, wide), XK, D, seq)

    return rope
