"""The Tile kernel behind `fearless.ops.fmha_varlen` (TileGym's attention over a padded batch of
sequences of their own lengths), and its autotuned launch.

`make_varlen_attention` is the flash-attention loop of ops/kernels_attention.py (online softmax
in base 2, f32 running max, sum and accumulator; key tiles past every row's diagonal skipped by
`variant_bounds`) with per-sequence lengths read inside the kernel, so one launch covers the
batch with no host loop and no host sync on lengths that live on the GPU:
  - q_lens and kv_lens are (B,) i32 tensors: block (b, h, i) loads sequence b's query length
    LQ and key length LK (clamped to the padded L and S, so a length past the padding never
    reads past the tensor), walks only the key tiles below LK, and masks keys j >= LK;
  - causal: query row r sits at r + LK - LQ (bottom-right aligned per sequence, TileGym's
    `prefix_kvlen`) and sees keys j <= r + LK - LQ;
  - query rows r >= LQ (the padding), and the blocks wholly past LQ, store 0; so does a row
    that sees no key (TileGym divides 0 by 0 there);
  - nothing past LQ or LK reaches a real row, whatever its bits (NaN, Inf): the key mask
    selects -inf instead of adding it, and the values past LK are zeroed (`zeroed_past`) in
    the key tile that crosses LK (the tiles below it run as before); a padded query row is
    its own row of every product, dropped at the store.
The existing kernels' IR is untouched: this is a kernel of its own.

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
    online_fold,
    online_start,
    online_weights,
    rows_normalised,
    sequence_lengths,
    tile_order,
    tile_positions,
    variant_bounds,
    zeroed_past,
)
from .kernels_rows import kernel_of, next_pow2, size_class


def make_varlen_attention(dt, causal, **hints):
    """softmax(Q K^T * scale) V per sequence: q, out of (B, H, L, D), k, v of (B, H_kv, S, D)
    in `dt`, q_lens and kv_lens (B,) i32; `causal` (compile-time) bottom-right per sequence."""

    @tile.kernel(**hints)
    def varlen_attention(
        out: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        q_lens: tile.Tensor[fl.i32],
        kv_lens: tile.Tensor[fl.i32],
        scale: fl.f32,
        TILE_N: tile.Const[int],
        GROUP: tile.Const[int],
    ):
        _, _, TILE_M, TILE_D = out.shape
        b, h, i, _ = out.index
        kv_h = h // GROUP
        lq, lk, off = sequence_lengths(q_lens, kv_lens, b, q.shape[2], k.shape[2])
        qk_scale = scale * INV_LOG_2
        m_i, l_i, acc = online_start(TILE_M, TILE_D, False)
        qt = head_rows(q, b, h, i, TILE_M, TILE_D)
        rows, cols = tile_positions(i, TILE_M, TILE_N)
        _, tiles, _, mask_from = variant_bounds(
            i, lk, off, 0, 0, TILE_M, TILE_N, causal, False, False
        )
        tiles = tiles * min(1, max(0, lq - i * TILE_M))  # a block past LQ walks no key
        for j in range(tiles):
            qk = key_scores(qt, k, b, kv_h, j, TILE_M, TILE_N, TILE_D, False)
            qk = qk * qk_scale  # scores in base 2
            if j >= mask_from:
                keys = j * TILE_N + cols
                keep = keys < lk
                if causal:  # compile-time
                    keep = keep & (rows + off >= keys)
                # selected, not added: a padded key's score may be NaN, and NaN + -inf is NaN
                qk = tile.where(keep, qk, -math.inf)
            m_ij, p, alpha = online_weights(qk, m_i, -1, True)  # guarded: a row with no key yet
            vt = tile.load(v, (b, kv_h, j, 0), (1, 1, TILE_N, TILE_D), latency=4)
            # the padded values of the tile that crosses LK: p = 0 there, but 0 * NaN is NaN
            vt = zeroed_past(vt.reshape((TILE_N, TILE_D)), j * TILE_N, lk, TILE_N, False)
            acc, l_ij = online_fold(p, alpha, l_i, acc, vt, dt, False)
            l_i, m_i = l_ij, m_ij  # the loop carries acc, l, m in this order
        acc = rows_normalised(acc, l_i, rows, lq)  # padded rows and rows with no key: 0
        out.store(acc.reshape((1, 1, TILE_M, TILE_D)).astype(dt))

    return varlen_attention


def _varlen_key(q, k, v, q_lens, kv_lens, out, scale, causal, group, *_, **__):
    """Batch x heads, the padded L and S by size class, D, the grouping and causal."""
    b, h, lq, d = q.shape
    return size_class(b * h), size_class(lq), size_class(k.shape[2]), d, group, causal


@fl.autotune(configs=ATTENTION_CONFIGS, key=_varlen_key)
def attention_varlen_tuned(
    q, k, v, q_lens, kv_lens, out, scale, causal, group, *, tile_m, tile_n, occupancy,
    num_worker_warps,
):  # fmt: skip
    """out (B, H, L, D) = per-sequence attention of q (B, H, L, D) over k, v (B, H_kv, S, D)
    (fl.Tensors), sequence b's lengths q_lens[b] and kv_lens[b] ((B,) i32 fl.Tensors)."""
    make = kernel_of(make_varlen_attention, q.dtype, causal)
    kernel = make.options(occupancy=occupancy, num_worker_warps=num_worker_warps)
    with out.partition((1, 1, tile_m, next_pow2(q.shape[3])), tile_order()) as part:
        kernel(part, q, k, v, q_lens, kv_lens, scale, tile_n, group)
