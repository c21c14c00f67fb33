# @ct.kernel bodies are cuTile's language: `ct.Constant[int]` is its type, not Python's.
# mypy: disable-error-code="no-untyped-def,valid-type"
"""cuTile Python peers (`cuda.tile`): the plain kernels of each case, as cuTile's samples write them.

Imported only when `cuda.tile` is. Each `*_launch` function takes torch tensors and returns a
callable that launches once on torch's current stream with fixed tile sizes. TileGym's tuned
kernels, where TileGym has one, are a separate peer (`family_*` modules call `tilegym.ops`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cuda.tile as ct

Launch = Callable[[], None]
ConstInt = ct.Constant[int]


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def _stream() -> Any:
    import torch

    return torch.cuda.current_stream()


@ct.kernel
def _vecadd(a, b, c, TILE: ConstInt):
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,))
    y = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(c, index=(bid,), tile=x + y)


def vecadd_launch(a: Any, b: Any, c: Any, tile: int = 1024) -> Launch:
    grid, stream = (_cdiv(c.numel(), tile), 1, 1), _stream()
    return lambda: ct.launch(stream, grid, _vecadd, (a, b, c, tile))


@ct.kernel
def _saxpy(alpha: float, x, y, out, TILE: ConstInt):
    bid = ct.bid(0)
    xt = ct.load(x, index=(bid,), shape=(TILE,))
    yt = ct.load(y, index=(bid,), shape=(TILE,))
    ct.store(out, index=(bid,), tile=alpha * xt + yt)


def saxpy_launch(alpha: float, x: Any, y: Any, out: Any, tile: int = 1024) -> Launch:
    grid, stream = (_cdiv(out.numel(), tile), 1, 1), _stream()
    return lambda: ct.launch(stream, grid, _saxpy, (alpha, x, y, out, tile))


@ct.kernel
def _sum_partials(x, part, ITERS: ConstInt, TILE: ConstInt):
    """Block p sums tiles p, p + P, p + 2P, ... of x (zero-padded) into part[p]."""
    bid = ct.bid(0)
    nb = ct.num_blocks(0)
    acc = ct.zeros((TILE,), dtype=ct.float32)
    for it in range(ITERS):
        t = ct.load(x, index=(it * nb + bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
        acc = acc + t
    ct.store(part, index=(bid,), tile=ct.sum(acc))


@ct.kernel
def _sum_final(part, out, P: ConstInt):
    ct.store(out, index=(0,), tile=ct.sum(ct.load(part, index=(0,), shape=(P,))))


def sum_launch(x: Any, out: Any, partials: Any, tile: int = 4096) -> Launch:
    """Two launches, as the Triton peer: `len(partials)` blocks (a power of two), then one."""
    p = partials.numel()
    iters = _cdiv(x.numel(), p * tile)
    stream = _stream()

    def run() -> None:
        ct.launch(stream, (p, 1, 1), _sum_partials, (x, partials, iters, tile))
        ct.launch(stream, (1, 1, 1), _sum_final, (partials, out, p))

    return run


@ct.kernel
def _softmax(x, out, BN: ConstInt):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, BN), padding_mode=ct.PaddingMode.NEG_INF)
    e = ct.exp(t - ct.max(t, axis=1, keepdims=True))
    ct.store(out, index=(row, 0), tile=e / ct.sum(e, axis=1, keepdims=True))


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def softmax_launch(x: Any, out: Any) -> Launch:
    rows, cols = x.shape
    stream, bn = _stream(), _pow2(cols)
    return lambda: ct.launch(stream, (rows, 1, 1), _softmax, (x, out, bn))


@ct.kernel
def _rms_norm(x, w, out, eps: float, N: ConstInt, BN: ConstInt):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, BN), padding_mode=ct.PaddingMode.ZERO)
    ms = ct.sum(t * t, axis=1, keepdims=True) / N
    wt = ct.reshape(ct.load(w, index=(0,), shape=(BN,), padding_mode=ct.PaddingMode.ZERO), (1, BN))
    ct.store(out, index=(row, 0), tile=t * ct.rsqrt(ms + eps) * wt)


def rms_norm_launch(x: Any, w: Any, eps: float, out: Any) -> Launch:
    rows, cols = x.shape
    stream, bn = _stream(), _pow2(cols)
    return lambda: ct.launch(stream, (rows, 1, 1), _rms_norm, (x, w, out, eps, cols, bn))


@ct.kernel
def _layer_norm(x, w, b, out, eps: float, N: ConstInt, BN: ConstInt):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, BN), padding_mode=ct.PaddingMode.ZERO)
    mean = ct.sum(t, axis=1, keepdims=True) / N
    inside = ct.reshape(ct.arange(BN, dtype=ct.int32), (1, BN)) < N
    d = ct.where(inside, t - mean, 0.0)
    rstd = ct.rsqrt(ct.sum(d * d, axis=1, keepdims=True) / N + eps)
    wt = ct.reshape(ct.load(w, index=(0,), shape=(BN,), padding_mode=ct.PaddingMode.ZERO), (1, BN))
    bt = ct.reshape(ct.load(b, index=(0,), shape=(BN,), padding_mode=ct.PaddingMode.ZERO), (1, BN))
    ct.store(out, index=(row, 0), tile=d * rstd * wt + bt)


def layer_norm_launch(x: Any, w: Any, b: Any, eps: float, out: Any) -> Launch:
    rows, cols = x.shape
    stream, bn = _stream(), _pow2(cols)
    return lambda: ct.launch(stream, (rows, 1, 1), _layer_norm, (x, w, b, out, eps, cols, bn))


@ct.kernel
def _transpose(x, out, TM: ConstInt, TN: ConstInt):
    i = ct.bid(0)
    j = ct.bid(1)
    t = ct.load(x, index=(i, j), shape=(TM, TN))
    ct.store(out, index=(j, i), tile=ct.transpose(t))


def transpose_launch(x: Any, out: Any, tile: int = 64) -> Launch:
    rows, cols = x.shape
    grid, stream = (_cdiv(rows, tile), _cdiv(cols, tile), 1), _stream()
    return lambda: ct.launch(stream, grid, _transpose, (x, out, tile, tile))


@ct.kernel
def _matmul(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(TM, TK))):
        at = ct.load(a, index=(i, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
        bt = ct.load(b, index=(k, j), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(at, bt, acc)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


def matmul_launch(a: Any, b: Any, c: Any, tiles: tuple[int, int, int] = (128, 128, 64)) -> Launch:
    m, n = c.shape
    tm, tn, tk = tiles
    grid, stream = (_cdiv(m, tm), _cdiv(n, tn), 1), _stream()
    return lambda: ct.launch(stream, grid, _matmul, (a, b, c, tm, tn, tk))


@ct.kernel
def _args3(a, b, c, TILE: ConstInt):
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,))
    ct.store(c, index=(bid,), tile=x + ct.load(b, index=(bid,), shape=(TILE,)))


def args3_launch(a: Any, b: Any, c: Any) -> Launch:
    grid, stream = (_cdiv(c.numel(), 256), 1, 1), _stream()
    return lambda: ct.launch(stream, grid, _args3, (a, b, c, 256))
