"""The split-KV decode form of `fearless.ops.flash_attn_with_kvcache`: one new query per
sequence (L = 1, a serving loop's decode step), and its autotuned launch `kvcache_decode_tuned`.

The general kernel (ops/kernels_kvcache.py) gives each (sequence, query head) one block that
walks the whole cache: at one query that is B * H blocks of one useful row each, every KV head
read GROUP times, and a long cache walked by a few hundred blocks (0.22 of torch's SDPA at
8 x 32 heads over 2048 to 16384 keys on the H100, session 35). This form is the split-KV
decode of ops/kernels_attention_decode.py (TileGym's flash_decode) in the cache's layout: block
(b, kv_h[, split]) takes the GROUP query heads of KV head kv_h as one (QG, D) tile (q viewed as
(B, H_kv, GROUP, D), QG = GROUP rounded up to a power of two, at least 8), puts the keys on the
tensor cores' M axis (`decode_keys`' keys-major loop) and walks its split's key tiles of k, v
(B_cache, S_cache, H_kv, D), or paged (num_blocks, PAGE, H_kv, D) through the block table.

The query sits at position LEN - 1 (LEN = cache_seqlens[b], read in the kernel), so it sees the
keys LO..LEN - 1: LO = max(0, LEN - 1 - WL) with a left window, else 0 (causal and a right
window change nothing for the last position). Tiles are counted from LO's; a split whose tiles
lie past LEN's stores a zero output and lse -inf, and the combine
(`make_decode_combine(guarded=True)`) gives 0 to a head that saw no key (LEN = 0), as
flash-attn. The soft cap, the clamped lengths and table ids, the dropped scores and zeroed
values of a bad block or of the rows past LEN, and the error words are the general kernel's
(`checked_length`, `page_of`): the block (b, 0[, 0]) records a bad length or slot.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from .kernels_attention import (
    INV_LOG_2,
    base2_scores,
    head_rows,
    online_fold,
    online_start,
    online_weights,
    seq_rows,
    zeroed_past,
)
from .kernels_attention_decode import (
    DECODE_CONFIGS,
    decode_cfg,
    decode_splits,
    decode_store,
    split_kv_launch,
    split_store,
)
from .kernels_kvcache import cache_rows, checked_length, page_of, page_tile, table_tile
from .kernels_rows import size_class


@tile.function
def cache_keys(q, k, v, table, b, kv_h, s_len, lo, t0, tiles, n_blocks, scale, cap, QG, TILE_N,
               TILE_D, PAGE, dt, paged, capped):  # fmt: skip
    """(acc (D, QG), m (1, QG), l (1, QG)) of key tiles t0.. t0 + tiles - 1 of sequence b,
    keys-major (the scores K_j Q^T, the accumulator V_j^T P): the keys outside LO..s_len - 1
    and, `paged`, those of a block whose id is bad get -inf and zeroed values. A tile may hold
    no key the query sees (a bad block): guarded, such a row takes nothing."""
    q_t = tile.transpose(head_rows(q, b, kv_h, 0, QG, TILE_D))  # (D, QG)
    m_i, l_i, acc = online_start(QG, TILE_D, True)
    keys = tile.arange(TILE_N)[:, None]
    per_page = PAGE // TILE_N
    for jj in range(tiles):
        j = t0 + jj
        if paged:  # compile-time
            blk, jt, ok = page_of(table, b, j, per_page, n_blocks)
        else:
            blk, jt, ok = b, j, True
        kt = seq_rows(k, blk, jt, kv_h, TILE_N, TILE_D)
        s = base2_scores(tile.mma(kt, q_t, tile.zeros((TILE_N, QG), fl.f32)), scale,
                         scale * INV_LOG_2, cap, capped)  # fmt: skip
        pos = j * TILE_N + keys
        keep = (pos < s_len) & (pos >= lo)
        vt = zeroed_past(seq_rows(v, blk, jt, kv_h, TILE_N, TILE_D), j * TILE_N, s_len, TILE_N,
                         False)  # fmt: skip
        if paged:  # compile-time: a bad block's keys and values never reach the output
            keep = keep & ok
            vt = tile.where(ok, vt, tile.zeros((TILE_N, TILE_D), dt))
        m_ij, p, alpha = online_weights(tile.where(keep, s, -math.inf), m_i, 0, True)
        acc, l_i = online_fold(p, alpha, l_i, acc, vt, dt, True)
        m_i = m_ij
    return acc, m_i, l_i


@tile.function
def key_range(s_len, wl, TILE_N, left):
    """(first tile, end tile, LO) of the keys LO..s_len - 1 the last position sees: LO =
    max(0, s_len - 1 - WL) with a left window (`left`, compile-time), else 0."""
    lo = 0
    if left:  # compile-time
        lo = max(s_len - 1, wl) - wl
    return lo // TILE_N, tile.cdiv(s_len, TILE_N), lo


def make_kvcache_decode_one(dt, paged, left, capped, **hints):
    """One split: block (b, kv_h) walks every key tile its query heads see and stores their
    output (0 for a head that saw none). Flags compile-time, as `make_kvcache_attention`'s."""

    @tile.kernel(**hints)
    def kvcache_decode_one(
        out: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        seqlens: tile.Tensor[fl.i32],
        table: tile.Tensor[fl.i32] | None,
        err: tile.Atomic[fl.i32],
        scale: fl.f32,
        wl: fl.i32,
        cap: fl.f32,
        TILE_N: tile.Const[int],
        PAGE: tile.Const[int],
        MBP: tile.Const[int],
    ):
        _, _, QG, TILE_D = out.shape
        b, kv_h, _, _ = out.index
        s_len, n_blocks = checked_length(k, seqlens, table, err, b, kv_h, 0, PAGE, MBP, paged)
        first, end, lo = key_range(s_len, wl, TILE_N, left)
        acc, _, l_i = cache_keys(
            q, k, v, table, b, kv_h, s_len, lo, first, max(0, end - first), n_blocks, scale, cap,
            QG, TILE_N, TILE_D, PAGE, dt, paged, capped,
        )  # fmt: skip
        decode_store(out, acc, l_i, QG, TILE_D, dt, True)  # 0: no key

    return kvcache_decode_one


def make_kvcache_decode_split(dt, paged, left, capped, **hints):
    """The split kernel: block (b, kv_h, split) walks its SPLIT_TILES key tiles from the first
    the query sees (fewer, or none, past the last) and stores its partial output (normalised by
    its own sum; 0 when it saw no key) and log2-sum-exp (-inf then)."""

    @tile.kernel(**hints)
    def kvcache_decode_split(
        part_o: tile.Part[fl.f32],
        part_lse: tile.Part[fl.f32],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        seqlens: tile.Tensor[fl.i32],
        table: tile.Tensor[fl.i32] | None,
        err: tile.Atomic[fl.i32],
        scale: fl.f32,
        wl: fl.i32,
        cap: fl.f32,
        TILE_N: tile.Const[int],
        PAGE: tile.Const[int],
        MBP: tile.Const[int],
        SPLIT_TILES: tile.Const[int],
    ):
        _, _, _, QG, TILE_D = part_o.shape
        b, kv_h, sp, _, _ = part_o.index
        s_len, n_blocks = checked_length(k, seqlens, table, err, b, kv_h, sp, PAGE, MBP, paged)
        first, end, lo = key_range(s_len, wl, TILE_N, left)
        t0 = first + sp * SPLIT_TILES
        acc, m_i, l_i = cache_keys(
            q, k, v, table, b, kv_h, s_len, lo, t0, max(0, min(SPLIT_TILES, end - t0)),
            n_blocks, scale, cap, QG, TILE_N, TILE_D, PAGE, dt, paged, capped,
        )  # fmt: skip
        split_store(part_o, part_lse, acc, m_i, l_i, QG, TILE_D, True)  # 0 and -inf: no key

    return kvcache_decode_split


# the plain decode's configurations (waves: the key splits aim at waves x SMs blocks, one split
# where B * H_kv heads already fill them) and waves 0, the no-split form, second and third: it
# wins on short caches (H100, 8 x 32 heads over 8 KV heads, 2048 keys: 0.034 ms against 0.082 at
# best split, the combine's launch included; bench/results/h100-2026-12-07-session35), and the
# tuner's first-call budget left it uncompiled at the end of the list
KVCACHE_DECODE_CONFIGS = [
    DECODE_CONFIGS[0],
    decode_cfg(128, 2, 0),
    decode_cfg(64, 4, 0),
    *DECODE_CONFIGS[1:],
]


def _decode_key(q, k, v, seqlens, table, err, out, scale, flags, wl, *_, **__):
    """Batch x KV heads, the grouping, the keys a query may see by size class (the cache's
    capacity, or the window's), D, the flags and the page size (None: contiguous)."""
    b, hk, group, d = q.shape
    page, capacity = cache_rows(k, table)
    seen = capacity if not flags[0] else min(capacity, wl + 1)
    return size_class(b * hk), group, size_class(seen), d, flags, page


@fl.autotune(configs=KVCACHE_DECODE_CONFIGS, key=_decode_key)
def kvcache_decode_tuned(q, k, v, seqlens, table, err, out, scale, flags, wl, cap, sm_count, *,
                         tile_n, occupancy, waves):  # fmt: skip
    """out (B, H_kv, GROUP, D) = the decode of q (B, H_kv, GROUP, D) over the cache k, v
    (fl.Tensors), `table` None (contiguous) or the (B, MB) block table; flags (left, capped),
    `wl` the left window (read where left), `cap` the soft cap (where capped)."""
    b, hk, _, _ = q.shape
    page, capacity = cache_rows(k, table)
    mbp = 1
    if page is not None:
        tile_n = page_tile(page, tile_n)
        mbp = table_tile(table.shape[1])
    reach = capacity if not flags[0] else min(capacity, wl + tile_n)
    splits, split_tiles = decode_splits(b, hk, reach, tile_n, waves * sm_count)
    args = (q, k, v, seqlens, table, err, scale, wl, cap, tile_n, page or 1, mbp)
    split_kv_launch(q, out, make_kvcache_decode_one, make_kvcache_decode_split,
                    (q.dtype, page is not None, *flags), args, occupancy, splits, split_tiles,
                    guarded=True)  # fmt: skip
