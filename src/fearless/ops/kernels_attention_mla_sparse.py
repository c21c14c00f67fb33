"""The Tile kernel behind `fearless.ops.sparse_mla` (DeepSeek's sparse MLA prefill: each query
attends only to the top-k key positions its row of `indices` names), and its autotuned launch.

Block (b, g, head tile, s) takes TILE_H query heads of KV group g at query position s (q and
qpe viewed as (B, H_kv, G, S, D / D_PE); a ragged last head tile loads zeros and stores
nothing past G) and walks its index row indices[b, s, g, :] in tiles of TILE_N, keys-major as
the MLA decode of kernels_attention_mla.py: the keys are gathered, K (TILE_N, D) @ Q^T
(D, TILE_H) plus KPE (TILE_N, D_PE) @ QPE^T gives the scores, V^T (D, TILE_N) @ P the
accumulator, in the base-2 online softmax (f32 running max, sum and accumulator).

Safety (the indices are data): an index outside [0, S_kv) is clamped to an address inside the
cache, its gather is masked off (nothing is read), its score is -inf and its value zero; the
block records the smallest bad row (b * S + s) * H_kv + g into err[0] with an atomic min, and
the operator raises it as a fearless error (ops/attention_mla_sparse.py). A row that keeps no
key gives 0.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from .kernels_attention import INV_LOG_2, online_fold, online_start, online_weights
from .kernels_rows import kernel_of, next_pow2, size_class


def make_sparse_mla(dt, causal, **hints):
    """The sparse MLA forward: out, q (B, H_kv, G, S, D), qpe (B, H_kv, G, S, D_PE), k, v
    (B, H_kv, S_kv, D), kpe (B, 1, S_kv, D_PE), indices (B, S, H_kv, TOPK) i32; `causal`
    (compile-time): an index above the query's position s is dropped (TileGym's, top-left)."""

    @tile.kernel(**hints)
    def sparse_mla(
        out: tile.Part[dt],
        q: tile.Tensor[dt],
        qpe: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        kpe: tile.Tensor[dt],
        indices: tile.Tensor[fl.i32],
        err: tile.Atomic[fl.i32],
        scale: fl.f32,
        TILE_N: tile.Const[int],
        TILE_P: tile.Const[int],
    ):
        _, _, TILE_H, _, TILE_D = out.shape
        b, g, hb, s, _ = out.index
        s_kv = k.shape[2]
        topk = indices.shape[3]
        n_q = q.shape[3]
        qt = tile.load(q, (b, g, hb, s, 0), (1, 1, TILE_H, 1, TILE_D)).reshape((TILE_H, TILE_D))
        pt = tile.load(qpe, (b, g, hb, s, 0), (1, 1, TILE_H, 1, TILE_P)).reshape((TILE_H, TILE_P))
        q_t, p_t = tile.transpose(qt), tile.transpose(pt)  # (D, TILE_H), (D_PE, TILE_H)
        d_cols = tile.arange(TILE_D)[None, :]
        p_cols = tile.arange(TILE_P)[None, :]
        qk_scale = scale * INV_LOG_2
        m_i, l_i, acc = online_start(TILE_H, TILE_D, True)
        row = (b * n_q + s) * indices.shape[2] + g
        for jj in range(tile.cdiv(topk, TILE_N)):
            slots = jj * TILE_N + tile.arange(TILE_N)
            idx = tile.gather(indices, (b, s, g, slots), mask=slots < topk, padding=0)
            bad = (slots < topk) & ((idx < 0) | (idx >= s_kv))
            tile.atomic_min(err, slots * 0, row + slots * 0, mask=bad)
            keep = (slots < topk) & (idx >= 0) & (idx < s_kv)
            if causal:  # compile-time
                keep = keep & (idx <= s)
            addr = min(max(idx, 0), s_kv - 1)[:, None]  # inside the cache whatever the index
            kk = keep[:, None]
            kt = tile.gather(k, (b, g, addr, d_cols), mask=kk, padding=0)
            kp = tile.gather(kpe, (b, 0, addr, p_cols), mask=kk, padding=0)
            sc = tile.mma(kt, q_t, tile.zeros((TILE_N, TILE_H), fl.f32))
            sc = tile.mma(kp, p_t, sc)
            sc = tile.where(kk, sc * qk_scale, -math.inf)
            m_ij, p, alpha = online_weights(sc, m_i, 0, True)  # guarded: no key yet
            vt = tile.gather(v, (b, g, addr, d_cols), mask=kk, padding=0)
            acc, l_i = online_fold(p, alpha, l_i, acc, vt, dt, True)
            m_i = m_ij
        o = tile.where(l_i == 0.0, 0.0, acc / l_i)  # a row that keeps no key is 0
        out.store(tile.transpose(o).astype(dt).reshape((1, 1, TILE_H, 1, TILE_D)))

    return sparse_mla


def _cfg(tile_n, occupancy):
    return dict(tile_n=tile_n, occupancy=occupancy)


# TileGym tunes TILE_N over 16..128 (TILE_H over the group's divisors); the gathers favour 64.
# No occupancy 2: tileiras 13.5 makes this kernel three warp groups (384 threads) at 80
# registers a thread (a pool of 30,720 a block) and still has the consumer group raise itself
# to 224 (setmaxnreg: 128 x 224 + 256 x 32 = 36,864), so its USETMAXREG.TRY_ALLOC spins
# forever and the launch never ends on the GPU (the simulator never sees it). At occupancy 1:
# 168 registers, 64,512 a block, 2 x 128 x 232 + 128 x 32 = 63,488 fits.
SPARSE_MLA_CONFIGS = [_cfg(64, 1), _cfg(32, 1), _cfg(128, 1)]


def _sparse_key(q, qpe, k, v, kpe, indices, err, out, scale, causal, *_, **__):
    b, hk, g, s, d = q.shape
    sizes = size_class(b * hk * s), size_class(indices.shape[3]), size_class(k.shape[2])
    return (*sizes, g, d, qpe.shape[4], causal)


@fl.autotune(configs=SPARSE_MLA_CONFIGS, key=_sparse_key)
def sparse_mla_tuned(q, qpe, k, v, kpe, indices, err, out, scale, causal, *, tile_n, occupancy):
    """out (B, H_kv, G, S, D) = sparse MLA of q, qpe over the gathered k, v, kpe (fl.Tensors,
    `make_sparse_mla`'s layouts); err (1,) i32 records the smallest bad row."""
    g, d, dp = q.shape[2], q.shape[4], qpe.shape[4]
    th = max(8, min(16, next_pow2(g)))
    kernel = kernel_of(make_sparse_mla, q.dtype, causal).options(occupancy=occupancy)
    with out.partition((1, 1, th, 1, next_pow2(d))) as part:
        kernel(part, q, qpe, k, v, kpe, indices, err, scale, tile_n, next_pow2(dp))
