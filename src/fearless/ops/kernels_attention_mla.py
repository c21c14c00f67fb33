"""The Tile kernels behind DeepSeek's multi-head latent attention (`fearless.ops.mla`,
`mla_decoding`, `mla_decoding_split_kv`), and their autotuned launches.

MLA's scores have two terms: q k^T over the latent ("nope") head dim D plus qpe kpe^T over the
decoupled RoPE dim D_PE (a key's RoPE part shared by several query heads). Both are tensor-core
products summed into one f32 score tile, then the online softmax in base 2 of
ops/kernels_attention.py (f32 running max, sum and accumulator). A separate module, so that the
flash-attention kernels' IR stays as it was.

  - `make_mla` (prefill, TileGym's tilegym/ops/cutile/mla.py): block (b, h, i) of Out's
    (1, 1, TILE_M, TILE_D) tile takes rows i * TILE_M.. of q and qpe (B, H, L, D / D_PE), walks
    the key tiles of k, v (B, H_kv, S, D) and kpe (B, H_pe, S, D_PE) (query head h reads KV head
    h // GROUP and RoPE head h // PE_GROUP), skipping those past the block's last row when
    causal (`variant_bounds`); causal is top-left, as TileGym's MLA and its reference: query i
    sees keys j <= i.
  - decode (TileGym's mla_decoding.py and mla_decoding_split_kv.py): one query per head, q, qpe
    (B, H, D / D_PE) over the absorbed latent cache kv (B, S, D), which serves as both K and V,
    and kpe (B, S, D_PE). Block (b, head tile) works keys-major, as the GQA decode of
    kernels_attention_decode.py: scores K_j (TILE_N, D) @ Q^T (D, TILE_H), accumulator
    KV_j^T (D, TILE_N) @ P (TILE_N, TILE_H), so the keys fill the MMA's M axis and the head tile
    its N. With one split the block stores the output and the log2-sum-exp (TileGym's `l`:
    max + log2(sum) of the base-2 scaled scores); with several it stores its split's normalised
    partial output and log2-sum-exp, and `make_mla_combine` reduces the splits per head.
`roped` False (D_PE = 0) compiles the products without the RoPE term. TILE_D and TILE_P are D
and D_PE rounded up to powers of two: the padded columns load as zeros (they add nothing to the
scores) and are dropped at the store.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from .kernels_attention import (
    ATTENTION_CONFIGS,
    INV_LOG_2,
    head_rows,
    key_scores,
    masked_scores,
    normalised,
    online_fold,
    online_start,
    online_step,
    online_weights,
    tile_order,
    tile_positions,
    variant_bounds,
)
from .kernels_attention_decode import decode_rows, decode_splits, split_combine_launch
from .kernels_attention_splitk import lse_fold, lse_start
from .kernels_rows import kernel_of, next_pow2, size_class

# --------------------------------------------------------------------------------- prefill


def make_mla(dt, causal, even_k, roped, **hints):
    """softmax((Q K^T + QPE KPE^T) * scale) V of q, qpe (B, H, L, D / D_PE) over k, v
    (B, H_kv, S, D) and kpe (B, H_pe, S, D_PE); `causal`: query i sees keys j <= i (top-left);
    `even_k`: S is a multiple of TILE_N (no ragged key tile to mask)."""

    @tile.kernel(**hints)
    def mla_attention(
        out: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        qpe: tile.Tensor[dt],
        kpe: tile.Tensor[dt],
        scale: fl.f32,
        TILE_N: tile.Const[int],
        TILE_P: tile.Const[int],
        GROUP: tile.Const[int],
        PE_GROUP: tile.Const[int],
    ):
        _, _, TILE_M, TILE_D = out.shape
        b, h, i, _ = out.index
        kv_h = h // GROUP
        pe_h = h // PE_GROUP
        qk_scale = scale * INV_LOG_2
        s_len = k.shape[2]
        rows, cols = tile_positions(i, TILE_M, TILE_N)
        m_i, l_i, acc = online_start(TILE_M, TILE_D, False)
        qt = head_rows(q, b, h, i, TILE_M, TILE_D)
        if roped:  # compile-time
            pt = head_rows(qpe, b, h, i, TILE_M, TILE_P)
        _, tiles, _, mask_from = variant_bounds(
            i, s_len, 0, 0, 0, TILE_M, TILE_N, causal, False, False
        )
        for j in range(tiles):
            qk = key_scores(qt, k, b, kv_h, j, TILE_M, TILE_N, TILE_D, False)
            if roped:  # compile-time: the decoupled RoPE term joins the same scores
                kp = tile.load(
                    kpe, (b, pe_h, 0, j), (1, 1, TILE_P, TILE_N), order=(0, 1, 3, 2), latency=2
                )
                qk = tile.mma(pt, kp.reshape((TILE_P, TILE_N)), qk)
            qk = qk * qk_scale  # scores in base 2
            if causal or not even_k:  # noqa: SIM102  (compile-time, then a run-time `if`)
                if j >= mask_from:
                    keys = j * TILE_N + cols
                    qk = masked_scores(qk, rows, keys, s_len, 0, 0, causal, False, False)
            # every row sees key 0 in the first tile: its max is finite from there on
            m_i, l_i, acc = online_step(
                qk, m_i, l_i, acc, v, b, kv_h, j, TILE_N, TILE_D, dt, False, False
            )
        out.store(normalised(acc, l_i, False).reshape((1, 1, TILE_M, TILE_D)).astype(dt))

    return mla_attention


def _mla_key(q, k, v, qpe, kpe, out, scale, causal, group, pe_group, *_, **__):
    """Batch x heads, L and S by size class, D, D_PE, the groupings and causal."""
    b, h, l_len, d = q.shape
    sizes = size_class(b * h), size_class(l_len), size_class(k.shape[2])
    return (*sizes, d, qpe.shape[3], group, pe_group, causal)


# TileGym's MLA tunes (64 | 128 | 256, 64 | 128) tiles at occupancy 1 and 2 on sm90: the
# flash-attention kernels' list covers them.
@fl.autotune(configs=ATTENTION_CONFIGS, key=_mla_key)
def mla_tuned(
    q, k, v, qpe, kpe, out, scale, causal, group, pe_group, *, tile_m, tile_n, occupancy,
    num_worker_warps,
):  # fmt: skip
    """out (B, H, L, D) = MLA of q, qpe over k, v, kpe (fl.Tensors, `make_mla`'s layouts)."""
    d, dp = q.shape[3], qpe.shape[3]
    even_k = k.shape[2] % tile_n == 0
    make = kernel_of(make_mla, q.dtype, causal, even_k, dp > 0)
    kernel = make.options(occupancy=occupancy, num_worker_warps=num_worker_warps)
    with out.partition((1, 1, tile_m, next_pow2(d)), tile_order()) as part:
        kernel(part, q, k, v, qpe, kpe, scale, tile_n, next_pow2(max(dp, 1)), group, pe_group)


# ---------------------------------------------------------------------------------- decode


@tile.function
def mla_decode_keys(q, qpe, kv, kpe, b, hb, first, tiles, TILE_H, TILE_N, TILE_D, TILE_P, qk_scale,
                    dt, roped):  # fmt: skip
    """(acc (D, TILE_H), m (1, TILE_H), l (1, TILE_H)) of key tiles first.. first + tiles - 1
    for head tile hb of batch b, keys-major (see the module's docstring); keys past S masked."""
    s_len = kv.shape[1]
    q_t = tile.transpose(tile.load(q, (b, hb, 0), (1, TILE_H, TILE_D)).reshape((TILE_H, TILE_D)))
    if roped:  # compile-time
        p_t = tile.transpose(
            tile.load(qpe, (b, hb, 0), (1, TILE_H, TILE_P)).reshape((TILE_H, TILE_P))
        )
    m_i, l_i, acc = online_start(TILE_H, TILE_D, True)
    keys = tile.arange(TILE_N)[:, None]
    for jj in range(tiles):
        j = first + jj
        kt = tile.load(kv, (b, j, 0), (1, TILE_N, TILE_D), latency=2).reshape((TILE_N, TILE_D))
        s = tile.mma(kt, q_t, tile.zeros((TILE_N, TILE_H), fl.f32))
        if roped:  # compile-time
            pt = tile.load(kpe, (b, j, 0), (1, TILE_N, TILE_P), latency=2)
            s = tile.mma(pt.reshape((TILE_N, TILE_P)), p_t, s)
        s = tile.where(j * TILE_N + keys < s_len, s * qk_scale, -math.inf)
        m_ij, p, alpha = online_weights(s, m_i, 0, False)
        acc, l_i = online_fold(p, alpha, l_i, acc, kt, dt, True)  # the cache is V too
        m_i = m_ij
    return acc, m_i, l_i


def make_mla_decode(dt, roped, **hints):
    """Decode with one split: block (b, head tile) walks every key and stores its heads' output
    (B, H, D) and log2-sum-exp (B, H, 1)."""

    @tile.kernel(**hints)
    def mla_decode(
        out: tile.Part[dt],
        lse: tile.Part[fl.f32],
        q: tile.Tensor[dt],
        qpe: tile.Tensor[dt],
        kv: tile.Tensor[dt],
        kpe: tile.Tensor[dt],
        scale: fl.f32,
        TILE_N: tile.Const[int],
        TILE_P: tile.Const[int],
    ):
        _, TILE_H, TILE_D = out.shape
        b, hb, _ = out.index
        tiles = tile.cdiv(kv.shape[1], TILE_N)
        acc, m_i, l_i = mla_decode_keys(
            q, qpe, kv, kpe, b, hb, 0, tiles, TILE_H, TILE_N, TILE_D, TILE_P, scale * INV_LOG_2,
            dt, roped,
        )  # fmt: skip
        out.store(decode_rows(acc, l_i, False).astype(dt).reshape((1, TILE_H, TILE_D)))
        lse.store((m_i + tile.log2(l_i)).reshape((1, TILE_H, 1)))

    return mla_decode


def make_mla_decode_split(dt, roped, **hints):
    """The split kernel: block (b, head tile, split) walks SPLIT_TILES key tiles and stores its
    partial output (B, H, splits, D) and log2-sum-exp (B, H, splits, 1), f32."""

    @tile.kernel(**hints)
    def mla_decode_split(
        part_o: tile.Part[fl.f32],
        part_lse: tile.Part[fl.f32],
        q: tile.Tensor[dt],
        qpe: tile.Tensor[dt],
        kv: tile.Tensor[dt],
        kpe: tile.Tensor[dt],
        scale: fl.f32,
        TILE_N: tile.Const[int],
        TILE_P: tile.Const[int],
        SPLIT_TILES: tile.Const[int],
    ):
        _, TILE_H, _, TILE_D = part_o.shape
        b, hb, sp, _ = part_o.index
        acc, m_i, l_i = mla_decode_keys(
            q, qpe, kv, kpe, b, hb, sp * SPLIT_TILES, SPLIT_TILES, TILE_H, TILE_N, TILE_D, TILE_P,
            scale * INV_LOG_2, dt, roped,
        )  # fmt: skip
        part_o.store(decode_rows(acc, l_i, False).reshape((1, TILE_H, 1, TILE_D)))
        part_lse.store((m_i + tile.log2(l_i)).reshape((1, TILE_H, 1, 1)))

    return mla_decode_split


def make_mla_combine(dt, **hints):
    """out (B, H, D) and lse (B, H, 1) from the splits' partial outputs and log2-sum-exps:
    block (b, h) walks the splits SC at a time (the splits past the last load with lse -inf and
    weigh nothing), rescaling its running sum as the online softmax does. Every split holds a
    key, so its lse is finite."""

    @tile.kernel(**hints)
    def mla_combine(
        out: tile.Part[dt],
        lse: tile.Part[fl.f32],
        part_o: tile.Tensor[fl.f32],
        part_lse: tile.Tensor[fl.f32],
        SC: tile.Const[int],
    ):
        _, _, TILE_D = out.shape
        b, h, _ = out.index
        m, total, acc = lse_start(TILE_D)
        for c in range(tile.cdiv(part_o.shape[2], SC)):
            o = tile.load(part_o, (b, h, c, 0), (1, 1, SC, TILE_D)).reshape((SC, TILE_D))
            ls = tile.load(part_lse, (b, h, c, 0), (1, 1, SC, 1), padding=-math.inf)
            ls = ls.reshape((SC, 1))
            acc, total, m = lse_fold(o, ls, m, acc, total, False)
        out.store((acc / total).astype(dt).reshape((1, 1, TILE_D)))
        lse.store((m + tile.log2(total)).reshape((1, 1, 1)))

    return mla_combine


def _decode_cfg(tile_h, tile_n, occupancy, waves):
    return dict(tile_h=tile_h, tile_n=tile_n, occupancy=occupancy, waves=waves)


# TileGym's decode runs (16 heads, 128 keys) tiles, one block per head tile and batch (no
# split); its split-KV form the same tiles with the keys split to fill the SMs. waves: the
# splits aim at waves x SMs blocks (one split when the head tiles already fill that many).
MLA_DECODE_CONFIGS = [
    _decode_cfg(16, 64, 2, 1),
    _decode_cfg(16, 128, 1, 1),
    _decode_cfg(16, 64, 1, 2),
    _decode_cfg(32, 64, 1, 1),
    _decode_cfg(64, 32, 1, 1),
    _decode_cfg(16, 32, 2, 4),
]


def _mla_decode_key(q, qpe, kv, *_, **__):
    b, h, d = q.shape
    return size_class(b), size_class(h), size_class(kv.shape[1]), d, qpe.shape[2]


@fl.autotune(configs=MLA_DECODE_CONFIGS, key=_mla_decode_key)
def mla_decode_tuned(q, qpe, kv, kpe, out, lse, scale, sm_count, *, tile_h, tile_n, occupancy,
                     waves):  # fmt: skip
    """out (B, H, D) and lse (B, H, 1) = MLA decode of q, qpe over kv, kpe (fl.Tensors), the
    keys split across blocks as the batch, the heads and `sm_count` ask."""
    b, h, _ = q.shape
    th = min(tile_h, max(8, next_pow2(h)))
    splits, split_tiles = decode_splits(b, -(-h // th), kv.shape[1], tile_n, waves * sm_count)
    mla_decode_launch(q, qpe, kv, kpe, out, lse, scale, th, tile_n, occupancy, splits, split_tiles)


def mla_decode_pinned(q, qpe, kv, kpe, out, lse, scale, split_len):
    """`mla_decode_tuned` with `split_len` keys per split (TileGym's kv_len_per_split, a power
    of two of 16 or more), pinned instead of tuned."""
    tile_n = min(64, split_len)
    th = min(16, max(8, next_pow2(q.shape[1])))
    splits = -(-kv.shape[1] // split_len)
    mla_decode_launch(q, qpe, kv, kpe, out, lse, scale, th, tile_n, 1, splits, split_len // tile_n)


def mla_decode_launch(q, qpe, kv, kpe, out, lse, scale, tile_h, tile_n, occupancy, splits,
                      split_tiles):  # fmt: skip
    """The decode's launches: one kernel where one split covers the keys, else the split kernel
    and the combine."""
    b, h, d = q.shape
    dp = qpe.shape[2]
    td, tp, roped = next_pow2(d), next_pow2(max(dp, 1)), dp > 0
    if splits == 1:
        one = kernel_of(make_mla_decode, q.dtype, roped).options(occupancy=occupancy)
        with out.partition((1, tile_h, td)) as out_p, lse.partition((1, tile_h, 1)) as l_p:
            one(out_p, l_p, q, qpe, kv, kpe, scale, tile_n, tp)
        return
    split = kernel_of(make_mla_decode_split, q.dtype, roped).options(occupancy=occupancy)
    sc = min(16, next_pow2(splits))

    def combine_splits(part_o, part_lse):
        with out.partition((1, 1, td)) as out_p, lse.partition((1, 1, 1)) as l_p:
            kernel_of(make_mla_combine, q.dtype)(out_p, l_p, part_o, part_lse, sc)

    # the split and the combine compile side by side the first time (as split_kv_launch's)
    form = (q.dtype, roped, occupancy, size_class(b), h, d, dp, tile_h, tile_n, size_class(splits))
    split_combine_launch(out, (b, h, splits, d), (1, tile_h, 1, td), split,
                         (q, qpe, kv, kpe, scale, tile_n, tp, split_tiles), combine_splits,
                         ("mla_decode", *form, split_tiles))  # fmt: skip
