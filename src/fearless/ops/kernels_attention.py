"""The Tile kernel behind `fearless.ops.scaled_dot_product_attention`, and its autotuned launch.

`make_attention` is flash attention with the online softmax in base 2, as cuTile Python's
AttentionFMHA sample computes it (examples/cutile_samples.py has our port of the sample): the
block of Out's (1, 1, TILE_M, TILE_D) tile (b, h, i) takes Q's rows i * TILE_M.., walks K and V
in tiles of TILE_N keys (K loaded transposed with `order=`), keeps the running max, sum and
f32 accumulator, and masks keys past the end (`even_k` False) and, when `causal`, keys after
the query (torch's `is_causal`: query i sees keys 0..i). Grouped-query attention: query head h
reads KV head h // GROUP. TILE_D is D rounded up to a power of two: the padded columns load as
zeros (they add nothing to Q K^T) and are dropped at the store.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from .kernels_rows import kernel_of, next_pow2

INV_LOG_2 = 1.0 / math.log(2.0)


def make_attention(dt, causal, even_k, mask=None, **hints):
    """softmax(Q K^T * scale + mask) V for q, k, v of (B, H, L or S, D). `mask`: None, or
    (is_bool, batch, heads) for a mask tensor of (1 or B, 1 or H, L, S): bool (False drops the
    key, as torch) or float (added to the scores); batch / heads: whether it has those axes
    (else it broadcasts over them)."""
    causal_or_ragged = causal or not even_k
    masked = mask is not None
    mask_bool, mask_b, mask_h = mask if masked else (False, False, False)

    @tile.function
    def attend(out, q, k, v, m, scale, TILE_N, GROUP):
        _, _, TILE_M, TILE_D = out.shape
        b, h, i, _ = out.index
        kv_h = h // GROUP
        qk_scale = scale * INV_LOG_2
        rows = (i * TILE_M + tile.arange(TILE_M))[:, None]
        cols = tile.arange(TILE_N)[None, :]
        m_i = tile.full((TILE_M, 1), -math.inf, fl.f32)
        l_i = tile.zeros((TILE_M, 1), fl.f32)
        acc = tile.zeros((TILE_M, TILE_D), fl.f32)
        qt = tile.load(q, (b, h, i, 0), (1, 1, TILE_M, TILE_D)).reshape((TILE_M, TILE_D))
        s_len = k.shape[2]
        if causal:  # compile-time: key tiles past the block's last query are skipped
            tiles = tile.cdiv(min((i + 1) * TILE_M, s_len), TILE_N)
            mask_from = min(i * TILE_M // TILE_N, s_len // TILE_N)
        else:
            tiles = tile.cdiv(s_len, TILE_N)
            mask_from = s_len // TILE_N
        for j in range(tiles):
            kt = tile.load(
                k, (b, kv_h, 0, j), (1, 1, TILE_D, TILE_N), order=(0, 1, 3, 2), latency=2
            )
            qk = tile.mma(qt, kt.reshape((TILE_D, TILE_N)), tile.zeros((TILE_M, TILE_N), fl.f32))
            qk = qk * qk_scale  # scores in base 2
            if masked:  # compile-time: the user's mask, (1 or B, 1 or H, L, S)
                mb = b if mask_b else 0
                mh = h if mask_h else 0
                mt = tile.load(m, (mb, mh, i, j), (1, 1, TILE_M, TILE_N)).reshape((TILE_M, TILE_N))
                if mask_bool:
                    qk = qk + tile.where(mt, 0.0, -math.inf)
                else:
                    qk = qk + mt.astype(fl.f32) * INV_LOG_2
            if causal_or_ragged:  # noqa: SIM102  (compile-time, then a run-time `if`)
                if j >= mask_from:
                    keys = j * TILE_N + cols
                    keep = tile.full((TILE_M, TILE_N), True, fl.bool_)
                    if not even_k:
                        keep = keep & (keys < s_len)
                    if causal:
                        keep = keep & (rows >= keys)
                    qk = qk + tile.where(keep, 0.0, -math.inf)
            m_ij = max(m_i, tile.max(qk, axis=-1, keepdims=True))
            p = tile.exp2(qk - m_ij, flush_to_zero=True)
            alpha = tile.exp2(m_i - m_ij, flush_to_zero=True)
            l_i = l_i * alpha + tile.sum(p, axis=-1, keepdims=True)
            vt = tile.load(v, (b, kv_h, j, 0), (1, 1, TILE_N, TILE_D), latency=4)
            acc = tile.mma(p.astype(dt), vt.reshape((TILE_N, TILE_D)), acc * alpha)
            m_i = m_ij
        acc = tile.truediv(acc, l_i, rounding_mode=tile.RoundingMode.APPROX, flush_to_zero=True)
        out.store(acc.reshape((1, 1, TILE_M, TILE_D)).astype(dt))

    if not masked:

        @tile.kernel(**hints)
        def attention(
            out: tile.Part[dt],
            q: tile.Tensor[dt],
            k: tile.Tensor[dt],
            v: tile.Tensor[dt],
            scale: fl.f32,
            TILE_N: tile.Const[int],
            GROUP: tile.Const[int],
        ):
            attend(out, q, k, v, None, scale, TILE_N, GROUP)

        return attention
    mdt = fl.bool_ if mask_bool else dt

    @tile.kernel(**hints)
    def masked_attention(
        out: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        m: tile.Tensor[mdt],
        scale: fl.f32,
        TILE_N: tile.Const[int],
        GROUP: tile.Const[int],
    ):
        attend(out, q, k, v, m, scale, TILE_N, GROUP)

    return masked_attention


def _cfg(tile_m, tile_n, occupancy):
    return dict(tile_m=tile_m, tile_n=tile_n, occupancy=occupancy)


# cuTile's AttentionFMHA sample runs (128, 128) tiles at occupancy 2, TileGym's fmha also
# (256, 128) at occupancy 1 and 2 on sm90+; smaller tiles for short sequences and large heads.
ATTENTION_CONFIGS = [
    _cfg(128, 128, 2),
    _cfg(256, 128, 1),
    _cfg(256, 128, 2),
    _cfg(128, 64, 2),
    _cfg(64, 64, 4),
    _cfg(64, 128, 2),
    _cfg(128, 128, 1),
]


@fl.autotune(configs=ATTENTION_CONFIGS, key=["q", "k", "causal", "mask"])
def attention_tuned(q, k, v, mask, out, scale, causal, group, *, tile_m, tile_n, occupancy):
    """out = attention of q over k, v (fl.Tensors of (B, H, L or S, D)) with these tiles;
    `mask` None or an fl.Tensor of (1 or B, 1 or H, L, S), bool or q's dtype."""
    d = q.shape[3]
    even_k = k.shape[2] % tile_n == 0
    form = None
    if mask is not None:
        form = (mask.dtype == fl.bool_, mask.shape[0] > 1, mask.shape[1] > 1)
    make = kernel_of(make_attention, q.dtype, causal, even_k, form)
    kernel = make.options(occupancy=occupancy)
    part = out.partition((1, 1, tile_m, next_pow2(d)))
    masks = () if mask is None else (mask,)
    try:  # a configuration the tuner tries may fail to compile: `out` is the caller's again
        kernel(part, q, k, v, *masks, scale, tile_n, group)
    finally:
        part.unpartition()
