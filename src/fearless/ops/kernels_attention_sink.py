"""The Tile kernel behind `fearless.ops.attention_sink` (GPT-OSS's attention with a learned
sink logit per head), and its autotuned launch; `attention_sink_decode` runs the split-KV
kernels of ops/kernels_attention_sink_decode.py.

`make_sink_attention` is the flash-attention loop of ops/kernels_attention.py (online softmax
in base 2, f32 running max, sum and accumulator; the key tiles outside every row's window
skipped by `variant_bounds`) with three differences, so that the existing kernels' IR stays as
it was:
  - the tensors keep TileGym's sequence-major layout: q and out (B, L, H, D), k and v
    (B, S, H_kv, D), read and written in place through 4-d tiles of (1, rows, 1, D), where the
    operator would otherwise transpose four tensors;
  - query row i sits at position START + i, START read from a one-element i32 tensor inside
    the kernel (TileGym's `start_q`, which may live on the GPU: no host sync), and sees keys
    j <= START + i (causal, always) and, when `windowed`, j >= START + i - WL;
  - the sink: the running max starts at the head's sink logit (so the sink joins the max), and
    at the end exp(sink - max) joins the denominator; it adds nothing to the accumulator.
A row that sees no key gives 0 (its weights all fall on the sink), also where the sink is
-inf.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from .kernels_attention import (
    ATTENTION_CONFIGS,
    INV_LOG_2,
    key_scores,
    normalised,
    online_step,
    seq_rows,
    tile_positions,
    variant_bounds,
    variant_masked,
)
from .kernels_rows import kernel_of, next_pow2, size_class


def make_sink_attention(dt, sdt, windowed, **hints):
    """softmax over [the sink, Q K^T * scale] of Q's rows, applied to [0, V]: q, out of
    (B, L, H, D), k, v of (B, S, H_kv, D) in `dt`, sinks of (H,) in `sdt`, start a (1,) i32
    tensor; `windowed` (compile-time): the window's left bound WL (run-time) applies."""

    @tile.kernel(**hints)
    def sink_attention(
        out: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        sinks: tile.Tensor[sdt],
        start: tile.Tensor[fl.i32],
        scale: fl.f32,
        wl: fl.i32,
        TILE_N: tile.Const[int],
        GROUP: tile.Const[int],
    ):
        _, TILE_M, _, TILE_D = out.shape
        b, i, h, _ = out.index
        kv_h = h // GROUP
        s_len = k.shape[1]
        off = tile.load(start, (0,), (1,)).item()
        qk_scale = scale * INV_LOG_2
        sink = tile.load(sinks, (h,), (1,)).astype(fl.f32).reshape((1, 1)) * INV_LOG_2
        m_i = tile.zeros((TILE_M, 1), fl.f32) + sink  # the sink joins the running max
        l_i = tile.zeros((TILE_M, 1), fl.f32)
        acc = tile.zeros((TILE_M, TILE_D), fl.f32)
        qt = seq_rows(q, b, i, h, TILE_M, TILE_D)
        rows, cols = tile_positions(i, TILE_M, TILE_N)
        first, tiles, clean_from, mask_from = variant_bounds(
            i, s_len, off, wl, 0, TILE_M, TILE_N, True, windowed, False
        )
        for j in range(first, tiles):
            qk = key_scores(qt, k, b, kv_h, j, TILE_M, TILE_N, TILE_D, True)
            qk = qk * qk_scale  # scores in base 2
            qk = variant_masked(qk, j, rows, cols, off, s_len, wl, 0, clean_from, mask_from,
                                TILE_N, True, windowed, False)  # fmt: skip
            m_ij, l_ij, acc = online_step(  # guarded: a -inf sink and no key yet
                qk, m_i, l_i, acc, v, b, kv_h, j, TILE_N, TILE_D, dt, True, True
            )
            l_i, m_i = l_ij, m_ij  # the loop carries acc, l, m in this order
        m_ref = tile.where(m_i == -math.inf, 0.0, m_i)
        z = l_i + tile.exp2(sink - m_ref, flush_to_zero=True)  # the sink's share
        acc = normalised(acc, z, True)  # 0 where no key and a -inf sink
        out.store(acc.reshape((1, TILE_M, 1, TILE_D)).astype(dt))

    return sink_attention


def _sink_key(q, k, v, sinks, start, out, scale, group, wl, *_, **__):
    """Batch x heads, L and S by size class, D, the grouping, the window's size class (0: none)
    and the sinks' dtype."""
    b, lq, h, d = q.shape
    sizes = size_class(b * h), size_class(lq), size_class(k.shape[1])
    return (*sizes, d, group, None if wl is None else size_class(wl + 1), sinks.dtype.name)


@fl.autotune(configs=ATTENTION_CONFIGS, key=_sink_key)
def attention_sink_tuned(
    q, k, v, sinks, start, out, scale, group, wl, *, tile_m, tile_n, occupancy,
    num_worker_warps,
):  # fmt: skip
    """out (B, L, H, D) = attention with sinks of q (B, L, H, D) over k, v (B, S, H_kv, D)
    (fl.Tensors), query row i at start[0] + i; `wl` None (no window) or the keys a row sees
    before its own position."""
    windowed = wl is not None
    make = kernel_of(make_sink_attention, q.dtype, sinks.dtype, windowed)
    kernel = make.options(occupancy=occupancy, num_worker_warps=num_worker_warps)
    with out.partition((1, tile_m, 1, next_pow2(q.shape[3]))) as part:
        kernel(part, q, k, v, sinks, start, scale, wl or 0, tile_n, group)
