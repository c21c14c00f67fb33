"""The Tile kernel behind `fearless.ops.moe_actgrad_bwd` (TileGym's MoE down-projection
activation-gradient backward; host side in ops/moe_actgrad.py), and its tuned launch.

Rows are TileGym's grouped order: expert e owns rows offsets[e] .. offsets[e + 1] of h, dh,
a_prime and ds (the host checked the offsets: from 0, non-decreasing, ending at TK). Block i
owns rows i*BM .. i*BM + BM of all three outputs (each a `Part` of full-width row tiles), so
every row has one writer and the routing-score gradient ds is reduced inside the block, in a
fixed order: deterministic, no atomics. A row tile may straddle experts' groups:

  - loop 1 walks the tile's column chunks of dh (viewed (TK, G, I), G = 2 for the GLU forms:
    gate half then up half of the same columns; 1 else); per chunk, for each expert whose group
    meets the tile, dy1 += dout[x_gather_idx[rows]] @ w2[e]^T with the rows of other experts
    gathered as padding (0), so each row gets its own expert's product (one loop over the
    (expert, K step) pairs; an empty expert's steps gather only padding). It then stores dh = act'(h) dy1 * s and adds sum(dy1 * act(h)) over the chunk's
    columns to the rows' ds;
  - loop 2 walks the column chunks of a_prime: act(h) * s, elementwise (h read again);
  - ds (f32) gets its old value plus the sum: TileGym's kernel adds atomically into a ds the
    caller zeroed, and this keeps that meaning.

s = topk_scores[s_scatter_idx[row]]. Every gather is bounds-checked (an index out of range
reads 0); the host refuses such indices before the launch. Columns past I and rows past TK
read 0 and their stores are dropped. The activations are f32, from ops/kernels_activation.py
and kernels_activation_backward.py (GELU exact, A&S erf).

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile

from .kernels_activation import gelu_f32
from .kernels_activation_backward import gelu_grad_f32, silu_and_grad_f32
from .kernels_rows import kernel_of, next_pow2, size_class

GLU = ("swiglu", "geglu", "reglu")
ACTIVATIONS = (*GLU, "silu", "relu", "gelu", "relu_sq")


@tile.function
def act_and_grad(x, kind):
    """(act(x), act'(x)) of an f32 tile for the gate's (or the plain form's) activation."""
    if kind == "swiglu" or kind == "silu":
        y, g = silu_and_grad_f32(x)
    elif kind == "geglu" or kind == "gelu":
        y, g = gelu_f32(x, False), gelu_grad_f32(x, False)
    elif kind == "relu_sq":
        r = tile.maximum(x, 0.0)
        y, g = r * r, 2.0 * r
    else:  # relu, reglu
        y, g = tile.maximum(x, 0.0), tile.where(x > 0.0, 1.0, 0.0)
    return y, g


@tile.function
def h_chunk(h, i, j, BM, BN, half):
    """h's (BM, BN) chunk at row tile i, column chunk j, of half `half` (h viewed (TK, G, I))."""
    return tile.load(h, (i, half, j), (BM, 1, BN)).reshape((BM, BN)).astype(fl.f32)


def make_moe_actgrad(dt, kind):
    """dh, a_prime and ds of `kind` (one of ACTIVATIONS) for BM-row tiles of the grouped rows."""
    glu = kind in GLU  # compile-time

    @tile.kernel
    def moe_actgrad(
        dh: tile.Part[dt],
        a_prime: tile.Part[dt],
        ds: tile.Part[fl.f32],
        dout: tile.Tensor[dt],
        h: tile.Tensor[dt],
        w2: tile.Tensor[dt],
        scores: tile.Tensor[fl.f32],
        offsets: tile.Tensor[fl.i32],
        gather_idx: tile.Tensor[fl.i32],
        scatter_idx: tile.Tensor[fl.i32],
        BN: tile.Const[int],
        BK: tile.Const[int],
        EP: tile.Const[int],
    ):
        (BM,) = ds.shape
        i = ds.index[0]
        row0 = i * BM
        rows = row0 + tile.arange(BM)
        src = tile.load(gather_idx, (i,), (BM,), padding=-1)  # past TK: -1, reads 0
        s = tile.gather(scores, tile.load(scatter_idx, (i,), (BM,), padding=-1))[:, None]
        # the experts whose groups meet rows row0 .. row0 + BM
        experts = offsets.shape[0] - 1
        k = tile.arange(EP)
        o = tile.load(offsets, (0,), (EP,))
        first = tile.sum(tile.where((k >= 1) & (k <= experts) & (o <= row0), 1, 0))
        last = tile.sum(tile.where((k < experts) & (o < row0 + BM), 1, 0))
        steps = tile.num_tiles(dout, 1, (BM, BK))
        part = tile.zeros((BM,), fl.f32)
        for c in dh.chunks((BM, dh.shape[1], BN)):
            j = c.index[2]
            live = min(1, max(0, h.shape[2] - j * BN))  # a chunk wholly past I: no K step
            dy = tile.zeros((BM, BN), fl.f32)
            # one loop over (expert, K step) pairs; an empty expert's rows gather nothing (all
            # -1: zeros), so its steps add 0
            for t in range((last - first) * steps * live):
                e = first + t // steps
                kk = t % steps
                start = tile.load(offsets, (e,), (1,)).item()
                end = tile.load(offsets, (e + 1,), (1,)).item()
                sel = tile.where((rows >= start) & (rows < end), src, -1)[:, None]
                kc = (kk * BK + tile.arange(BK))[None, :]
                # no TMA for w2's tile: with it (the expert coordinate changing inside the
                # loop) the 16-bit kernel never finished on the H100 and the H200; f32 ran
                # (2026-12-05, bench/experiments/moe_actgrad_variants.py: only the variants
                # without TMA here finish)
                w = tile.load(w2, (e, kk, j), (1, BK, BN), order=(0, 2, 1), allow_tma=False)
                dy = tile.mma(tile.gather(dout, (sel, kc)), w.reshape((BK, BN)), dy)
            if glu:
                gate = h_chunk(h, i, j, BM, BN, 0)
                up = h_chunk(h, i, j, BM, BN, 1)
                act, grad = act_and_grad(gate, kind)
                part = part + tile.sum(dy * act * up, axis=1)
                dg = (dy * s * up * grad)[:, None, :]
                du = (dy * s * act)[:, None, :]
                c.store(tile.cat((dg, du), 1).astype(dt))
            else:
                act, grad = act_and_grad(h_chunk(h, i, j, BM, BN, 0), kind)
                part = part + tile.sum(dy * act, axis=1)
                c.store((dy * s * grad).reshape((BM, 1, BN)).astype(dt))
        for c in a_prime.chunks((BM, BN)):
            j = c.index[1]
            act, _ = act_and_grad(h_chunk(h, i, j, BM, BN, 0), kind)
            if glu:
                act = act * h_chunk(h, i, j, BM, BN, 1)
            c.store((act * s).astype(dt))
        ds.store(tile.load_like(ds, ds) + part)

    return moe_actgrad


def _config(bm, bn, bk, occupancy=None, warps=None):
    return dict(bm=bm, bn=bn, bk=bk, occupancy=occupancy, warps=warps)


# Rows per block (BM), the column chunk (BN) and the K step (BK) over H. TileGym's cuTile kernel
# tunes (128, 128, 64) and (128, 128, 128) on Hopper; a block here owns whole rows, so fewer
# blocks run when TK is small: 64-row tiles are tried too. The 128-row tiles take 8 worker
# warps for 16-bit inputs (`warps`; f32's kernels as they were): with tileiras's default the
# (BM, BN) f32 tiles of dy and the epilogue spilled (sm_90, bf16, swiglu: (128, 128, 64) 3,240
# bytes of stack a thread and 41 to 47 s of tileiras, (128, 64, 64) 1,256 bytes; with 8 warps
# 72 and 40 bytes, about 2 s each; bench/experiments/compile_slow_kernels.py).
ACTGRAD_CONFIGS = [
    _config(64, 64, 64, 2),
    _config(128, 64, 64, warps=8),
    _config(128, 128, 64, warps=8),
    _config(64, 128, 64, 2),
]


def _key(kind, dh, a_prime, ds, dout, *_, **__):
    """The activation, the grouped rows' size class, I and H (and the dtype, the tuner's)."""
    return kind, size_class(dh.shape[0]), dh.shape[2], dout.shape[1]


@fl.autotune(configs=ACTGRAD_CONFIGS, key=_key, restore_value=["ds"])
def actgrad_tuned(kind, dh, a_prime, ds, dout, h, w2, scores, offsets, gather_idx, scatter_idx,
                  *, bm, bn, bk, occupancy, warps=None):  # fmt: skip
    """Launch over dh (TK, G, I) and h the same view, a_prime (TK, I), ds (TK,) f32, dout
    (T, H), w2 (E, I, H), the flat f32 scores and the i32 offsets (E + 1,) and indices (TK,).
    The kernel adds into ds: the tuner puts its contents back before each timed call."""
    launch(kind, dh, a_prime, ds, dout, h, w2, scores, offsets, gather_idx, scatter_idx,
           bm, bn, bk, occupancy, warps)  # fmt: skip


def launch(kind, dh, a_prime, ds, dout, h, w2, scores, offsets, gather_idx, scatter_idx, bm,
           bn, bk, occupancy=None, warps=None):  # fmt: skip
    """One launch at these tile sizes (each capped by its extent's power of two); `warps`, the
    num_worker_warps hint, for 16-bit inputs only."""
    tk, g, inter = dh.shape
    wide = next_pow2(inter)
    bm = min(bm, next_pow2(tk))
    bn = min(bn, wide)
    bk = min(bk, next_pow2(max(dout.shape[1], 1)))
    warps = warps if dh.dtype in (fl.bf16, fl.f16) else None
    kernel = kernel_of(make_moe_actgrad, dh.dtype, kind).options(
        occupancy=occupancy, num_worker_warps=warps
    )
    ep = next_pow2(offsets.shape[0])
    with (
        dh.partition((bm, g, wide)) as pd,
        a_prime.partition((bm, wide)) as pa,
        ds.partition((bm,)) as ps,
    ):
        kernel(pd, pa, ps, dout, h, w2, scores, offsets, gather_idx, scatter_idx, bn, bk, ep)
