"""The Tile kernel behind `fearless.ops.scaled_dot_product_attention`, and its autotuned launch.

`make_attention` is flash attention with the online softmax in base 2, as cuTile Python's
AttentionFMHA sample computes it (examples/cutile_samples.py has our port of the sample): the
block of Out's (1, 1, TILE_M, TILE_D) tile (b, h, i) takes Q's rows i * TILE_M.., walks K and V
in tiles of TILE_N keys (K loaded transposed with `order=`), keeps the running max, sum and
f32 accumulator, and masks keys past the end (`even_k` False) and, when `causal`, keys after
the query (torch's `is_causal`: query i sees keys 0..i). Its `variant` flags (TileGym's fmha,
swa_attention and gemma_attention) move the diagonal bottom-right, add a window and a logit
soft cap, and skip the key tiles outside every row's window; without them the kernels are
those of before (issue 35 compared their bytecode). Grouped-query attention: query head h
reads KV head h // GROUP. TILE_D is D rounded up to a power of two: the padded columns load as
zeros (they add nothing to Q K^T) and are dropped at the store.

Its flash-attention helpers (the online softmax, the score masks, the row and key-tile loads)
are shared by every attention kernel; the decode step's split-KV kernels and their launches
are ops/kernels_attention_decode.py's.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from ._io import heads_major, view
from .kernels_rows import kernel_of, next_pow2, size_class

INV_LOG_2 = 1.0 / math.log(2.0)


@tile.function
def head_rows(t, b, h, i, TILE_M, TILE_D):
    """Rows i * TILE_M.. of head (b, h) of a (B, H, L, D) tensor, as a (TILE_M, TILE_D) tile."""
    return tile.load(t, (b, h, i, 0), (1, 1, TILE_M, TILE_D)).reshape((TILE_M, TILE_D))


@tile.function
def seq_rows(t, b, i, h, TILE_M, TILE_D):
    """Rows i * TILE_M.. of head h of a (B, L, H, D) tensor, as a (TILE_M, TILE_D) tile."""
    return tile.load(t, (b, i, h, 0), (1, TILE_M, 1, TILE_D)).reshape((TILE_M, TILE_D))


@tile.function
def kv_rows(t, b, kv_h, j, TILE_N, TILE_D, seq_major):
    """Key tile j of KV head kv_h of k or v as a (TILE_N, TILE_D) tile: `seq_rows` of a
    (B, S, H_kv, D) tensor when `seq_major` (compile-time), else `head_rows` of a
    (B, H_kv, S, D) one."""
    if seq_major:
        rows = seq_rows(t, b, j, kv_h, TILE_N, TILE_D)
    else:
        rows = head_rows(t, b, kv_h, j, TILE_N, TILE_D)
    return rows


@tile.function
def tile_positions(i, TILE_M, TILE_N):
    """(rows, cols) of query tile i against a key tile: the tile's query rows i * TILE_M.. as a
    (TILE_M, 1) column and the key offsets 0..TILE_N - 1 within a key tile as a (1, TILE_N) row."""
    rows = (i * TILE_M + tile.arange(TILE_M))[:, None]
    cols = tile.arange(TILE_N)[None, :]
    return rows, cols


@tile.function
def online_start(ROWS, TILE_D, keys_major):
    """The online softmax's running max (-inf), sum (0) and f32 accumulator (0) of ROWS query
    rows: (ROWS, 1), (ROWS, 1), (ROWS, TILE_D); `keys_major` (the decodes', compile-time)
    transposed: (1, ROWS), (1, ROWS), (TILE_D, ROWS)."""
    if keys_major:
        m_i = tile.full((1, ROWS), -math.inf, fl.f32)
        l_i = tile.zeros((1, ROWS), fl.f32)
        acc = tile.zeros((TILE_D, ROWS), fl.f32)
    else:
        m_i = tile.full((ROWS, 1), -math.inf, fl.f32)
        l_i = tile.zeros((ROWS, 1), fl.f32)
        acc = tile.zeros((ROWS, TILE_D), fl.f32)
    return m_i, l_i, acc


@tile.function
def online_weights(s, m_i, axis, guarded):
    """(m_ij, p, alpha) of one key tile of the online softmax: the new running max of scores
    `s` (base 2, masked) along the key axis `axis`, their probabilities against it and the
    running sum's rescale. `guarded` (compile-time): a row may have no key yet (its max stays
    -inf and it takes nothing, instead of exp2(-inf - -inf) = NaN)."""
    m_ij = max(m_i, tile.max(s, axis=axis, keepdims=True))
    if guarded:  # noqa: SIM108
        m_ref = tile.where(m_ij == -math.inf, 0.0, m_ij)
    else:
        m_ref = m_ij
    p = tile.exp2(s - m_ref, flush_to_zero=True)
    alpha = tile.exp2(m_i - m_ref, flush_to_zero=True)
    return m_ij, p, alpha


@tile.function
def online_fold(p, alpha, l_i, acc, vt, dt, keys_major):
    """(acc, l): the running sum and accumulator with one key tile's probabilities `p` and
    values `vt` (TILE_N, D) folded in; `keys_major` (compile-time): p is (TILE_N, rows) and
    acc (D, rows), acc += V^T P, else acc += P V."""
    if keys_major:
        acc = tile.mma(tile.transpose(vt), p.astype(dt), acc * alpha)
        l_i = l_i * alpha + tile.sum(p, axis=0, keepdims=True)
    else:
        acc = tile.mma(p.astype(dt), vt, acc * alpha)
        l_i = l_i * alpha + tile.sum(p, axis=-1, keepdims=True)
    return acc, l_i


@tile.function
def online_step(s, m_i, l_i, acc, v, b, kv_h, j, TILE_N, TILE_D, dt, guarded, seq_major):
    """One key tile of the online softmax: scores `s` (base 2, masked), the running max, sum and
    f32 accumulator updated with V's tile j; `guarded` as `online_weights`; `seq_major`
    (compile-time): v is (B, S, H, D), else (B, H, S, D)."""
    m_ij, p, alpha = online_weights(s, m_i, -1, guarded)
    if seq_major:
        vt = tile.load(v, (b, j, kv_h, 0), (1, TILE_N, 1, TILE_D), latency=4)
    else:
        vt = tile.load(v, (b, kv_h, j, 0), (1, 1, TILE_N, TILE_D), latency=4)
    acc = tile.mma(p.astype(dt), vt.reshape((TILE_N, TILE_D)), acc * alpha)
    return m_ij, l_i * alpha + tile.sum(p, axis=-1, keepdims=True), acc


@tile.function
def zeroed_past(t, first, n, TILE, along_cols):
    """`t`, a tile of the TILE positions first.. along its rows (along its columns where
    `along_cols`, compile-time: a key tile loaded transposed), with those at or past n zeroed
    on the one tile that crosses n (a run-time `if`: a tile wholly below n comes back as it
    was loaded). What lies past a sequence's length is padding whose bits may be NaN or Inf
    (torch.empty memory, a serving cache's unused rows): a score masked to -inf gives p = 0,
    but 0 * NaN is NaN in the mma that follows, so a padded key, value or row is zeroed before
    any product reads it."""
    if first + TILE > n:
        pos = first + tile.arange(TILE)
        if along_cols:  # noqa: SIM108  (compile-time)
            keep = pos[None, :] < n
        else:
            keep = pos[:, None] < n
        t = tile.where(keep, t, 0.0)
    return t


@tile.function
def normalised(acc, l_i, guarded):
    """The accumulator divided by the running sum; `guarded` (compile-time): a row whose sum is
    0 (it saw no key) gives 0."""
    acc = tile.truediv(acc, l_i, rounding_mode=tile.RoundingMode.APPROX, flush_to_zero=True)
    if guarded:
        acc = tile.where(l_i == 0.0, 0.0, acc)
    return acc


@tile.function
def rows_normalised(acc, l_i, rows, lq):
    """The accumulator divided by the running sum in the rows `rows` (a column of row numbers)
    below lq that saw a key, 0 in the others: a padded batch's rows past its sequence's LQ
    queries, and rows that saw no key."""
    keep_row = (rows < lq) & (l_i > 0.0)
    den = tile.where(keep_row, l_i, 1.0)
    acc = tile.truediv(acc, den, rounding_mode=tile.RoundingMode.APPROX, flush_to_zero=True)
    return tile.where(keep_row, acc, 0.0)


@tile.function
def sequence_lengths(q_lens, kv_lens, b, l_pad, s_pad):
    """(LQ, LK, off) of sequence b of a padded batch: its query and key lengths q_lens[b] and
    kv_lens[b] ((B,) i32 tensors) clamped to the padded query and key axes' sizes l_pad and
    s_pad (a length past the padding never reads past the tensor), and its rows' offset
    LK - LQ (row r sits at r + LK - LQ, bottom-right aligned)."""
    lq = min(max(tile.load(q_lens, (b,), (1,)).item(), 0), l_pad)
    lk = min(max(tile.load(kv_lens, (b,), (1,)).item(), 0), s_pad)
    return lq, lk, lk - lq


@tile.function
def online_lse(m_i, l_i, guarded):
    """The rows' log2-sum-exp from the online softmax's running max and sum (what the backward
    takes as lse); `guarded` (compile-time): a row that saw no key gets +inf, so that its
    P = exp2(S - lse) is 0."""
    row_lse = m_i + tile.log2(l_i)
    if guarded:
        row_lse = tile.where(l_i == 0.0, math.inf, row_lse)
    return row_lse


@tile.function
def key_scores(qt, k, b, kv_h, j, TILE_M, TILE_N, TILE_D, seq_major):
    """The f32 (TILE_M, TILE_N) product of query rows `qt` and key tile j of KV head kv_h, K
    loaded transposed; `seq_major` (compile-time): k is (B, S, H, D), else (B, H, S, D)."""
    if seq_major:
        kt = tile.load(k, (b, 0, kv_h, j), (1, TILE_D, 1, TILE_N), order=(0, 3, 2, 1), latency=2)
    else:
        kt = tile.load(k, (b, kv_h, 0, j), (1, 1, TILE_D, TILE_N), order=(0, 1, 3, 2), latency=2)
    return tile.mma(qt, kt.reshape((TILE_D, TILE_N)), tile.zeros((TILE_M, TILE_N), fl.f32))


@tile.function
def masked_scores(s, pos, keys, s_len, wl, wr, causal, left, right):
    """Scores `s` with -inf where key `keys` (a row of key positions) is past `s_len` or, per
    compile-time flag, after the row's position `pos` (`causal`), before pos - wl (`left`) or
    after pos + wr (`right`)."""
    keep = seen_keys(keys < s_len, pos, keys, wl, wr, causal, left, right)
    return tile.where(keep, s, -math.inf)


@tile.function
def variant_masked(s, j, rows, cols, off, s_len, wl, wr, clean_from, mask_from, TILE_N, causal,
                   left, right):  # fmt: skip
    """Scores `s` of key tile j with `masked_scores`' -inf on a tile that holds a key some row
    does not see (before clean_from or from mask_from on, `variant_bounds`'; a run-time `if`,
    so that the other tiles skip the compares and selects): row r of `rows` (a column) sits at
    r + off, the tile's keys are j * TILE_N + `cols` (a row)."""
    if (j >= mask_from) or (j < clean_from):
        pos = rows + off
        keys = j * TILE_N + cols
        s = masked_scores(s, pos, keys, s_len, wl, wr, causal, left, right)
    return s


@tile.function
def score_tile(t, b, h, i, j, TILE_M, TILE_N, has_b, has_h):
    """The (TILE_M, TILE_N) tile of query tile i and key tile j of head (b, h) in a per-score
    tensor `t` of (1 or B, 1 or H, L, S) (a mask or a bias); `has_b` / `has_h` (compile-time):
    it has the batch / heads axis (else it broadcasts over it)."""
    tb = b if has_b else 0
    th = h if has_h else 0
    return tile.load(t, (tb, th, i, j), (1, 1, TILE_M, TILE_N)).reshape((TILE_M, TILE_N))


@tile.function
def user_masked(s, m, b, h, i, j, TILE_M, TILE_N, mask_bool, mask_b, mask_h):
    """Base-2 scores `s` of query tile i (head (b, h)) against key tile j with the user's mask
    `m` of (1 or B, 1 or H, L, S) applied, per compile-time flag: `mask_bool` -inf where it is
    False, else its values added (scaled to base 2, 1 / ln 2); `mask_b` / `mask_h`: it has
    the batch / heads axis (else it broadcasts over it)."""
    mt = score_tile(m, b, h, i, j, TILE_M, TILE_N, mask_b, mask_h)
    if mask_bool:  # noqa: SIM108
        s = tile.where(mt, s, -math.inf)
    else:
        s = s + mt.astype(fl.f32) * INV_LOG_2
    return s


@tile.function
def seen_keys(keep, pos, keys, wl, wr, causal, left, right):
    """`keep` narrowed to the keys `keys` a row at `pos` sees, per compile-time flag: up to pos
    (`causal`), from pos - wl (`left`), up to pos + wr (`right`)."""
    if causal:
        keep = keep & (pos >= keys)
    if left:
        keep = keep & (keys >= pos - wl)
    if right:
        keep = keep & (keys <= pos + wr)
    return keep


@tile.function
def base2_scores(s, scale, qk_scale, cap, capped):
    """Raw scores `s` (Q K^T) in base 2: scaled by qk_scale (scale / ln 2), or, `capped`
    (compile-time), soft-capped as CAP * tanh(s * scale / CAP) / ln 2."""
    if capped:  # noqa: SIM108
        s = tile.tanh(s * (scale / cap)) * (cap * INV_LOG_2)
    else:
        s = s * qk_scale
    return s


@tile.function
def variant_bounds(i, s_len, off, wl, wr, TILE_M, TILE_N, causal, left, right):
    """(first, end, clean_from, mask_from) of query tile i in a variant: it walks key tiles
    first..end - 1 (the tiles wholly outside its window or past its diagonal are skipped); tiles
    before clean_from or from mask_from on hold a key some row does not see. Query row r sits at
    r + off; it sees keys from r + off - wl (`left`) up to r + off (`causal`) or r + off + wr
    (`right`)."""
    r0 = i * TILE_M + off  # the tile's first row's position
    r1 = r0 + TILE_M - 1  # its last's
    hi = s_len
    mask_from = s_len // TILE_N
    if causal:
        hi = min(hi, max(0, r1 + 1))
        mask_from = min(mask_from, max(0, r0 + 1) // TILE_N)
    if right:
        hi = min(hi, max(0, r1 + wr + 1))
        mask_from = min(mask_from, max(0, r0 + wr + 1) // TILE_N)
    first = 0
    clean_from = 0
    if left:
        first = max(0, r0 - wl) // TILE_N
        clean_from = tile.cdiv(max(0, r1 - wl), TILE_N)
    return first, tile.cdiv(hi, TILE_N), clean_from, mask_from


@tile.function
def key_tiles(i, s_len, TILE_M, TILE_N, causal):
    """How many key tiles query tile i sees (compile-time `causal`)."""
    last = min((i + 1) * TILE_M, s_len) if causal else s_len
    return tile.cdiv(last, TILE_N)


@tile.function
def key_range(i, s_len, l_len, wl, wr, TILE_M, TILE_N, causal, varied, bottom_right, left, right):
    """(first, end, clean_from, mask_from, off) of query tile i of L = l_len rows over s_len
    keys: `variant_bounds`' when `varied` (compile-time; row r at r + off, off = S - L when
    `bottom_right`), else the tiles 0..end - 1 up to its last row's diagonal (`causal`) or the
    last key, those from mask_from on holding a key some row does not see."""
    first = 0
    clean_from = 0
    off = 0
    if varied:  # compile-time: key tiles outside every row's window are skipped
        if bottom_right:
            off = s_len - l_len
        first, tiles, clean_from, mask_from = variant_bounds(
            i, s_len, off, wl, wr, TILE_M, TILE_N, causal, left, right
        )
    else:  # causal: key tiles past the block's last query are skipped
        tiles = key_tiles(i, s_len, TILE_M, TILE_N, causal)
        mask_from = min(i * TILE_M // TILE_N, s_len // TILE_N) if causal else s_len // TILE_N
    return first, tiles, clean_from, mask_from, off


def make_attention(dt, causal, even_k, mask=None, variant=None, layout=(False, False), **hints):
    """softmax(Q K^T * scale + mask) V for q, k, v of (B, H, L or S, D). `layout` (q_seq,
    kv_seq), compile-time: q and out are (B, L, H, D) where q_seq, k and v (B, S, H_kv, D)
    where kv_seq (Hugging Face's and flash-attn's layout, whose (B, H, L, D) tensors are
    transposed views of those: the kernel reads and writes them in place). `mask`: None, or
    (is_bool, batch, heads) for a mask tensor of (1 or B, 1 or H, L, S): bool (False drops the
    key, as torch) or float (added to the scores); batch / heads: whether it has those axes
    (else it broadcasts over them). `variant` (TileGym's fmha, swa_attention and
    gemma_attention, ops/attention_variants.py; no `mask` with it): None, or (bottom_right,
    left, right, softcap), each a compile-time bool: bottom_right: query i sits at i + S - L
    (the causal diagonal and the window bottom-right aligned, as flash-attn); left / right: it
    sees keys from its position - WL / up to its position + WR (run-time WL, WR); softcap:
    scores = CAP * tanh(scores / CAP) before the masks (run-time CAP). A row that sees no key
    gives 0. The kernel's `lse` (an optional output: None compiles it away): each row's
    log2-sum-exp of its base-2 scores (B, H, L) f32 (+inf for a row that sees no key), the
    backward's `lse` (training: the backward then skips recomputing it,
    kernels_attention_backward.py); q and out (B, H, L, D) then."""
    causal_or_ragged = causal or not even_k
    masked = mask is not None
    mask_bool, mask_b, mask_h = mask if masked else (False, False, False)
    varied = variant is not None
    bottom_right, left, right, capped = variant if varied else (False, False, False, False)
    guarded = masked or varied  # a row may see no key
    q_seq, kv_seq = layout

    @tile.function
    def attend(out, lse, q, k, v, m, scale, wl, wr, cap, TILE_N, GROUP):
        if q_seq:  # compile-time
            _, TILE_M, _, TILE_D = out.shape
            b, i, h, _ = out.index
        else:
            _, _, TILE_M, TILE_D = out.shape
            b, h, i, _ = out.index
        kv_h = h // GROUP
        qk_scale = scale * INV_LOG_2
        rows, cols = tile_positions(i, TILE_M, TILE_N)
        m_i, l_i, acc = online_start(TILE_M, TILE_D, False)
        if q_seq:  # compile-time
            qt = seq_rows(q, b, i, h, TILE_M, TILE_D)
        else:
            qt = head_rows(q, b, h, i, TILE_M, TILE_D)
        s_len = k.shape[1] if kv_seq else k.shape[2]  # compile-time choices
        l_len = q.shape[1] if q_seq else q.shape[2]
        first, tiles, clean_from, mask_from, off = key_range(
            i, s_len, l_len, wl, wr, TILE_M, TILE_N, causal, varied, bottom_right, left, right
        )
        for j in range(first, tiles):
            qk = key_scores(qt, k, b, kv_h, j, TILE_M, TILE_N, TILE_D, kv_seq)
            qk = base2_scores(qk, scale, qk_scale, cap, capped)
            if masked:  # compile-time: the user's mask, (1 or B, 1 or H, L, S)
                qk = user_masked(qk, m, b, h, i, j, TILE_M, TILE_N, mask_bool, mask_b, mask_h)
            if varied:  # compile-time, then a run-time `if`
                qk = variant_masked(qk, j, rows, cols, off, s_len, wl, wr, clean_from, mask_from,
                                    TILE_N, causal, left, right)  # fmt: skip
            elif causal_or_ragged:  # noqa: SIM102  (compile-time, then a run-time `if`)
                if j >= mask_from:
                    keys = j * TILE_N + cols
                    keep = tile.full((TILE_M, TILE_N), True, fl.bool_)
                    if not even_k:
                        keep = keep & (keys < s_len)
                    keep = seen_keys(keep, rows, keys, None, None, causal, False, False)
                    qk = tile.where(keep, qk, -math.inf)
            m_i, l_i, acc = online_step(
                qk, m_i, l_i, acc, v, b, kv_h, j, TILE_N, TILE_D, dt, guarded, kv_seq
            )
        # guarded: a row that sees no key is 0, as torch's SDPA (2.5 and later)
        acc = normalised(acc, l_i, guarded)
        if q_seq:  # compile-time
            out.store(acc.reshape((1, TILE_M, 1, TILE_D)).astype(dt))
        else:
            out.store(acc.reshape((1, 1, TILE_M, TILE_D)).astype(dt))
        if lse is not None:  # compile-time: the rows' lse, in every column (LSE_COLUMNS)
            _, _, _, cols = lse.shape
            row_lse = tile.broadcast_to(online_lse(m_i, l_i, guarded), (TILE_M, cols))
            lse.store(row_lse.reshape((1, 1, TILE_M, cols)))

    mdt = fl.bool_ if mask_bool else dt

    # one kernel for every form: a form without a mask passes None for m and inference None
    # for lse (both compiled away), and the forms without a variant pass WL, WR, CAP and never
    # read them (the plain kernel's Tile IR is that of before apart from those three
    # parameters; tests/test_ops_attention_variants guards it)
    @tile.kernel(**hints)
    def attention(
        out: tile.Part[dt],
        lse: tile.Part[fl.f32] | None,
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        m: tile.Tensor[mdt] | None,
        scale: fl.f32,
        wl: fl.i32,
        wr: fl.i32,
        cap: fl.f32,
        TILE_N: tile.Const[int],
        GROUP: tile.Const[int],
    ):
        attend(out, lse, q, k, v, m, scale, wl, wr, cap, TILE_N, GROUP)

    return attention


def _cfg(tile_m, tile_n, occupancy, num_worker_warps=None):
    return dict(
        tile_m=tile_m, tile_n=tile_n, occupancy=occupancy, num_worker_warps=num_worker_warps
    )


# cuTile's AttentionFMHA sample runs (128, 128) tiles at occupancy 2, TileGym's fmha also
# (256, 128) at occupancy 1 and 2 on sm90+; smaller tiles for short sequences and large heads.
# 8 worker warps: two warp groups sharing a 128- or 256-row query tile, as FlashAttention-3's
# two consumer warp groups do on Hopper.
ATTENTION_CONFIGS = [
    _cfg(128, 128, 2),
    _cfg(256, 128, 1),
    _cfg(256, 128, 2),
    _cfg(128, 64, 2),
    _cfg(64, 64, 4),
    _cfg(64, 128, 2),
    _cfg(128, 128, 1),
    _cfg(128, 128, 1, 8),
    _cfg(256, 128, 1, 8),
]


def mask_form(mask):
    """`make_attention`'s `mask` of a mask fl.Tensor of (1 or B, 1 or H, L, S): (is_bool,
    batch, heads), batch / heads whether it has that axis (more than one)."""
    return mask.dtype == fl.bool_, mask.shape[0] > 1, mask.shape[1] > 1


def _attention_key(
    q, k, v, mask, out, scale, causal, group, lse=None, layout=(False, False), **__
):  # fmt: skip
    """Batch x heads, L and S by size class (they vary from call to call), D, the grouping,
    causal and the mask's form (training's kept lse shares the entry: its store is L floats a
    head against the output's L x D; either layout shares it too)."""
    form = None if mask is None else (mask.dtype.name, mask.shape[0] > 1, mask.shape[1] > 1)
    return (*_sizes(q, k, layout), group, causal, form)


def _sizes(q, k, layout):
    """The keys' sizes of q and k in `layout`: batch x heads, L and S by size class, and D."""
    b, h, l_len, d = heads_major(q.shape, layout[0])
    s_len = heads_major(k.shape, layout[1])[2]
    return size_class(b * h), size_class(l_len), size_class(s_len), d


# The blocks of the prefill kernels (these, varlen's, MLA's, the backward's) take their tiles
# row-major (`tile.row_major()`): one head's query tiles run together and share its K and V in
# L2, as FlashAttention's and TileGym's grids order them; the grid's own order ran tile i of
# every head together, so B x H heads' K and V competed for L2 (0.76 of cuDNN at (4, 32, 8192,
# 128) causal bf16 on the H200, against 0.95 to 0.99 where they fit). Not yet measured on a
# GPU (2026-12-05); None restores the grid's order.
ORDER = tile.row_major()


def tile_order():
    """The attention kernels' partition order, `ORDER` as it is at the call (an experiment may
    set it to None for the grid's order)."""
    return ORDER


# A causal forward's query tiles differ in work: tile i sees i + 1 key tiles. Under ORDER a
# head's lightest run first; FlashAttention-3 runs the longest first, so that the last blocks
# of a launch are short ones. LONGEST_FIRST numbers the query axis from its last tile
# (`tile.row_major(reverse=...)`) in the causal forward and the backward's dq kernel (the
# atomic dQ's dk_dv walks its key tiles longest first already); off until timed
# (bench/experiments/attention_causal_order.py, 2026-12-06: written, not yet run on a GPU).
LONGEST_FIRST = False


def causal_orders(longest_first, q_seq):
    """(out's, lse's) partition orders of a forward launch (`_launch`), or of the backward's
    dq (its out's): LONGEST_FIRST's where `longest_first` (a causal kernel)."""
    order = tile_order()
    if not (longest_first and LONGEST_FIRST and order is not None):
        return order, order
    return tile.row_major(reverse=(1 if q_seq else 2,)), tile.row_major(reverse=(2,))


# The forward's kept lse is written as (B, H, L, 1) in (1, 1, tile_m, LSE_COLUMNS) tiles, so
# that its Part numbers its tiles as out's; the store clips the columns past 1. A one-column
# f32 tile (4 bytes a row) made tileiras 13.5 fail on the kernel at 128 rows with occupancy 2
# ("Failed to select TMA store instruction", even with allow_tma=False; 2026-12-05); four
# columns, 16 bytes, compile.
LSE_COLUMNS = 4


def _kernel(
    q, k, causal, form, variant, tile_n, occupancy, num_worker_warps, layout=(False, False)
):
    """`make_attention`'s kernel for q, k (fl.Tensors, in `layout`) in key tiles of `tile_n`
    (`mask_form`'s `form` of the mask or None, `variant` or None), with its launch options."""
    even_k = heads_major(k.shape, layout[1])[2] % tile_n == 0
    make = kernel_of(make_attention, q.dtype, causal, even_k, form, variant, layout)
    return make.options(occupancy=occupancy, num_worker_warps=num_worker_warps)


def _launch(make, out, lse, tile_m, d, args, q_seq=False, causal=False):
    """`make`'s kernel over out's (1, 1, tile_m, D) tiles ((1, tile_m, 1, D) of a (B, L, H, D)
    out where `q_seq`), with lse's rows when lse (a (B, H, L) f32 fl.Tensor) is kept (see
    LSE_COLUMNS); `args` the kernel's inputs after those; `causal`: see LONGEST_FIRST."""
    rows = (1, tile_m, 1, next_pow2(d)) if q_seq else (1, 1, tile_m, next_pow2(d))
    out_order, lse_order = causal_orders(causal, q_seq)
    with out.partition(rows, out_order) as part:
        if lse is None:
            make(part, None, *args)
        else:
            # the kept lse's Part numbers its (B, H, L) tiles as a heads-major out's
            assert not q_seq, "a kept lse takes q and out of (B, H, L, D)"
            rows_view = view(lse, (*lse.shape, 1))
            with rows_view.partition((1, 1, tile_m, LSE_COLUMNS), lse_order) as rows:
                make(part, rows, *args)


# lse's f32 follows from its presence: training's forward shares the entries without it
@fl.autotune(
    configs=ATTENTION_CONFIGS, key=_attention_key, key_dtypes=("q", "k", "v", "mask", "out")
)
def attention_tuned(
    q, k, v, mask, out, scale, causal, group, lse=None, layout=(False, False), *, tile_m, tile_n,
    occupancy, num_worker_warps,
):  # fmt: skip
    """out = attention of q over k, v (fl.Tensors of (B, H, L or S, D), or in `layout`:
    `make_attention`'s) with these tiles; `mask` None or an fl.Tensor of (1 or B, 1 or H, L, S),
    bool or q's dtype; `lse` None or a (B, H, L) f32 fl.Tensor that gets the rows'
    log2-sum-exp (`make_attention`'s optional `lse`)."""
    form = None if mask is None else mask_form(mask)
    kernel = _kernel(q, k, causal, form, None, tile_n, occupancy, num_worker_warps, layout)
    args = (q, k, v, mask, scale, 0, 0, 1.0, tile_n, group)
    _launch(kernel, out, lse, tile_m, q.shape[3], args, layout[0], causal)


def _variant_key(
    q, k, v, out, scale, causal, group, variant, wl, wr, cap, lse=None, layout=(False, False),
    **__,
):  # fmt: skip
    """`_attention_key`'s facts, the variant's flags and its window's sizes by size class."""
    windows = size_class(wl + 1), size_class(wr + 1)
    return (*_sizes(q, k, layout), group, causal, variant, *windows)


@fl.autotune(configs=ATTENTION_CONFIGS, key=_variant_key, key_dtypes=("q", "k", "v", "out"))
def attention_variant_tuned(
    q, k, v, out, scale, causal, group, variant, wl, wr, cap, lse=None, layout=(False, False), *,
    tile_m, tile_n, occupancy, num_worker_warps,
):  # fmt: skip
    """out = a variant's attention (`make_attention`'s `variant`: bottom-right alignment,
    window WL / WR, soft cap CAP) of q over k, v (fl.Tensors of (B, H, L or S, D), or in
    `layout`); `lse` as `attention_tuned`'s."""
    kernel = _kernel(q, k, causal, None, variant, tile_n, occupancy, num_worker_warps, layout)
    args = (q, k, v, None, scale, wl, wr, cap, tile_n, group)
    _launch(kernel, out, lse, tile_m, q.shape[3], args, layout[0])
