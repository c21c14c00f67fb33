"""Flash attention's backward, its kernel source: the Tile kernel factories of the backward's
steps (`make_attention_stats`, `make_attention_dkdv` with its atomic dQ form, `make_attention_dq`,
`make_attention_delta`, `make_finish_dq`) and the `@tile.function`s only they use. Their
configuration, tuning and launches (`attention_backward`) are kernels_attention_backward.py's.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from .kernels_attention import (
    INV_LOG_2,
    head_rows,
    key_range,
    masked_scores,
    online_lse,
    sequence_lengths,
    user_masked,
    variant_bounds,
    zeroed_past,
)


@tile.function
def row_stat(t, b, h, i, TILE_M):
    """Rows i * TILE_M.. of head (b, h) of a (B, H, L) f32 statistic, as a (TILE_M, 1) tile."""
    return tile.load(t, (b, h, i), (1, 1, TILE_M)).reshape((TILE_M, 1))


@tile.function
def key_tile_t(k, b, kv_h, j, TILE_N, TILE_D):
    """Key (or value) tile j of KV head (b, kv_h), loaded transposed: (TILE_D, TILE_N)."""
    kt = tile.load(k, (b, kv_h, 0, j), (1, 1, TILE_D, TILE_N), order=(0, 1, 3, 2))
    return kt.reshape((TILE_D, TILE_N))


@tile.function
def padded_key_tile_t(k, b, kv_h, j, TILE_N, TILE_D, s_len, varlen):
    """`key_tile_t`, with the keys at or past s_len zeroed where `varlen` (compile-time:
    varlen's padding, see the backward's comment)."""
    kt = key_tile_t(k, b, kv_h, j, TILE_N, TILE_D)
    if varlen:
        kt = zeroed_past(kt, j * TILE_N, s_len, TILE_N, True)
    return kt


@tile.function
def padded_rows(t, b, h, i, TILE, TILE_D, n, varlen):
    """`head_rows` i * TILE.. of head (b, h), with the rows at or past n zeroed where `varlen`
    (compile-time: varlen's padding, see the backward's comment)."""
    rows = head_rows(t, b, h, i, TILE, TILE_D)
    if varlen:
        rows = zeroed_past(rows, i * TILE, n, TILE, False)
    return rows


@tile.function
def score_grads(p, do, vt, di, TILE_M, TILE_N):
    """dS = P * (dO V_j^T - delta) of one (query tile, key tile) pair (vt: V_j transposed,
    `key_tile_t`)."""
    dp = tile.mma(do, vt, tile.zeros((TILE_M, TILE_N), fl.f32))
    return p * (dp - di)


# ------------------------------------------------------------------------------- backward
#
# Flash attention's backward (FlashAttention-2's order), in three kernels over the saved q, k,
# v, out and the incoming d_out, with the causal mask (the user's: `mask`, below):
#   stats      per query row: lse (the log2-sum-exp of its scaled scores, recomputed as the
#              forward does) and delta = sum(d_out * out);
#   dk_dv      per (batch, KV head, key tile): walks every query tile of every query head of
#              its group, recomputing P = exp2(S - lse): dV += P^T dO, dK += dS^T Q * scale,
#              dS = P * (dO V^T - delta);
#   dq         per query tile: walks the key tiles, dQ += dS K * scale.
# Products feed the tensor cores in the inputs' dtype and sum in f32, as the forward.
# In training the forward keeps lse (make_attention's keep_lse) and `attention_delta` replaces
# stats. Up to head dim DQ_BY_ATOMICS_UP_TO (kernels_attention_backward.py's; FlashAttention-2's
# dQ), dk_dv also adds every pair's dS K into an f32 dQ, one `tile.atomic_store_add` of the
# (query rows, D) tile a pair (tileiras issues it as one TMA reduction, UTMAREDG, as
# FlashAttention-3's dQ; per-element relaxed adds were a REDG.F32x4 each), and `finish_dq`
# scales it: no dq kernel. In training that f32 dQ is zeroed by `attention_delta` beside its
# rows (torch's fill was a launch of its own on a short call's host path).
#
# The forward's `variant` (kernels_attention.make_attention's: bottom-right diagonal, window,
# soft cap; TileGym's fmha, swa_attention and gemma_attention) has its compile-time twin here:
# the same masks (applied to every key tile walked), the same key tiles skipped
# (`variant_bounds`; dk_dv skips the query tiles whose rows see none of its keys,
# `variant_rows`), and the cap's derivative: S = CAP tanh(R / CAP) of the raw scores R gives
# dR = dS (1 - tanh(R / CAP)^2). A row that sees no key (0 in the forward) gets lse = +inf, so
# its P, and every gradient through it, is 0. Every form is one kernel per step, whose
# signature takes every form's inputs: the ragged forms' a0, a1 and the mask m are optional
# (`tile.Tensor[T] | None`: a form without them passes None, which compiles them away), and
# WL, WR, CAP are run-time scalars that the forms without a variant pass and never read.
#
# A variant's fifth element makes it ragged (`ragged_geometry`, the kernels' two auxiliary
# tensors a0, a1; kernels_attention_ragged_backward.py launches them): attention_sink's
# (row r at r + START, START read from a tensor; the head's sink joins each row's lse, so P is
# the forward's) and fmha_varlen's (sequence b's lengths read from q_lens, kv_lens; the rows
# past LQ get lse = +inf, the keys past LK are masked and their dK, dV are 0). What lies past
# LQ or LK is padding that may hold any bits (NaN, Inf): p = 0 does not cancel a NaN in a
# product, so varlen's kernels zero it (`zeroed_past`) in the tiles that cross the lengths
# before a product reads it: the keys and values past LK in every kernel, and in dk_dv, whose
# products sum over the query rows, the rows of q, d_out and delta past LQ; a padded row is
# its own row of the stats' and dq's products, given lse = +inf and dQ = 0. The tiles within
# the lengths run as before, and the other ragged and variant forms compile as before.
#
# A `mask` form (make_attention's (is_bool, batch, heads), no variant with it) takes the user's
# mask m of (1 or B, 1 or H, L, S) as the kernels' m: each recomputed score tile gets what the
# forward added (`user_masked`, the forward's own code: -inf where a bool mask is False, an
# additive one's values / ln 2), so a masked-out key has P = 0 and dS = 0, and a row whose
# every key is masked gets lse = +inf (0 in the forward): zero gradients. The mask itself gets
# no gradient (torch's SDPA gives none to a mask that does not require grad).


@tile.function
def scores(qt, kt, i, j, s_len, TILE_M, TILE_N, qk_scale, causal, even_k):
    """The (TILE_M, TILE_N) scores of query tile i against key tile j (kt: transposed,
    `key_tile_t`), scaled to base 2, with the causal and ragged-key masks (-inf) on the tiles
    that need them: a run-time `if`, as the forward's, so that the tiles wholly below the
    diagonal and before the last key (most of a long sequence's) skip the mask's compares and
    selects."""
    s = tile.mma(qt, kt, tile.zeros((TILE_M, TILE_N), fl.f32))
    s = s * qk_scale
    if causal or not even_k:  # compile-time, then a run-time `if`
        last_key = (j + 1) * TILE_N - 1
        if causal and even_k:  # compile-time: its last key after its first row
            crosses = last_key > i * TILE_M
        elif causal:  # compile-time: or the tile holds keys past the last
            crosses = (last_key > i * TILE_M) or (last_key >= s_len)
        else:
            crosses = last_key >= s_len
        if crosses:
            rows = (i * TILE_M + tile.arange(TILE_M))[:, None]
            keys = j * TILE_N + tile.arange(TILE_N)[None, :]
            s = masked_scores(s, rows, keys, s_len, 0, 0, causal, False, False)
    return s


@tile.function
def variant_scores(
    qt, kt, i, j, s_len, off, scale, wl, wr, cap, TILE_M, TILE_N, causal, left, right, capped,
):  # fmt: skip
    """(S, T) of query tile i against key tile j in a variant: S the base-2 scores as the
    forward computes them (soft-capped when `capped`, then -inf outside each row's window, on
    and past its diagonal when `causal`, and past the last key), T = tanh(R / CAP) of the raw
    scores R = Q K^T * scale for the cap's derivative (S itself without a cap). Row r sits at
    r + off (`variant_bounds`). The masks go only on a tile where some row misses some key (a
    run-time `if`, as `scores`): past its diagonal, outside its window, past the last key."""
    s = tile.mma(qt, kt, tile.zeros((TILE_M, TILE_N), fl.f32))
    if capped:  # compile-time
        t = tile.tanh(s * (scale / cap))
        s = t * (cap * INV_LOG_2)
    else:
        s = s * (scale * INV_LOG_2)
        t = s
    first_pos = i * TILE_M + off  # the tile's first row's position
    last_key = (j + 1) * TILE_N - 1
    crosses = last_key >= s_len
    if causal:  # compile-time: a key after the first row
        crosses = crosses or (last_key > first_pos)
    if right:  # compile-time: a key past the first row's window
        crosses = crosses or (last_key > first_pos + wr)
    if left:  # compile-time: a key before the last row's window
        crosses = crosses or (j * TILE_N < first_pos + TILE_M - 1 - wl)
    if crosses:
        pos = (i * TILE_M + tile.arange(TILE_M))[:, None] + off
        keys = j * TILE_N + tile.arange(TILE_N)[None, :]
        s = masked_scores(s, pos, keys, s_len, wl, wr, causal, left, right)
    return s, t


@tile.function
def recomputed_scores(
    qt, kt, i, j, s_len, off, scale, qk_scale, wl, wr, cap, TILE_M, TILE_N, causal, even_k,
    varied, left, right, capped,
):  # fmt: skip
    """(S, T) of query tile i against key tile j (kt: transposed, `key_tile_t`) as the forward
    computed them: `variant_scores`' when `varied` (compile-time), else `scores`' with
    qk_scale = scale / ln 2 (T = S)."""
    if varied:
        s, t = variant_scores(
            qt, kt, i, j, s_len, off, scale, wl, wr, cap, TILE_M, TILE_N, causal, left, right,
            capped,
        )  # fmt: skip
    else:
        s = scores(qt, kt, i, j, s_len, TILE_M, TILE_N, qk_scale, causal, even_k)
        t = s
    return s, t


def form_scores(causal, even_k, variant, mask):
    """`tile_scores`, the @tile.function that the three kernels of a form (make_attention's
    `causal`, `even_k`, `variant` and `mask`, bound here) recompute their scores with: (S, T)
    of query tile i of head (b, h) against key tile j (kt: transposed, `key_tile_t`) as the
    forward computed them, `recomputed_scores`' and then, in a mask form, the user's mask m
    added to S as the forward added it (`user_masked`)."""
    varied, _, left, right, capped, _, _, _ = _flags(variant)
    masked, mask_bool, mask_b, mask_h = mask_flags(mask, variant)

    @tile.function
    def tile_scores(
        qt, kt, i, j, s_len, off, scale, qk_scale, wl, wr, cap, m, b, h, TILE_M, TILE_N
    ):
        s, t = recomputed_scores(
            qt, kt, i, j, s_len, off, scale, qk_scale, wl, wr, cap, TILE_M, TILE_N, causal,
            even_k, varied, left, right, capped,
        )  # fmt: skip
        if masked:  # compile-time: the user's mask, as the forward applied it
            s = user_masked(s, m, b, h, i, j, TILE_M, TILE_N, mask_bool, mask_b, mask_h)
        return s, t

    return tile_scores


@tile.function
def variant_rows(j, l_len, off, wl, wr, TILE_M, TILE_N, causal, left, right):
    """(first, end): the query tiles first..end - 1 hold every row that sees a key of key tile
    j in a variant (row r at r + off sees keys from r + off - wl (`left`) up to r + off
    (`causal`) or r + off + wr (`right`)); the others are skipped."""
    k0 = j * TILE_N  # the tile's first key
    lo = 0
    if right:
        lo = max(0, k0 - off - wr)
    if causal:
        lo = max(0, k0 - off)
    end = tile.cdiv(l_len, TILE_M)
    if left:  # rows up to k0 + TILE_N - 1 + wl - off
        end = min(end, tile.cdiv(max(0, k0 + TILE_N + wl - off), TILE_M))
    return lo // TILE_M, end


def _flags(variant):
    """(varied, bottom_right, left, right, capped, ragged, sink, aux_dt) of a `variant` (None:
    none): a fifth element (form, aux_dt) makes it `ragged` (`ragged_geometry`), `sink` where
    form is "sink" (else "varlen"), aux_dt the dtype of its first auxiliary tensor (the
    sinks', or i32 for q_lens)."""
    if variant is None:
        return False, False, False, False, False, False, False, None
    form, aux_dt = variant[4] if len(variant) > 4 else (None, None)
    return (True, *variant[:4], form is not None, form == "sink", aux_dt)


def mask_flags(mask, variant):
    """(masked, mask_bool, mask_b, mask_h) of a `mask` form (make_attention's (is_bool, batch,
    heads); None: none); a mask form takes no variant."""
    if mask is None:
        return False, False, False, False
    assert variant is None, "a mask form takes no variant"
    return (True, *mask)


def _optional_dtypes(dt, aux_dt, mask_bool):
    """(a0's dtype, m's dtype) in the kernels' signatures: a form without them passes None
    (the parameters are `| None`), and the dtypes then only need to be dtypes."""
    return aux_dt or fl.i32, fl.bool_ if mask_bool else dt


@tile.function
def ragged_geometry(q, k, a0, a1, b, sink):
    """(s_len, l_len, off) of batch b in a ragged form (compile-time `sink`): with sinks, every
    key and query, row r at r + START (a1 the (1,) i32 start); else varlen's: sequence b's
    LQ = a0[b] queries and LK = a1[b] keys (clamped to the padded L and S), row r at
    r + LK - LQ."""
    s_len = k.shape[2]
    l_len = q.shape[2]
    if sink:
        off = tile.load(a1, (0,), (1,)).item()
    else:
        l_len, s_len, off = sequence_lengths(a0, a1, b, l_len, s_len)
    return s_len, l_len, off


@tile.function
def walked_key_tiles(
    q, k, a0, a1, b, i, s_len, wl, wr, TILE_M, TILE_N, causal, varied, bottom_right, left, right,
    ragged, sink,
):  # fmt: skip
    """(s_len, l_len, first, end, off) of query tile i in the stats and dq kernels: the key
    tiles first..end - 1 it walks (`key_range`'s) and its rows' offset, over s_len keys and
    l_len rows (k's and q's); in a ragged form (compile-time `ragged`), batch b's lengths and
    offset read in the kernel (`ragged_geometry`) and `variant_bounds`' tiles, but none for a
    tile wholly past the l_len rows (varlen's padding)."""
    l_len = q.shape[2]
    if not ragged:
        first, tiles, _, _, off = key_range(
            i, s_len, l_len, wl, wr, TILE_M, TILE_N, causal, varied, bottom_right, left, right
        )
    else:  # compile-time: a ragged form's lengths and offset, read in the kernel
        s_len, l_len, off = ragged_geometry(q, k, a0, a1, b, sink)
        first, tiles, _, _ = variant_bounds(
            i, s_len, off, wl, wr, TILE_M, TILE_N, causal, left, right
        )
        tiles = tiles * min(1, max(0, l_len - i * TILE_M))
    return s_len, l_len, first, tiles, off


@tile.function
def ragged_lse(row_lse, m_i, l_i, a0, h, i, l_len, TILE_M, sink):
    """The rows' log2-sum-exp in a ragged form (compile-time `sink`): with sinks, the sink's
    exp2(sink / ln 2) joins each row's sum (a row then has lse = sink / ln 2 where it sees no key, +inf only where the
    sink is -inf too); varlen: +inf for the rows past l_len (zero gradients)."""
    if sink:
        sk = tile.load(a0, (h,), (1,)).astype(fl.f32).reshape((1, 1)) * INV_LOG_2
        top = max(m_i, sk)
        top = tile.where(top == -math.inf, 0.0, top)
        z = l_i * tile.exp2(m_i - top) + tile.exp2(sk - top)
        row_lse = tile.where(z == 0.0, math.inf, top + tile.log2(z))
    else:
        rows = (i * TILE_M + tile.arange(TILE_M))[:, None]
        row_lse = tile.where(rows >= l_len, math.inf, row_lse)
    return row_lse


@tile.function
def row_delta(out, dout, b, h, i, TILE_M, TILE_D):
    """delta = rowsum(dO * O) of rows i * TILE_M.. of head (b, h), as a (1, 1, TILE_M) tile."""
    o = head_rows(out, b, h, i, TILE_M, TILE_D).astype(fl.f32)
    do = head_rows(dout, b, h, i, TILE_M, TILE_D).astype(fl.f32)
    return tile.sum(o * do, axis=1).reshape((1, 1, TILE_M))


def make_attention_delta(dt, zero_dq=False, **hints):
    """delta of (B, H, L), f32, alone: the stats step where the forward kept lse (training:
    make_attention's keep_lse), so that no score is recomputed for it. `zero_dq`: the atomic
    dQ's form, which also zeroes the f32 dq_acc (B, H, L, D) the adds go into, tile by tile
    beside its rows (no fill launch of its own); delta is then written as (B, H, L, 1) in
    (1, 1, TILE_M, LSE_COLUMNS) tiles, every column the row's delta (the store clips the
    columns past 1), so that its tiles number as dq_acc's (kernels_attention.LSE_COLUMNS)."""
    if not zero_dq:

        @tile.kernel(**hints)
        def attention_delta(
            delta: tile.Part[fl.f32],
            out: tile.Tensor[dt],
            dout: tile.Tensor[dt],
            TILE_D: tile.Const[int],
        ):
            _, _, TILE_M = delta.shape
            b, h, i = delta.index
            delta.store(row_delta(out, dout, b, h, i, TILE_M, TILE_D))

        return attention_delta

    @tile.kernel(**hints)
    def attention_delta(
        delta: tile.Part[fl.f32],
        dq_acc: tile.Part[fl.f32],
        out: tile.Tensor[dt],
        dout: tile.Tensor[dt],
    ):
        _, _, TILE_M, cols = delta.shape
        _, _, _, TILE_D = dq_acc.shape
        b, h, i, _ = delta.index
        rows = row_delta(out, dout, b, h, i, TILE_M, TILE_D).reshape((TILE_M, 1))
        delta.store(tile.broadcast_to(rows, (TILE_M, cols)).reshape((1, 1, TILE_M, cols)))
        dq_acc.store(tile.zeros((1, 1, TILE_M, TILE_D), fl.f32))

    return attention_delta


def make_attention_stats(dt, causal, even_k, variant=None, mask=None, **hints):
    """lse and delta of (B, H, L), f32: see the section's comment."""
    varied, bottom_right, left, right, _, ragged, sink, aux_dt = _flags(variant)
    masked, mask_bool, _, _ = mask_flags(mask, variant)
    tile_scores = form_scores(causal, even_k, variant, mask)
    guarded = varied or masked  # a row may see no key
    varlen = ragged and not sink  # padding past LQ and LK (see the section's comment)

    @tile.function
    def stats(lse, delta, q, k, out, dout, a0, a1, m, scale, wl, wr, cap, TILE_N, TILE_D, GROUP):
        _, _, TILE_M = lse.shape
        b, h, i = lse.index
        s_len = k.shape[2]
        qt = head_rows(q, b, h, i, TILE_M, TILE_D)
        m_i = tile.full((TILE_M, 1), -math.inf, fl.f32)
        l_i = tile.zeros((TILE_M, 1), fl.f32)
        s_len, l_len, first, tiles, off = walked_key_tiles(
            q, k, a0, a1, b, i, s_len, wl, wr, TILE_M, TILE_N, causal, varied, bottom_right, left,
            right, ragged, sink,
        )  # fmt: skip
        for j in range(first, tiles):
            kt = padded_key_tile_t(k, b, h // GROUP, j, TILE_N, TILE_D, s_len, varlen)
            s, _t = tile_scores(
                qt, kt, i, j, s_len, off, scale, scale * INV_LOG_2, wl, wr, cap, m, b, h,
                TILE_M, TILE_N,
            )  # fmt: skip
            m_ij = max(m_i, tile.max(s, axis=-1, keepdims=True))
            if guarded:  # noqa: SIM108  (compile-time; a row with no key yet keeps max -inf, sum 0)
                m_ref = tile.where(m_ij == -math.inf, 0.0, m_ij)
            else:
                m_ref = m_ij
            l_i = l_i * tile.exp2(m_i - m_ref) + tile.sum(
                tile.exp2(s - m_ref), axis=-1, keepdims=True
            )
            m_i = m_ij
        row_lse = online_lse(m_i, l_i, guarded)  # the forward's, recomputed
        if ragged:  # compile-time
            row_lse = ragged_lse(row_lse, m_i, l_i, a0, h, i, l_len, TILE_M, sink)
        lse.store(row_lse.reshape((1, 1, TILE_M)))
        delta.store(row_delta(out, dout, b, h, i, TILE_M, TILE_D))

    aux_t, mdt = _optional_dtypes(dt, aux_dt, mask_bool)

    @tile.kernel(**hints)
    def attention_stats(
        lse: tile.Part[fl.f32],
        delta: tile.Part[fl.f32],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        out: tile.Tensor[dt],
        dout: tile.Tensor[dt],
        a0: tile.Tensor[aux_t] | None,
        a1: tile.Tensor[fl.i32] | None,
        m: tile.Tensor[mdt] | None,
        scale: fl.f32,
        wl: fl.i32,
        wr: fl.i32,
        cap: fl.f32,
        TILE_N: tile.Const[int],
        TILE_D: tile.Const[int],
        GROUP: tile.Const[int],
    ):
        stats(lse, delta, q, k, out, dout, a0, a1, m, scale, wl, wr, cap, TILE_N, TILE_D, GROUP)

    return attention_stats


def make_attention_dkdv(dt, causal, even_k, variant=None, mask=None, atomic_dq=False, **hints):
    """dK and dV of (B, H_kv, S, D): see the section's comment. `atomic_dq`: the kernel also
    adds each (query tile, key tile) pair's dS K into an f32 (B, H, L, D) dq_acc, a tiled
    atomic add (FlashAttention-2's dQ; no dq kernel then: `finish_dq` scales it into dq)."""
    varied, bottom_right, left, right, capped, ragged, sink, aux_dt = _flags(variant)
    _, mask_bool, _, _ = mask_flags(mask, variant)
    tile_scores = form_scores(causal, even_k, variant, mask)
    varlen = ragged and not sink  # padding past LQ and LK (see the section's comment)

    @tile.function
    def dkdv(
        dk, dv, dq_acc, q, k, v, dout, lse, delta, a0, a1, m, scale, wl, wr, cap, TILE_M, GROUP
    ):
        _, _, TILE_N, TILE_D = dk.shape
        b, kv_h, j, _ = dk.index
        s_len = k.shape[2]
        l_len = q.shape[2]  # read only by varlen's padding (the dead-op pass drops it elsewhere)
        off = 0
        qk_scale = scale * INV_LOG_2  # a variant leaves it unused (the dead-op pass drops it)
        if ragged:  # compile-time: a ragged form's lengths and offset
            s_len, l_len, off = ragged_geometry(q, k, a0, a1, b, sink)
            first, end = variant_rows(j, l_len, off, wl, wr, TILE_M, TILE_N, causal, left, right)
            end = end * min(1, max(0, s_len - j * TILE_N))  # a tile wholly past LK: no row
        elif varied:  # compile-time: query tiles whose rows see no key here are skipped
            if bottom_right:
                off = s_len - q.shape[2]
            first, end = variant_rows(
                j, q.shape[2], off, wl, wr, TILE_M, TILE_N, causal, left, right
            )
        acc_k = tile.zeros((TILE_N, TILE_D), fl.f32)
        acc_v = tile.zeros((TILE_N, TILE_D), fl.f32)
        # this program's key and value tiles, loaded once for every query tile it walks
        # both loaded before either is zeroed, as the Tile IR has them (`padded_key_tile_t`
        # would zero K before loading V)
        kt = key_tile_t(k, b, kv_h, j, TILE_N, TILE_D)
        vt = key_tile_t(v, b, kv_h, j, TILE_N, TILE_D)
        if varlen:  # compile-time
            kt = zeroed_past(kt, j * TILE_N, s_len, TILE_N, True)
            vt = zeroed_past(vt, j * TILE_N, s_len, TILE_N, True)
        if atomic_dq:  # compile-time: K as dQ += dS K takes it
            kn = padded_rows(k, b, kv_h, j, TILE_N, TILE_D, s_len, varlen)
        if not varied:
            first = (j * TILE_N) // TILE_M if causal else 0  # earlier query tiles see no key here
        for g in range(GROUP):
            h = kv_h * GROUP + g
            for i in range(first, end if varied else tile.cdiv(q.shape[2], TILE_M)):
                qt = padded_rows(q, b, h, i, TILE_M, TILE_D, l_len, varlen)
                s, t = tile_scores(
                    qt, kt, i, j, s_len, off, scale, qk_scale, wl, wr, cap, m, b, h, TILE_M,
                    TILE_N,
                )  # fmt: skip
                p = tile.exp2(s - row_stat(lse, b, h, i, TILE_M))  # (TILE_M, TILE_N)
                do = padded_rows(dout, b, h, i, TILE_M, TILE_D, l_len, varlen)
                acc_v = tile.mma(tile.transpose(p.astype(dt)), do, acc_v)
                di = row_stat(delta, b, h, i, TILE_M)
                if varlen:  # compile-time
                    di = zeroed_past(di, i * TILE_M, l_len, TILE_M, False)
                ds = score_grads(p, do, vt, di, TILE_M, TILE_N)
                if capped:  # compile-time: through the cap, dR = dS (1 - T^2)
                    ds = ds * (1.0 - t * t)
                acc_k = tile.mma(tile.transpose(ds.astype(dt)), qt, acc_k)
                if atomic_dq:  # compile-time: rows past L and columns past D are dropped
                    part = tile.mma(ds.astype(dt), kn, tile.zeros((TILE_M, TILE_D), fl.f32))
                    part = part.reshape((1, 1, TILE_M, TILE_D))
                    tile.atomic_store_add(dq_acc, (b, h, i, 0), part)  # one bulk (TMA) add
        dk.store((acc_k * scale).astype(dt).reshape((1, 1, TILE_N, TILE_D)))
        dv.store(acc_v.astype(dt).reshape((1, 1, TILE_N, TILE_D)))

    aux_t, mdt = _optional_dtypes(dt, aux_dt, mask_bool)

    @tile.kernel(**hints)
    def attention_dkdv(
        dk: tile.Part[dt],
        dv: tile.Part[dt],
        dq_acc: tile.Atomic[fl.f32] | None,
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        dout: tile.Tensor[dt],
        lse: tile.Tensor[fl.f32],
        delta: tile.Tensor[fl.f32],
        a0: tile.Tensor[aux_t] | None,
        a1: tile.Tensor[fl.i32] | None,
        m: tile.Tensor[mdt] | None,
        scale: fl.f32,
        wl: fl.i32,
        wr: fl.i32,
        cap: fl.f32,
        TILE_M: tile.Const[int],
        GROUP: tile.Const[int],
    ):
        dkdv(
            dk, dv, dq_acc, q, k, v, dout, lse, delta, a0, a1, m, scale, wl, wr, cap, TILE_M,
            GROUP,
        )  # fmt: skip

    return attention_dkdv


def make_finish_dq(dt, **hints):
    """dq = dq_acc * scale in q's dtype: the atomic form's last step (`atomic_dq`)."""

    @tile.kernel(**hints)
    def finish_dq(dq: tile.Part[dt], dq_acc: tile.Tensor[fl.f32], scale: fl.f32):
        dq.store((tile.load_like(dq_acc, dq) * scale).astype(dt))

    return finish_dq


def make_attention_dq(dt, causal, even_k, variant=None, mask=None, **hints):
    """dQ of (B, H, L, D): see the section's comment."""
    varied, bottom_right, left, right, capped, ragged, sink, aux_dt = _flags(variant)
    _, mask_bool, _, _ = mask_flags(mask, variant)
    tile_scores = form_scores(causal, even_k, variant, mask)
    varlen = ragged and not sink  # padding past LQ and LK (see the section's comment)

    @tile.function
    def dq_rows(dq, q, k, v, dout, lse, delta, a0, a1, m, scale, wl, wr, cap, TILE_N, GROUP):
        _, _, TILE_M, TILE_D = dq.shape
        b, h, i, _ = dq.index
        kv_h = h // GROUP
        s_len = k.shape[2]
        qt, do = head_rows(q, b, h, i, TILE_M, TILE_D), head_rows(dout, b, h, i, TILE_M, TILE_D)
        li, di = row_stat(lse, b, h, i, TILE_M), row_stat(delta, b, h, i, TILE_M)
        acc = tile.zeros((TILE_M, TILE_D), fl.f32)
        s_len, l_len, first, tiles, off = walked_key_tiles(
            q, k, a0, a1, b, i, s_len, wl, wr, TILE_M, TILE_N, causal, varied, bottom_right, left,
            right, ragged, sink,
        )  # fmt: skip
        for j in range(first, tiles):
            k_t = padded_key_tile_t(k, b, kv_h, j, TILE_N, TILE_D, s_len, varlen)
            s, t = tile_scores(
                qt, k_t, i, j, s_len, off, scale, scale * INV_LOG_2, wl, wr, cap, m, b, h,
                TILE_M, TILE_N,
            )  # fmt: skip
            vt = padded_key_tile_t(v, b, kv_h, j, TILE_N, TILE_D, s_len, varlen)
            ds = score_grads(tile.exp2(s - li), do, vt, di, TILE_M, TILE_N)
            if capped:  # compile-time: through the cap, dR = dS (1 - T^2)
                ds = ds * (1.0 - t * t)
            # K as dQ += dS K takes it
            kt = padded_rows(k, b, kv_h, j, TILE_N, TILE_D, s_len, varlen)
            acc = tile.mma(ds.astype(dt), kt, acc)
        if varlen:  # compile-time: a padded row (its own row of each product) gets dQ = 0
            acc = zeroed_past(acc, i * TILE_M, l_len, TILE_M, False)
        dq.store((acc * scale).astype(dt).reshape((1, 1, TILE_M, TILE_D)))

    aux_t, mdt = _optional_dtypes(dt, aux_dt, mask_bool)

    @tile.kernel(**hints)
    def attention_dq(
        dq: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        dout: tile.Tensor[dt],
        lse: tile.Tensor[fl.f32],
        delta: tile.Tensor[fl.f32],
        a0: tile.Tensor[aux_t] | None,
        a1: tile.Tensor[fl.i32] | None,
        m: tile.Tensor[mdt] | None,
        scale: fl.f32,
        wl: fl.i32,
        wr: fl.i32,
        cap: fl.f32,
        TILE_N: tile.Const[int],
        GROUP: tile.Const[int],
    ):
        dq_rows(dq, q, k, v, dout, lse, delta, a0, a1, m, scale, wl, wr, cap, TILE_N, GROUP)

    return attention_dq
