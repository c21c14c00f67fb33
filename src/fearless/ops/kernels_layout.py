"""The Tile kernels behind fearless.ops' transpose and rope.

`make_transpose`: out's (BM, BN) tile (i, j) is the transpose of x's (BN, BM) tile (j, i).

`make_rope`: rotary position embedding as TileGym's rope kernel computes it, out of place. One
block per (batch, position) owns that row of every head of q and of k (tiles (1, QH, 1, D), QH
the heads rounded up to a power of two). With x1, x2 the halves of D and c, s the first half of
cos and sin at that position, the halves become x1 c - x2 s and x2 c + x1 s; each half is read
once and the tile is stored whole.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile


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


@tile.function
def rope_part(out, x, b, s, c, sn, dt):
    """Rotate `x`'s heads at (batch b, position s) into `out`'s own tile: each half of D read
    once, both rotated halves joined into the (XH, 2, H) tile, which is (XH, D) row-major, and
    stored whole."""
    _, XH, _, D = out.shape
    H = D // 2
    x1 = tile.load(x, (b, 0, s, 0), (1, XH, 1, H)).reshape((XH, 1, H)).astype(fl.f32)
    x2 = tile.load(x, (b, 0, s, 1), (1, XH, 1, H)).reshape((XH, 1, H)).astype(fl.f32)
    first = x1 * c - x2 * sn
    second = x2 * c + x1 * sn
    half = tile.arange(2).reshape((1, 2, 1))
    y = tile.where(half == 0, first, second)
    out.store(y.astype(dt).reshape((1, XH, 1, D)))


def make_rope(dt, inverse=False):
    """rope's kernel; `inverse` rotates the other way (sin negated): its backward."""

    @tile.kernel
    def rope(
        qo: tile.Part[dt],
        ko: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        cos: tile.Tensor[dt],
        sin: tile.Tensor[dt],
        COS_BS: tile.Const[int],
    ):
        _, _, _, D = qo.shape
        H = D // 2
        b, _, s, _ = qo.index
        cb = b if COS_BS > 1 else 0
        c = tile.load(cos, (cb, s, 0), (1, 1, H)).astype(fl.f32)
        sn = tile.load(sin, (cb, s, 0), (1, 1, H)).astype(fl.f32)
        if inverse:  # compile-time
            sn = -sn
        rope_part(qo, q, b, s, c, sn, dt)
        rope_part(ko, k, b, s, c, sn, dt)

    return rope
