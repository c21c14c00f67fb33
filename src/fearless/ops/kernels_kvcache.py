"""The Tile kernel behind `fearless.ops.flash_attn_with_kvcache` (flash-attn's attention over a
KV cache, contiguous or paged), and its autotuned launch.

`make_kvcache_attention` is the flash-attention loop of ops/kernels_attention.py (online softmax
in base 2, f32 running max, sum and accumulator, the key tiles outside every row's window
skipped by `variant_bounds`), reading flash-attn's sequence-major layout in place: q and out
(B, L, H, D); the cache (B_cache, S_cache, H_kv, D), or, `paged`, (num_blocks, PAGE, H_kv, D)
with a block table (B, MB) of i32 block ids. Sequence b uses its first cache_seqlens[b] cache
positions (read from an i32 tensor inside the kernel: no host sync); its query row i sits at
position cache_seqlens[b] - L + i (bottom-right aligned, as flash-attn).

Safety (a bad table or length never reads outside the cache, nor is silent):
  - a length outside [0, capacity] (capacity S_cache, or MB * PAGE) is clamped into it, and
    block (b, 0, 0) records b with an atomic min into err[1];
  - paged, block (b, 0, 0) checks every slot the sequence uses (slots < cdiv(len, PAGE)) and
    records the smallest bad b * MB + slot (an id outside [0, num_blocks)) into err[0];
  - every key tile reads block min(max(id, 0), num_blocks - 1) (in bounds whatever the id) and,
    where the id is bad, drops its scores (-inf, by `where`, so a NaN there cannot leak) and
    zeroes its values: nothing of that block reaches the output.
Nothing at or past a sequence's length reaches the output, whatever its bits (the rows a
serving cache has not written yet): the key tile that crosses the length drops those scores by
`where` and zeroes those values (`zeroed_past`). The operator turns err into the fearless error
(ops/kvcache_attention.py). A key tile is TILE_N keys of one page (TILE_N divides PAGE).

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from .kernels_attention import (
    ATTENTION_CONFIGS,
    INV_LOG_2,
    base2_scores,
    key_scores,
    normalised,
    online_fold,
    online_start,
    online_weights,
    seen_keys,
    seq_rows,
    tile_positions,
    variant_bounds,
    zeroed_past,
)
from .kernels_rows import kernel_of, next_pow2, size_class


@tile.function
def checked_length(k, seqlens, table, err, b, x, y, PAGE, MBP, paged):
    """(length, num_blocks): sequence b's length seqlens[b] clamped into [0, capacity] (the
    cache's rows, or its table's MB * PAGE where `paged`, compile-time; num_blocks 0 where not).
    The block of the sequence whose indices x and y are 0 records a length outside that range
    (err[1]) and, paged, every slot the sequence uses whose id is outside [0, num_blocks)
    (err[0]): see the module's docstring."""
    n_blocks = 0
    if paged:  # compile-time
        n_blocks = k.shape[0]
        mb = table.shape[1]
        capacity = mb * PAGE
    else:
        capacity = k.shape[1]
    raw_len = tile.load(seqlens, (b,), (1,)).item()
    first_block = (x == 0) & (y == 0)
    bad_len = (raw_len < 0) | (raw_len > capacity)
    if first_block & bad_len:
        tile.atomic_min(err, 1, b)
    s_len = min(max(raw_len, 0), capacity)
    if paged:  # noqa: SIM102  (compile-time: check every slot the sequence uses, once per sequence)
        if first_block:
            slots = tile.arange(MBP)
            ids = tile.gather(table, (b, slots), mask=slots < mb, padding=0)
            used = slots < tile.cdiv(s_len, PAGE)
            bad = used & ((ids < 0) | (ids >= n_blocks))
            tile.atomic_min(err, slots * 0, b * mb + slots, mask=bad)
    return s_len, n_blocks


@tile.function
def page_of(table, b, j, per_page, n_blocks):
    """(block, tile within it, whether the id is good) of sequence b's key tile j in a paged
    cache: tile j % per_page of slot j // per_page's block, the id clamped into [0, n_blocks)
    (in bounds whatever the table says)."""
    raw = tile.load(table, (b, j // per_page), (1, 1)).item()
    ok = (raw >= 0) & (raw < n_blocks)
    return min(max(raw, 0), n_blocks - 1), j % per_page, ok


def make_kvcache_attention(dt, paged, causal, left, right, capped, **hints):
    """softmax(cap(Q K^T * scale), masked) V over sequence b's first seqlens[b] cache entries:
    q, out (B, L, H, D); k, v the cache; `paged` (compile-time): through `table`; causal, left,
    right, capped (compile-time): the diagonal, the window's bounds WL / WR and the soft cap
    CAP (run-time) apply. err (2,) i32: see the module's docstring."""

    @tile.function
    def attend(out, q, k, v, seqlens, table, err, scale, wl, wr, cap, TILE_N, GROUP, PAGE, MBP):
        _, TILE_M, _, TILE_D = out.shape
        b, i, h, _ = out.index
        kv_h = h // GROUP
        s_len, n_blocks = checked_length(k, seqlens, table, err, b, i, h, PAGE, MBP, paged)
        off = s_len - q.shape[1]  # bottom-right: row r sits at s_len - L + r
        qk_scale = scale * INV_LOG_2
        m_i, l_i, acc = online_start(TILE_M, TILE_D, False)
        qt = seq_rows(q, b, i, h, TILE_M, TILE_D)
        rows, cols = tile_positions(i, TILE_M, TILE_N)
        first, tiles, clean_from, mask_from = variant_bounds(
            i, s_len, off, wl, wr, TILE_M, TILE_N, causal, left, right
        )
        per_page = PAGE // TILE_N
        for j in range(first, tiles):
            if paged:  # compile-time
                blk, jt, ok = page_of(table, b, j, per_page, n_blocks)
            else:
                blk = b
                jt = j
            qk = key_scores(qt, k, blk, kv_h, jt, TILE_M, TILE_N, TILE_D, True)
            qk = base2_scores(qk, scale, qk_scale, cap, capped)
            vt = tile.load(v, (blk, jt, kv_h, 0), (1, TILE_N, 1, TILE_D), latency=4)
            vt = vt.reshape((TILE_N, TILE_D))
            if paged:  # compile-time
                edge = (j >= mask_from) or (j < clean_from) or (not ok)
            else:
                edge = (j >= mask_from) or (j < clean_from)
            if edge:
                pos = rows + off
                keys = j * TILE_N + cols
                keep = keys < s_len
                if paged:  # compile-time: a bad block's keys are all dropped
                    keep = keep & ok
                keep = seen_keys(keep, pos, keys, wl, wr, causal, left, right)
                qk = tile.where(keep, qk, -math.inf)
            # the rows past the length in the tile that crosses it (never written, in serving:
            # any bits): p = 0 there, but 0 * NaN is NaN in P V
            vt = zeroed_past(vt, j * TILE_N, s_len, TILE_N, False)
            if paged:  # compile-time: a bad block's values never reach the accumulator
                vt = tile.where(ok, vt, tile.zeros((TILE_N, TILE_D), dt))
            m_ij, p, alpha = online_weights(qk, m_i, -1, True)  # guarded: no key yet
            acc, l_i = online_fold(p, alpha, l_i, acc, vt, dt, False)
            m_i = m_ij
        acc = normalised(acc, l_i, True)  # a row that sees no key is 0 (flash-attn's)
        out.store(acc.reshape((1, TILE_M, 1, TILE_D)).astype(dt))

    # one kernel for both forms: the contiguous one passes None for the table (compiled away)
    # and 1 for PAGE and MBP
    @tile.kernel(**hints)
    def kvcache_attention(
        out: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        seqlens: tile.Tensor[fl.i32],
        table: tile.Tensor[fl.i32] | None,
        err: tile.Atomic[fl.i32],
        scale: fl.f32,
        wl: fl.i32,
        wr: fl.i32,
        cap: fl.f32,
        TILE_N: tile.Const[int],
        GROUP: tile.Const[int],
        PAGE: tile.Const[int],
        MBP: tile.Const[int],
    ):
        attend(out, q, k, v, seqlens, table, err, scale, wl, wr, cap, TILE_N, GROUP, PAGE, MBP)

    return kvcache_attention


def page_tile(page, tile_n):
    """The keys of a tile in a cache of pages of `page` rows: the largest power of two that
    divides `page`, at most `tile_n`."""
    return min(page & -page, tile_n)


def table_tile(mb):
    """The slots block (b, 0, 0) checks in one tile: MB rounded up to a power of two, at least
    256 (tileiras refused this kernel's gather and atomic over 16 to 128 slots, exit 5 with no
    detail; 256 and more compile)."""
    return max(next_pow2(mb), 256)


def cache_rows(k, table):
    """(page size, None where contiguous; the positions a sequence may use: S_cache, or the
    table's MB * PAGE) of the cache k and its `table` (None: contiguous)."""
    if table is None:
        return None, k.shape[1]
    return k.shape[1], table.shape[1] * k.shape[1]


def _kvcache_key(q, k, v, seqlens, table, err, out, scale, group, flags, *_, **__):
    """Batch x heads, L and the cache's rows by size class, D, the grouping, the flags and the
    page size (None: contiguous)."""
    b, lq, h, d = q.shape
    page, rows = cache_rows(k, table)
    return size_class(b * h), size_class(lq), size_class(rows), d, group, flags, page


@fl.autotune(configs=ATTENTION_CONFIGS, key=_kvcache_key)
def kvcache_attention_tuned(
    q, k, v, seqlens, table, err, out, scale, group, flags, wl, wr, cap, *, tile_m, tile_n,
    occupancy, num_worker_warps,
):  # fmt: skip
    """out (B, L, H, D) = attention of q (B, L, H, D) over the cache k, v (fl.Tensors), `table`
    None (contiguous) or the (B, MB) block table; flags (causal, left, right, capped)."""
    paged = table is not None
    make = kernel_of(make_kvcache_attention, q.dtype, paged, *flags)
    kernel = make.options(occupancy=occupancy, num_worker_warps=num_worker_warps)
    with out.partition((1, tile_m, 1, next_pow2(q.shape[3]))) as part:
        page = mbp = 1
        if paged:
            page = k.shape[1]
            tile_n = page_tile(page, tile_n)
            mbp = table_tile(table.shape[1])
        kernel(part, q, k, v, seqlens, table, err, scale, wl, wr, cap, tile_n, group, page, mbp)
