"""The split-KV decode kernels: one query per head (L = 1, no mask), their tuned launch
`attention_decode`, and the split and combine launches (`split_kv_launch`,
`split_combine_launch`) that the other decodes (Gemma's, the sink decode's, MLA's) share, as
the keys-major decodes share its output stores (`decode_store`, `split_store`).

They build on the flash-attention helpers of ops/kernels_attention.py (the online softmax,
`head_rows`, `kv_rows`, `normalised`).

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from ..autotune_ahead import compile_ahead_once
from ._io import empty_beside
from .kernels_attention import (
    INV_LOG_2,
    head_rows,
    kv_rows,
    normalised,
    online_fold,
    online_start,
    online_weights,
)
from .kernels_rows import kernel_of, next_pow2, size_class

# --------------------------------------------------------------------------------- decode
#
# One query per head (L = 1, no mask): TileGym's flash_decode, split-KV. Block (b, kv_h, split)
# takes the GROUP query heads that share KV head kv_h as one (QG, D) tile (QG = GROUP rounded
# up to a power of two, at least 8: the padded rows load as zeros and are dropped at the store)
# and walks its split's keys. With one split the block stores the output itself; with more it
# stores its partial output (normalised) and log2-sum-exp, and a second kernel combines the
# splits per head.


@tile.function
def decode_keys(
    q, k, v, b, kv_h, first, tiles, QG, TILE_N, TILE_D, qk_scale, dt, lo, cap, windowed, capped,
    hi=None, seq_major=False,
):  # fmt: skip
    """(acc (D, QG), m (1, QG), l (1, QG)) of key tiles first.. first + tiles - 1, keys-major:
    the scores of a key tile are K_j (TILE_N, D) @ Q^T (D, QG) and the accumulator
    V_j^T (D, TILE_N) @ P (TILE_N, QG), so the tensor cores' M axis holds the keys and the few
    query rows go on N (queries on M gave an 8-row MMA and a twentieth of torch's speed).
    Gemma's decode (kernels_attention_gemma.py; compile-time flags, both False elsewhere):
    `windowed` drops the keys before LO; `capped` takes scores CAP * tanh(S * qk_scale), where
    the caller passes qk_scale = scale / its cap and CAP = its cap / ln 2 (base 2). The sink
    decode's (kernels_attention_sink_decode.py), `seq_major` (compile-time; `windowed` and
    `capped` False): k, v are (B, S, H_kv, D) and the keys outside LO..HI - 1 are masked, every
    tile walked holding a key the query sees (the running max is finite after the first, no
    guard; with no tile, m is -inf and l 0)."""
    s_len = k.shape[2]
    q_t = tile.transpose(head_rows(q, b, kv_h, 0, QG, TILE_D))  # (D, QG)
    m_i, l_i, acc = online_start(QG, TILE_D, True)
    keys = tile.arange(TILE_N)[:, None]
    for jj in range(tiles):
        j = first + jj
        kt = kv_rows(k, b, kv_h, j, TILE_N, TILE_D, seq_major)
        s = tile.mma(kt, q_t, tile.zeros((TILE_N, QG), fl.f32))
        if seq_major:  # compile-time: the sink decode's keys LO..HI - 1
            pos = j * TILE_N + keys
            s = tile.where((pos < hi) & (pos >= lo), s * qk_scale, -math.inf)
        elif windowed or capped:  # compile-time: Gemma's decode
            keep = j * TILE_N + keys < s_len
            if windowed:
                keep = keep & (j * TILE_N + keys >= lo)
            if capped:  # noqa: SIM108
                s = tile.tanh(s * qk_scale) * cap
            else:
                s = s * qk_scale
            s = tile.where(keep, s, -math.inf)
        else:
            s = tile.where(j * TILE_N + keys < s_len, s * qk_scale, -math.inf)
        m_ij, p, alpha = online_weights(s, m_i, 0, False)
        vt = kv_rows(v, b, kv_h, j, TILE_N, TILE_D, seq_major)
        acc, l_i = online_fold(p, alpha, l_i, acc, vt, dt, True)
        m_i = m_ij
    return acc, m_i, l_i


@tile.function
def decode_rows(acc, l_i, guarded):
    """The (heads, D) output rows of a keys-major accumulator `acc` (D, heads) over its sum
    `l_i` (1, heads); `guarded` (compile-time): a head may have seen no key (sum 0), its row
    then 0."""
    if guarded:  # noqa: SIM108
        o = tile.transpose(normalised(acc, l_i, True))
    else:
        o = tile.transpose(acc / l_i)
    return o


@tile.function
def decode_store(out, acc, l_i, QG, TILE_D, dt, guarded):
    """A one-split decode's output, `decode_rows` (`guarded` as there), stored in `dt` as out's
    (1, 1, QG, TILE_D) tile."""
    out.store(decode_rows(acc, l_i, guarded).astype(dt).reshape((1, 1, QG, TILE_D)))


@tile.function
def split_store(part_o, part_lse, acc, m_i, l_i, QG, TILE_D, guarded):
    """A split's partial output, the keys-major accumulator `acc` (D, QG) normalised by its own
    sum `l_i`, and its log2-sum-exp m_i + log2(l_i), stored as part_o's (1, 1, 1, QG, TILE_D)
    and part_lse's (1, 1, 1, QG, 1) tiles (f32); `guarded` (compile-time): a split may see no
    key (sum 0), its output then 0 and its lse -inf."""
    part_o.store(decode_rows(acc, l_i, guarded).reshape((1, 1, 1, QG, TILE_D)))
    if guarded:
        lse = tile.where(l_i == 0.0, -math.inf, m_i + tile.log2(l_i))
    else:
        lse = m_i + tile.log2(l_i)
    part_lse.store(lse.reshape((1, 1, 1, QG, 1)))


def make_decode_one(dt, **hints):
    """Decode with one split: block (b, kv_h) walks every key and stores its heads' output."""

    @tile.kernel(**hints)
    def decode_one(
        out: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        scale: fl.f32,
        TILE_N: tile.Const[int],
    ):
        _, _, QG, TILE_D = out.shape
        b, kv_h, _, _ = out.index
        tiles = tile.cdiv(k.shape[2], TILE_N)
        acc, _, l_i = decode_keys(
            q, k, v, b, kv_h, 0, tiles, QG, TILE_N, TILE_D, scale * INV_LOG_2, dt, None, None,
            False, False,
        )  # fmt: skip
        decode_store(out, acc, l_i, QG, TILE_D, dt, False)

    return decode_one


def make_decode_split(dt, **hints):
    """The split kernel: block (b, kv_h, split) walks SPLIT_TILES key tiles and stores its
    partial output and log2-sum-exp."""

    @tile.kernel(**hints)
    def decode_split(
        part_o: tile.Part[fl.f32],
        part_lse: tile.Part[fl.f32],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        scale: fl.f32,
        TILE_N: tile.Const[int],
        SPLIT_TILES: tile.Const[int],
    ):
        _, _, _, QG, TILE_D = part_o.shape
        b, kv_h, sp, _, _ = part_o.index
        acc, m_i, l_i = decode_keys(
            q,
            k,
            v,
            b,
            kv_h,
            sp * SPLIT_TILES,
            SPLIT_TILES,
            QG,
            TILE_N,
            TILE_D,
            scale * INV_LOG_2,
            dt,
            None,
            None,
            False,
            False,
        )
        split_store(part_o, part_lse, acc, m_i, l_i, QG, TILE_D, False)

    return decode_split


def make_decode_combine(dt, guarded=False, **hints):
    """out = the splits' partial outputs weighted by their sums: block (b, kv_h) loads every
    split at once as one (SPLITS, QG, D) tile (SPLITS a power of two: the splits past the last
    load with lse -inf and weigh nothing) and reduces it over the splits; a loop over the
    splits would wait on one load at a time, with only B * H_kv blocks to hide it. `guarded`
    (compile-time): every split of a head may have seen no key (lse -inf), its output then 0."""

    @tile.kernel(**hints)
    def decode_combine(
        out: tile.Part[dt],
        part_o: tile.Tensor[fl.f32],
        part_lse: tile.Tensor[fl.f32],
        SPLITS: tile.Const[int],
    ):
        _, _, QG, TILE_D = out.shape
        b, kv_h, _, _ = out.index
        o = tile.load(part_o, (b, kv_h, 0, 0, 0), (1, 1, SPLITS, QG, TILE_D))
        lse = tile.load(part_lse, (b, kv_h, 0, 0, 0), (1, 1, SPLITS, QG, 1), padding=-math.inf)
        o, lse = o.reshape((SPLITS, QG, TILE_D)), lse.reshape((SPLITS, QG, 1))
        m = tile.max(lse, axis=0, keepdims=True)
        if guarded:  # compile-time: no finite lse leaves the max -inf, weighed against 0
            m = tile.where(m == -math.inf, 0.0, m)
        w = tile.exp2(lse - m)
        if guarded:  # compile-time
            total = tile.sum(w, axis=0)
            acc = tile.where(total == 0.0, 0.0, tile.sum(o * w, axis=0) / total)
        else:
            acc = tile.sum(o * w, axis=0) / tile.sum(w, axis=0)
        out.store(acc.astype(dt).reshape((1, 1, QG, TILE_D)))

    return decode_combine


def decode_splits(b, hk, s_len, tile_n, blocks):
    """(splits, key tiles per split) that give about `blocks` blocks over b * hk heads."""
    splits = max(1, blocks // (b * hk))
    split_len = max(tile_n, next_pow2(-(-s_len // splits)))
    return -(-s_len // split_len), split_len // tile_n


def decode_cfg(tile_n, occupancy, waves):
    return dict(tile_n=tile_n, occupancy=occupancy, waves=waves)


# waves: the key splits aim at waves x SMs blocks (one split when B * H_kv heads already fill
# that many).
DECODE_CONFIGS = [
    decode_cfg(128, 2, 1),
    decode_cfg(128, 1, 1),
    decode_cfg(64, 2, 2),
    decode_cfg(128, 2, 2),
    decode_cfg(64, 4, 4),
]


def _decode_key(q, k, *_, **__):
    b, hk, group, d = q.shape
    return size_class(b * hk), group, size_class(k.shape[2]), d


@fl.autotune(configs=DECODE_CONFIGS, key=_decode_key)
def attention_decode(q, k, v, out, scale, sm_count, *, tile_n, occupancy, waves):
    """out = attention of q (B, H_kv, GROUP, D: one query per head, grouped by KV head) over
    k, v (B, H_kv, S, D), split across blocks; `out` shaped as q."""
    b, hk, _, _ = q.shape
    splits, split_tiles = decode_splits(b, hk, k.shape[2], tile_n, waves * sm_count)
    _decode_launch(q, k, v, out, scale, tile_n, occupancy, splits, split_tiles)


def attention_decode_split(q, k, v, out, scale, split_len):
    """`attention_decode` with `split_len` keys per split (TileGym's kv_len_per_split, a power
    of two of 16 or more), the split pinned instead of tuned."""
    tile_n = min(128, split_len)
    splits = -(-k.shape[2] // split_len)
    _decode_launch(q, k, v, out, scale, tile_n, 2, splits, split_len // tile_n)


def _decode_launch(q, k, v, out, scale, tile_n, occupancy, splits, split_tiles):
    """The decode's launches: one kernel where one split covers the keys, else the split
    kernel and the combine."""
    flags = (q.dtype,)
    args = (q, k, v, scale, tile_n)
    split_kv_launch(q, out, make_decode_one, make_decode_split, flags, args, occupancy, splits,
                    split_tiles)  # fmt: skip


def split_kv_launch(
    q, out, make_one, make_split, flags, args, occupancy, splits, split_tiles, guarded=False
):
    """A split-KV decode's launches (q and out of (B, H_kv, GROUP, D)): `make_one(*flags)`'s
    kernel (out, *args) where one split covers the keys, else `make_split(*flags)`'s (partial
    output, partial lse, *args, split_tiles) and `make_decode_combine` (`guarded`: a head may
    see no key in any split)."""
    b, hk, group, d = q.shape
    qg, td = max(8, next_pow2(group)), next_pow2(d)
    if splits == 1:
        one = kernel_of(make_one, *flags).options(occupancy=occupancy)
        with out.partition((1, 1, qg, td)) as out_p:
            one(out_p, *args)
        return
    split = kernel_of(make_split, *flags).options(occupancy=occupancy)
    combine = kernel_of(make_decode_combine, q.dtype, guarded)

    def combine_splits(part_o, part_lse):
        with out.partition((1, 1, qg, td)) as out_p:
            combine(out_p, part_o, part_lse, next_pow2(splits))

    # the first split of this form (by size class: a decode loop's growing S makes no new
    # one each step): the split kernel and the combine compile side by side
    form = (make_split, flags, occupancy, size_class(b), hk, group, d, size_class(splits))
    key = ("split_kv", *form, split_tiles)
    split_combine_launch(out, (b, hk, splits, group, d), (1, 1, 1, qg, td), split,
                         (*args, split_tiles), combine_splits, key)  # fmt: skip


def split_combine_launch(out, part_shape, part_tile, split, split_args, combine, key):
    """The two launches of a split-KV decode: `split` (partial output, partial lse,
    *split_args) into f32 partials beside `out`, of `part_shape` and its lse of (.., 1), in
    tiles of `part_tile` and (.., 1), then `combine(partial output, partial lse)`, which
    launches the combine into the outputs; on the first call with `key` the two compile side
    by side (`compile_ahead_once`)."""
    o = empty_beside(out, part_shape, fl.f32)
    # lse keeps a unit last axis: both partials have as many axes, so their grids fold alike
    lse = empty_beside(out, (*part_shape[:-1], 1), fl.f32)

    def launches():
        with (
            o.partition(part_tile) as part_o,
            lse.partition((*part_tile[:-1], 1)) as part_l,
        ):
            split(part_o, part_l, *split_args)
        combine(o, lse)

    compile_ahead_once(key, launches)
    launches()
