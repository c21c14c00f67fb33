"""The Tile kernel behind `fearless.ops.splitk_reduce` (TileGym's reduction of split-KV
attention partials), and its autotuned launch.

Block (b, h, d) of out's (1, 1, TILE_D) tile walks head (b, h)'s splits SC at a time: each
split's partial output o_s (already normalised by its own sum) weighs exp2(lse_s - max), the
log2-sum-exps TileGym's split kernels store, and the block keeps the running max, weighted sum
and total of the online softmax (rescaled when the max grows), so any number of splits takes
registers for SC of them. Splits past the last load with lse -inf and weigh nothing. A head
whose every lse is -inf (no key anywhere) gives 0, where TileGym's 0 / 0 gives NaN.
The running state and the fold (`lse_start`, `lse_fold`) also serve MLA's split combine
(ops/kernels_attention_mla.py).

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from .kernels_rows import kernel_of, next_pow2, size_class


@tile.function
def lse_start(TILE_D):
    """The running max (-inf), total weight (0) and f32 weighted sum (0, (1, TILE_D)) of a
    combine of split partials."""
    m = tile.full((1, 1), -math.inf, fl.f32)
    total = tile.zeros((1, 1), fl.f32)
    acc = tile.zeros((1, TILE_D), fl.f32)
    return m, total, acc


@tile.function
def lse_fold(o, ls, m, acc, total, guarded):
    """(acc, total, m) with SC splits' partial outputs o (SC, D) and log2-sum-exps ls (SC, 1)
    added, each weighing exp2(lse - max) and the sums rescaled when the max grows; `guarded`
    (compile-time): the max may still be -inf (no finite lse yet), the weights then taken
    against 0."""
    m_new = max(m, tile.max(ls, axis=0, keepdims=True))
    if guarded:  # noqa: SIM108
        m_ref = tile.where(m_new == -math.inf, 0.0, m_new)  # no finite lse yet
    else:
        m_ref = m_new
    w = tile.exp2(ls - m_ref)
    alpha = tile.exp2(m - m_ref)
    acc = acc * alpha + tile.sum(o * w, axis=0, keepdims=True)
    total = total * alpha + tile.sum(w, axis=0, keepdims=True)
    return acc, total, m_new


def make_splitk_reduce(dt, ldt, odt, **hints):
    """out (B, H, D) in `odt` from part_o (B, H, S, D) in `dt` and lse (B, H, S) in `ldt`."""

    @tile.kernel(**hints)
    def splitk_reduce(
        out: tile.Part[odt],
        part_o: tile.Tensor[dt],
        lse: tile.Tensor[ldt],
        SC: tile.Const[int],
    ):
        _, _, TILE_D = out.shape
        b, h, d = out.index
        m, total, acc = lse_start(TILE_D)
        for c in range(tile.cdiv(part_o.shape[2], SC)):
            o = tile.load(part_o, (b, h, c, d), (1, 1, SC, TILE_D), latency=2)
            o = o.reshape((SC, TILE_D)).astype(fl.f32)
            ls = tile.load(lse, (b, h, c), (1, 1, SC), padding=-math.inf)
            ls = ls.reshape((SC, 1)).astype(fl.f32)
            acc, total, m = lse_fold(o, ls, m, acc, total, True)
        y = tile.where(total == 0.0, 0.0, acc / total)
        out.store(y.astype(odt).reshape((1, 1, TILE_D)))

    return splitk_reduce


def _cfg(tile_d, splits, occupancy):
    return dict(tile_d=tile_d, splits=splits, occupancy=occupancy)


# TileGym: TILE_D = min(128, D rounded up), every split in one tile (up to 64 in its tests).
SPLITK_CONFIGS = [
    _cfg(128, 16, 2),
    _cfg(128, 16, 4),
    _cfg(256, 8, 2),
    _cfg(64, 32, 4),
    _cfg(512, 4, 1),
]


def _key(part_o, lse, out, *_, **__):
    """Batch x heads and the splits by size class, D, and the three dtypes."""
    b, h, s, d = part_o.shape
    dts = part_o.dtype.name, lse.dtype.name, out.dtype.name
    return size_class(b * h), size_class(s), d, *dts


@fl.autotune(configs=SPLITK_CONFIGS, key=_key)
def splitk_reduce_tuned(part_o, lse, out, *, tile_d, splits, occupancy):
    """out (B, H, D) = the splits of part_o (B, H, S, D) weighed by exp2 of lse (B, H, S)
    (fl.Tensors, S >= 1)."""
    td = min(tile_d, next_pow2(part_o.shape[3]))
    sc = min(splits, next_pow2(part_o.shape[2]))
    make = kernel_of(make_splitk_reduce, part_o.dtype, lse.dtype, out.dtype)
    with out.partition((1, 1, td)) as part:
        make.options(occupancy=occupancy)(part, part_o, lse, sc)
