"""The Tile kernel behind `fearless.ops.fmha_variant` (TileGym's fmha_variant: one attention
forward with its optional pieces chosen per launch), and its autotuned launch.

`make_fmha_variant` is the flash-attention loop of ops/kernels_attention.py (online softmax in
base 2, f32 running max, sum and accumulator, key tiles outside every row's window skipped by
`variant_bounds`) with, per compile-time flag:
  - the layout: q, k, v and out of (B, N, S, D) ("bnsd") or (N, S, B, D) ("nsbd"); block
    (b, h, i) of out's tiles takes query rows i * TILE_M.. of head h of sequence b;
  - per-sequence lengths (q_lens, kv_lens: (B,) i32, clamped to the padded S_q and S_kv): row
    r of sequence b sits at r + kv_len - q_len, keys j >= kv_len are masked, rows r >= q_len
    store 0;
  - causal (keys j <= the row's position) and a window W (keys with |j - position| <= W);
  - a bias added to the scaled scores: "vector" (1 or B, 1 or N, 1, S_kv), "matrix"
    (1 or B, 1 or N, S_q, S_kv), or "alibi", -slope[h] * |position - j| (slopes (N,));
  - a random mask (1 or B, 1 or N, S_q, S_kv), bool or 8-bit: nonzero masks the key;
  - dropout of the probabilities (after the softmax's sum, as TileGym's Triton kernel): element
    (b, h, i, j) is kept where `tl.rand(seed, ((b * N + h) * S_q + i) * S_kv + j)` > p, the
    uniform of Philox4x32-10 word 0 at counter (offset low, offset high, 0, 0) keyed by the
    64-bit seed, converted as Triton's `uint_to_uniform_float`: Triton's mask, bit for bit;
    kept probabilities are divided by 1 - p.
A row that sees no key stores 0. The existing kernels are untouched: this is a kernel of its
own.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

# `tile.rand` takes 32-bit offsets and dropout's are 64-bit (Triton's tl.rand splits them into
# two counter words): `dropped` runs Philox on (lo, hi, 0, 0) and converts as tile.rand does
from fearless.tile.random import UNIFORM_SCALE

from .kernels_attention import (
    ATTENTION_CONFIGS,
    INV_LOG_2,
    masked_scores,
    online_start,
    online_weights,
    rows_normalised,
    score_tile,
    sequence_lengths,
    tile_order,
    tile_positions,
    variant_bounds,
)
from .kernels_rows import kernel_of, next_pow2, size_class


@tile.function
def dropped(p, b, h, n_heads, s_q, s_kv, rows, keys, seed, drop, keep):
    """Probabilities `p` with dropout: Triton's `tl.rand(seed, offset) > drop` of the element's
    offset in a contiguous (B, N, S_q, S_kv) tensor keeps it (divided by `keep` = 1 - drop),
    else 0."""
    base = (b * n_heads + h).astype(fl.i64) * s_q.astype(fl.i64)
    offs = (base + rows.astype(fl.i64)) * s_kv.astype(fl.i64) + keys.astype(fl.i64)
    lo = offs.astype(fl.u32)
    hi = (offs >> 32).astype(fl.u32)
    r0, _, _, _ = tile.philox(seed, lo, hi, 0, 0)
    x = r0.astype(fl.i32)  # the bits as a signed value
    x = tile.where(x < 0, -x - 1, x)
    u = x.astype(fl.f32) * UNIFORM_SCALE
    return tile.where(u > drop, p / keep, 0.0)


@tile.function
def biased(s, bias, b, h, i, j, pos, keys, TILE_M, TILE_N, kind, bias_b, bias_h):
    """Base-2 scores `s` plus the bias (compile-time `kind`): "vector" / "matrix" tiles of
    (1 or B, 1 or N, 1 or S_q, S_kv) (bias_b / bias_h: it has that axis), or "alibi",
    -slope[h] * |pos - keys|; in base 2 (times 1 / ln 2)."""
    if kind == "vector":  # one row, every query row's
        t = score_tile(bias, b, h, 0, j, 1, TILE_N, bias_b, bias_h)
        s = s + t.astype(fl.f32) * INV_LOG_2
    elif kind == "matrix":
        t = score_tile(bias, b, h, i, j, TILE_M, TILE_N, bias_b, bias_h)
        s = s + t.astype(fl.f32) * INV_LOG_2
    else:  # alibi
        slope = tile.load(bias, (h,), (1,)).astype(fl.f32).reshape((1, 1))
        d = (pos - keys).astype(fl.f32)
        s = s - slope * max(d, -d) * INV_LOG_2
    return s


@tile.function
def randomly_masked(s, m, b, h, i, j, TILE_M, TILE_N, mask_bool, mask_b, mask_h):
    """Scores `s` with -inf where the random mask `m` (1 or B, 1 or N, S_q, S_kv) is nonzero
    (True for bool)."""
    mt = score_tile(m, b, h, i, j, TILE_M, TILE_N, mask_b, mask_h)
    if mask_bool:  # noqa: SIM108
        hit = mt
    else:
        hit = mt != 0
    return tile.where(hit, -math.inf, s)


def make_fmha_variant(dt, nsbd, causal, windowed, bias_form, mask_form, dropout, **hints):
    """fmha_variant's kernel for q, k, v in `dt`, per compile-time flag (the module docstring):
    `nsbd` the layout, `causal`, `windowed` (run-time W), `bias_form` None or (kind, dtype,
    has_b, has_h), `mask_form` None or (dtype, has_b, has_h), `dropout` (run-time p, seed)."""
    biasing = bias_form is not None
    kind, bdt, bias_b, bias_h = bias_form if biasing else (None, dt, False, False)
    masking = mask_form is not None
    mdt, mask_b, mask_h = mask_form if masking else (fl.i8, False, False)
    mask_bool = mdt == fl.bool_
    right = windowed and not causal  # causal already bounds the window's right side

    @tile.kernel(**hints)
    def fmha_variant(
        out: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        bias: tile.Tensor[bdt] | None,
        rmask: tile.Tensor[mdt] | None,
        q_lens: tile.Tensor[fl.i32],
        kv_lens: tile.Tensor[fl.i32],
        scale: fl.f32,
        window: fl.i32,
        drop: fl.f32,
        keep: fl.f32,
        seed_lo: fl.u32,
        seed_hi: fl.u32,
        TILE_D: tile.Const[int],
        TILE_N: tile.Const[int],
        GROUP: tile.Const[int],
    ):
        if nsbd:  # compile-time: (N, S, B, D)
            _, TILE_M, _, TILE_DV = out.shape
            h, i, b, _ = out.index
            n_heads, s_q, s_kv = q.shape[0], q.shape[1], k.shape[1]
        else:
            _, _, TILE_M, TILE_DV = out.shape
            b, h, i, _ = out.index
            n_heads, s_q, s_kv = q.shape[1], q.shape[2], k.shape[2]
        kv_h = h // GROUP
        lq, lk, off = sequence_lengths(q_lens, kv_lens, b, s_q, s_kv)
        qk_scale = scale * INV_LOG_2
        seed = (seed_hi.astype(fl.u64) << 32) | seed_lo.astype(fl.u64)
        m_i, l_i, acc = online_start(TILE_M, TILE_DV, False)
        if nsbd:
            qt = tile.load(q, (h, i, b, 0), (1, TILE_M, 1, TILE_D))
        else:
            qt = tile.load(q, (b, h, i, 0), (1, 1, TILE_M, TILE_D))
        qt = qt.reshape((TILE_M, TILE_D))
        rows, cols = tile_positions(i, TILE_M, TILE_N)
        first, tiles, clean_from, mask_from = variant_bounds(
            i, lk, off, window, window, TILE_M, TILE_N, causal, windowed, right
        )
        # a block wholly past q_len walks no key tile
        tiles = first + (tiles - first) * min(1, max(0, lq - i * TILE_M))
        for j in range(first, tiles):
            if nsbd:
                kt = tile.load(
                    k, (kv_h, 0, b, j), (1, TILE_D, 1, TILE_N), order=(0, 3, 2, 1), latency=2
                )
            else:
                kt = tile.load(
                    k, (b, kv_h, 0, j), (1, 1, TILE_D, TILE_N), order=(0, 1, 3, 2), latency=2
                )
            qk = tile.mma(qt, kt.reshape((TILE_D, TILE_N)), tile.zeros((TILE_M, TILE_N), fl.f32))
            qk = qk * qk_scale
            pos = rows + off
            keys = j * TILE_N + cols
            if biasing:  # compile-time
                qk = biased(qk, bias, b, h, i, j, pos, keys, TILE_M, TILE_N, kind, bias_b, bias_h)
            if masking:  # compile-time
                qk = randomly_masked(qk, rmask, b, h, i, j, TILE_M, TILE_N, mask_bool, mask_b,
                                     mask_h)  # fmt: skip
            if (j >= mask_from) or (j < clean_from):  # a key some row does not see
                qk = masked_scores(qk, pos, keys, lk, window, window, causal, windowed, right)
            m_ij, p, alpha = online_weights(qk, m_i, -1, True)
            l_i = l_i * alpha + tile.sum(p, axis=-1, keepdims=True)
            if dropout:  # compile-time: after the sum, as TileGym's Triton kernel
                p = dropped(p, b, h, n_heads, s_q, s_kv, rows, keys, seed, drop, keep)
            if nsbd:
                vt = tile.load(v, (kv_h, j, b, 0), (1, TILE_N, 1, TILE_DV), latency=4)
            else:
                vt = tile.load(v, (b, kv_h, j, 0), (1, 1, TILE_N, TILE_DV), latency=4)
            acc = tile.mma(p.astype(dt), vt.reshape((TILE_N, TILE_DV)), acc * alpha)
            m_i = m_ij
        acc = rows_normalised(acc, l_i, rows, lq).astype(dt)  # padded rows, no key: 0
        if nsbd:
            out.store(acc.reshape((1, TILE_M, 1, TILE_DV)))
        else:
            out.store(acc.reshape((1, 1, TILE_M, TILE_DV)))

    return fmha_variant


def fmha_variant_launch(q, k, v, bias, rmask, q_lens, kv_lens, out, scalars, flags, tile_m,
                        tile_n, occupancy=None, num_worker_warps=None):  # fmt: skip
    """One launch of `make_fmha_variant(q.dtype, *flags)` over out's query tiles of `tile_m`
    rows, `tile_n` keys a step; `scalars` (scale, window, drop, keep, seed_lo, seed_hi, group)."""
    nsbd = flags[0]
    d, dv = q.shape[3], out.shape[3]
    make = kernel_of(make_fmha_variant, q.dtype, *flags)
    kernel = make.options(occupancy=occupancy, num_worker_warps=num_worker_warps)
    shape = (1, tile_m, 1, next_pow2(dv)) if nsbd else (1, 1, tile_m, next_pow2(dv))
    *values, group = scalars
    with out.partition(shape, tile_order()) as part:
        kernel(part, q, k, v, bias, rmask, q_lens, kv_lens, *values, next_pow2(d), tile_n, group)


def _variant_key(q, k, v, bias, rmask, q_lens, kv_lens, out, scalars, flags, *_, **__):
    """Batch x heads, S_q and S_kv by size class, D and D_v, the grouping and the flags."""
    nsbd = flags[0]
    n, s_q, b, _ = q.shape if nsbd else (q.shape[1], q.shape[2], q.shape[0], 0)
    s_kv = k.shape[1] if nsbd else k.shape[2]
    sizes = size_class(b * n), size_class(s_q), size_class(s_kv)
    return (*sizes, q.shape[3], out.shape[3], scalars[-1], flags)


@fl.autotune(configs=ATTENTION_CONFIGS, key=_variant_key)
def fmha_variant_tuned(
    q, k, v, bias, rmask, q_lens, kv_lens, out, scalars, flags, *, tile_m, tile_n, occupancy,
    num_worker_warps,
):  # fmt: skip
    """`fmha_variant_launch` with the tuned tiles, occupancy and worker warps."""
    fmha_variant_launch(q, k, v, bias, rmask, q_lens, kv_lens, out, scalars, flags, tile_m,
                        tile_n, occupancy, num_worker_warps)  # fmt: skip
