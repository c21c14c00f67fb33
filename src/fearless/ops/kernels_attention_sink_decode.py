"""The split-KV Tile kernels behind `fearless.ops.attention_sink_decode` (GPT-OSS's one-token
decode with a learned sink logit per query head), and their launches: autotuned over the key
splits and tiles (`sink_decode_tuned`, the no-split form among them), or with TileGym's
kv_len_per_split pinned (`sink_decode_pinned`).

They are the split-KV decode of ops/kernels_attention_decode.py (`decode_keys`' keys-major loop in
its `seq_major` form, its split sizing `decode_splits`) in TileGym's sequence-major layout:
block (b, kv_h[, split]) takes the GROUP query heads of KV head kv_h as one (QG, D) tile (q
viewed as (B, H_kv, GROUP, D), QG = GROUP rounded up to a power of two, at least 8) and walks
key tiles of k, v (B, S, H_kv, D). The query sits at START (read inside the kernels from a one-element i32 tensor: it may live
on the GPU) and sees the keys LO..HI - 1, HI = min(S, START + 1) and, with a window, LO =
max(0, START - WL) (else 0). The key tiles are counted from LO's tile (so a windowed decode
walks at most cdiv(WL + TILE_N, TILE_N) tiles, which the launch sizes its splits on); a split
whose tiles lie past HI's does no work and stores a zero output with lse -inf.

The sink joins once, in the merge: the one-split kernel folds exp2(sink - max) into its
denominator after the loop, and with several splits each split stores its output normalised by
its own sum and its log2-sum-exp, and the combine starts its running max and total at the sink
(weight 1 against itself, nothing to the output) before folding the splits in with
`lse_fold` (ops/kernels_attention_splitk.py). A query that sees no key gives 0 (its weight is
all on the sink), also where the sink is -inf (no sinks).

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from .kernels_attention import INV_LOG_2
from .kernels_attention_decode import (
    DECODE_CONFIGS,
    decode_cfg,
    decode_keys,
    decode_splits,
    decode_store,
    split_combine_launch,
    split_store,
)
from .kernels_attention_splitk import lse_fold
from .kernels_rows import kernel_of, next_pow2, size_class


@tile.function
def sink_key_range(start, s_len, wl, TILE_N, windowed):
    """(first tile, end tile, LO, HI) of the keys LO..HI - 1 the query at start[0] sees:
    HI = min(S, START + 1), LO = max(0, START - WL) when `windowed` (compile-time), else 0; the
    tiles first..end - 1 hold them, each one of them at least (end <= first when it sees
    none). Written so that no step leaves 32 bits for any START and WL >= 0."""
    off = tile.load(start, (0,), (1,)).item()
    hi = max(0, min(s_len - 1, off) + 1)
    lo = 0
    first = 0
    end = tile.cdiv(hi, TILE_N)
    if windowed:
        lo = max(off, wl) - wl
        first = lo // TILE_N
        if lo >= hi:  # START past the keys by more than the window: none (none of LO's tile)
            end = first
    return first, end, lo, hi


@tile.function
def sink_row(sinks, kv_h, QG):
    """The sink logits of KV head kv_h's query heads, in base 2: a (1, QG) f32 row of sinks
    viewed as (H_kv, GROUP), the padded heads -inf."""
    s = tile.load(sinks, (kv_h, 0), (1, QG), padding=-math.inf)
    return s.astype(fl.f32) * INV_LOG_2


def make_sink_decode_one(dt, sdt, windowed, **hints):
    """One split: block (b, kv_h) walks every key tile the query sees and stores its heads'
    output, the sink folded into the denominator after the loop. `windowed`: compile-time."""

    @tile.kernel(**hints)
    def sink_decode_one(
        out: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        sinks: tile.Tensor[sdt],
        start: tile.Tensor[fl.i32],
        scale: fl.f32,
        wl: fl.i32,
        TILE_N: tile.Const[int],
    ):
        _, _, QG, TILE_D = out.shape
        b, kv_h, _, _ = out.index
        first, end, lo, hi = sink_key_range(start, k.shape[1], wl, TILE_N, windowed)
        acc, m_i, l_i = decode_keys(
            q, k, v, b, kv_h, first, max(0, end - first), QG, TILE_N, TILE_D, scale * INV_LOG_2,
            dt, lo, None, False, False, hi, True,
        )  # fmt: skip
        sink = sink_row(sinks, kv_h, QG)
        m = max(m_i, sink)
        m_ref = tile.where(m == -math.inf, 0.0, m)  # no key and a -inf sink
        alpha = tile.exp2(m_i - m_ref, flush_to_zero=True)
        z = l_i * alpha + tile.exp2(sink - m_ref, flush_to_zero=True)  # the sink's share
        decode_store(out, acc * alpha, z, QG, TILE_D, dt, True)  # 0: no key and a -inf sink

    return sink_decode_one


def make_sink_decode_split(dt, windowed, **hints):
    """The split kernel: block (b, kv_h, split) walks its SPLIT_TILES key tiles from the first
    the query sees (fewer, or none, past the last) and stores its partial output (normalised by
    its own sum; 0 when it saw no key) and log2-sum-exp (-inf then). No sink here."""

    @tile.kernel(**hints)
    def sink_decode_split(
        part_o: tile.Part[fl.f32],
        part_lse: tile.Part[fl.f32],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        start: tile.Tensor[fl.i32],
        scale: fl.f32,
        wl: fl.i32,
        TILE_N: tile.Const[int],
        SPLIT_TILES: tile.Const[int],
    ):
        _, _, _, QG, TILE_D = part_o.shape
        b, kv_h, sp, _, _ = part_o.index
        first, end, lo, hi = sink_key_range(start, k.shape[1], wl, TILE_N, windowed)
        t0 = first + sp * SPLIT_TILES
        tiles = max(0, min(SPLIT_TILES, end - t0))
        acc, m_i, l_i = decode_keys(
            q, k, v, b, kv_h, t0, tiles, QG, TILE_N, TILE_D, scale * INV_LOG_2, dt, lo, None,
            False, False, hi, True,
        )  # fmt: skip
        split_store(part_o, part_lse, acc, m_i, l_i, QG, TILE_D, True)  # 0 and -inf: no key

    return sink_decode_split


def make_sink_decode_combine(dt, sdt, **hints):
    """out = the splits' partial outputs weighed by exp2(lse - max) over their total plus the
    sink's exp2(sink - max): block (b, kv_h) starts the running max at its heads' sinks (total
    1, or 0 for a -inf sink) and folds the splits in SC at a time (the splits past the last
    load with lse -inf and weigh nothing); 0 where the total stays 0."""

    @tile.kernel(**hints)
    def sink_decode_combine(
        out: tile.Part[dt],
        part_o: tile.Tensor[fl.f32],
        part_lse: tile.Tensor[fl.f32],
        sinks: tile.Tensor[sdt],
        SC: tile.Const[int],
    ):
        _, _, QG, TILE_D = out.shape
        b, kv_h, _, _ = out.index
        m = sink_row(sinks, kv_h, QG).reshape((1, QG, 1))
        total = tile.exp2(m - tile.where(m == -math.inf, 0.0, m))  # the sink's weight: 1 or 0
        acc = tile.zeros((1, QG, TILE_D), fl.f32)
        for c in range(tile.cdiv(part_o.shape[2], SC)):
            o = tile.load(part_o, (b, kv_h, c, 0, 0), (1, 1, SC, QG, TILE_D), latency=2)
            ls = tile.load(part_lse, (b, kv_h, c, 0, 0), (1, 1, SC, QG, 1), padding=-math.inf)
            o, ls = o.reshape((SC, QG, TILE_D)), ls.reshape((SC, QG, 1))
            acc, total, m = lse_fold(o, ls, m, acc, total, True)
        y = tile.where(total == 0.0, 0.0, acc / total)
        out.store(y.astype(dt).reshape((1, 1, QG, TILE_D)))

    return sink_decode_combine


def sink_reach(s_len, wl, tile_n):
    """The most keys, from the first key tile the query sees, its tiles can span: S, or with a
    window (WL keys before the query's) WL + TILE_N."""
    return s_len if wl is None else min(s_len, wl + tile_n)


# the plain decode's configurations (waves: the key splits aim at waves x SMs blocks, one split
# where B * H_kv heads already fill them), then waves 0: the no-split form, one kernel (a short
# context or a window of GPT-OSS's 128)
SINK_DECODE_CONFIGS = [*DECODE_CONFIGS, decode_cfg(128, 2, 0), decode_cfg(64, 4, 0)]


def _sink_decode_key(q, k, v, sinks, start, out, scale, wl, *_, **__):
    """Batch x KV heads, the grouping, the keys a query may see by size class (S, or the
    window's), D, whether windowed and the sinks' dtype."""
    b, hk, group, d = q.shape
    seen = k.shape[1] if wl is None else min(k.shape[1], wl + 1)
    return size_class(b * hk), group, size_class(seen), d, wl is not None, sinks.dtype.name


@fl.autotune(configs=SINK_DECODE_CONFIGS, key=_sink_decode_key)
def sink_decode_tuned(q, k, v, sinks, start, out, scale, wl, sm_count, *, tile_n, occupancy,
                      waves):  # fmt: skip
    """out (B, H_kv, GROUP, D) = the decode with sinks of q (B, H_kv, GROUP, D) over k, v
    (B, S, H_kv, D), sinks (H_kv, GROUP) (fl.Tensors), the query at start[0]; `wl` None (no
    window) or the keys it sees before its own position; split across blocks."""
    b, hk, _, _ = q.shape
    reach = sink_reach(k.shape[1], wl, tile_n)
    splits, split_tiles = decode_splits(b, hk, reach, tile_n, waves * sm_count)
    sink_decode_launch(q, k, v, sinks, start, out, scale, wl, tile_n, occupancy, splits,
                       split_tiles)  # fmt: skip


def sink_decode_pinned(q, k, v, sinks, start, out, scale, wl, split_len):
    """`sink_decode_tuned` with `split_len` keys per split (TileGym's kv_len_per_split, a power
    of two; below 16 it takes 16), the split pinned instead of tuned."""
    tile_n = max(16, min(128, split_len))
    split_tiles = max(1, split_len // tile_n)
    splits = -(-sink_reach(k.shape[1], wl, tile_n) // (tile_n * split_tiles))
    sink_decode_launch(q, k, v, sinks, start, out, scale, wl, tile_n, 2, splits, split_tiles)


def sink_decode_launch(q, k, v, sinks, start, out, scale, wl, tile_n, occupancy, splits,
                       split_tiles):  # fmt: skip
    """The decode's launches: the one-split kernel where `splits` is 1, else the split kernel
    (`splits` blocks per KV head of `split_tiles` key tiles of `tile_n`) and the combine."""
    b, hk, group, d = q.shape
    qg, td = max(8, next_pow2(group)), next_pow2(d)
    windowed = wl is not None
    wl = wl or 0
    if splits <= 1:
        make = kernel_of(make_sink_decode_one, q.dtype, sinks.dtype, windowed)
        with out.partition((1, 1, qg, td)) as out_p:
            make.options(occupancy=occupancy)(out_p, q, k, v, sinks, start, scale, wl, tile_n)
        return
    split = kernel_of(make_sink_decode_split, q.dtype, windowed).options(occupancy=occupancy)
    combine = kernel_of(make_sink_decode_combine, q.dtype, sinks.dtype)

    def combine_splits(part_o, part_lse):
        with out.partition((1, 1, qg, td)) as out_p:
            combine(out_p, part_o, part_lse, sinks, min(8, next_pow2(splits)))

    # the split and the combine compile side by side the first time (as split_kv_launch's)
    form = (q.dtype, sinks.dtype, windowed, occupancy, size_class(b), hk, group, d, tile_n)
    key = ("sink_decode", *form, size_class(splits), split_tiles)
    split_args = (q, k, v, start, scale, wl, tile_n, split_tiles)
    split_combine_launch(out, (b, hk, splits, group, d), (1, 1, 1, qg, td), split, split_args,
                         combine_splits, key)  # fmt: skip
