"""The Tile kernels of `fearless.ops.fused_moe`'s backward (ops/moe.py: `fused_moe_backward`),
and their launches, over the forward's sorted layout (ops/kernels_moe.py): slot s = token *
top_k + k, each expert's slots a contiguous range of `sorted_ids`, padded to a multiple of the
block with the sentinel T * top_k.

  - `moe_act_bwd`, block (i, j) of the sorted rows x intermediate columns: recomputes the
    gate and up pre-activations (x[rows] @ w1[e]^T, the forward's first GEMM) and, in the same
    K loop over H, da' = dy[rows] @ w2[e] (the gradient reaching the activation, before the
    routing weight); from them it stores the weighted activation w_s * silu(gate) * up (for
    dw2), the pre-activations' gradients interleaved as (EM, I, 2) (dgate, dup), and this
    column tile's part of the routing weight's gradient, sum over its columns of da' * act,
    into (EM, I / BN): every element has one writer;
  - `moe_dx` is the grouped GEMM dh (EM, 2I) @ w1[e] (2I, H) of each sorted block, w1 read
    (E, 2, I, H) with the half axis inner so its rows follow dh's interleaved columns; the
    forward's `moe_sum` then adds each token's top_k rows through the inverse permutation;
  - `moe_dw1` and `moe_dw2` own a tile of one expert's weight gradient and run over that
    expert's range of sorted rows (cumsum[e] .. cumsum[e + 1]) in steps of BR rows:
    dw1[e, h] = dh[:, :, h]^T @ x[rows], dw2[e] = dy[rows]^T @ (w_s * act). A sum with one
    writer per tile, in a fixed order: deterministic, no atomics. Padding rows contribute 0
    (their x and dy rows are gathered past the tokens, and `moe_act_bwd` stores 0 there);
  - `moe_dweights` sums each slot's column parts, found through the inverse permutation.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile

from ._io import view
from .kernels_activation import sigmoid_f32
from .kernels_moe import gate_up_step, sorted_block
from .kernels_rows import kernel_of, next_pow2

BM_ACT = 64  # intermediate columns per block of `moe_act_bwd` (its BN)
BN_OUT = 64  # output columns per block of `moe_dx`, `moe_dw1` and `moe_dw2`
BK = 64  # the K step of the grouped GEMMs


@tile.function
def expert_steps(cumsum, e, BR):
    """(start, steps): expert e's first sorted row and the BR-row steps over its rows
    cumsum[e] .. cumsum[e + 1]."""
    start = tile.load(cumsum, (e,), (1,)).item()
    steps = (tile.load(cumsum, (e + 1,), (1,)).item() - start) // BR
    return start, steps


def make_moe_act_bwd(dt):
    """(w_s * act, dh, the weight gradient's column parts) of each block of BM sorted slots."""

    @tile.kernel
    def moe_act_bwd(
        act: tile.Part[dt],
        dh: tile.Part[dt],
        dwp: tile.Part[fl.f32],
        x: tile.Tensor[dt],
        dy: tile.Tensor[dt],
        w1: tile.Tensor[dt],
        w2: tile.Tensor[dt],
        sorted_ids: tile.Tensor[fl.i32],
        expert_ids: tile.Tensor[fl.i32],
        post_pad: tile.Tensor[fl.i32],
        weights: tile.Tensor[fl.f32],
        TOPK: tile.Const[int],
        BK: tile.Const[int],
    ):
        BM, BN = act.shape
        i, j = act.index
        live, e = sorted_block(post_pad, expert_ids, i, BM)
        slots = tile.load(sorted_ids, (i,), (BM,), padding=-1)
        rows = (slots // TOPK)[:, None]
        gate = tile.zeros((BM, BN), fl.f32)
        up = tile.zeros((BM, BN), fl.f32)
        da = tile.zeros((BM, BN), fl.f32)
        for k in range(tile.num_tiles(x, 1, (BM, BK)) * live):
            cols = (k * BK + tile.arange(BK))[None, :]
            gate, up = gate_up_step(x, w1, rows, cols, e, k, j, gate, up, BK, BN)
            w = tile.load(w2, (e, k, j), (1, BK, BN)).reshape((BK, BN))
            da = tile.mma(tile.gather(dy, (rows, cols)), w, da)
        wt = tile.gather(weights, slots)[:, None]  # the sentinel (past the slots) reads 0
        s = sigmoid_f32(gate)
        silu = gate * s
        h = silu * up
        dwp.store(tile.sum(da * h, axis=1, keepdims=True))
        act.store((h * wt).astype(dt))
        dact = da * wt
        dgate = dact * up * s * (1.0 + gate * (1.0 - s))
        dup = dact * silu
        dh.store(tile.cat((dgate[:, :, None], dup[:, :, None]), 2).astype(dt))

    return moe_act_bwd


def make_moe_dx(dt):
    """out (EM, H) = dh (EM, 2I, interleaved) @ w1[e] (2I, H) per block of BM sorted slots."""

    @tile.kernel
    def moe_dx(
        out: tile.Part[dt],
        dh: tile.Tensor[dt],
        w1: tile.Tensor[dt],
        expert_ids: tile.Tensor[fl.i32],
        post_pad: tile.Tensor[fl.i32],
        BK: tile.Const[int],
    ):
        BM, BN = out.shape
        i, j = out.index
        live, e = sorted_block(post_pad, expert_ids, i, BM)
        acc = tile.zeros((BM, BN), fl.f32)
        for k in range(tile.num_tiles(w1, 2, (1, 2, BK, BN)) * live):
            w = tile.load(w1, (e, k, 0, j), (1, BK, 2, BN), order=(0, 2, 1, 3))
            a = tile.load(dh, (i, k), (BM, 2 * BK))  # columns 2c + half
            acc = tile.mma(a, w.reshape((2 * BK, BN)), acc)
        out.store(acc.astype(dt))

    return moe_dx


def make_moe_dw1(dt):
    """out (E, 2, I, H)[e, h] = dh[expert e's rows, :, h]^T @ x[their tokens]."""

    @tile.kernel
    def moe_dw1(
        out: tile.Part[dt],
        dh: tile.Tensor[dt],
        x: tile.Tensor[dt],
        sorted_ids: tile.Tensor[fl.i32],
        cumsum: tile.Tensor[fl.i32],
        TOPK: tile.Const[int],
        BR: tile.Const[int],
    ):
        _, _, BM, BN = out.shape
        e, h, i, j = out.index
        start, steps = expert_steps(cumsum, e, BR)
        cols = (j * BN + tile.arange(BN))[None, :]
        acc = tile.zeros((BM, BN), fl.f32)
        for r in range(steps):
            k = start // BR + r
            g = tile.load(dh, (i, k, h), (BM, BR, 1), order=(1, 0, 2)).reshape((BM, BR))
            rows = (tile.load(sorted_ids, (k,), (BR,)) // TOPK)[:, None]
            acc = tile.mma(g, tile.gather(x, (rows, cols)), acc)  # sentinels read 0
        out.store(acc.astype(dt).reshape((1, 1, BM, BN)))

    return moe_dw1


def make_moe_dw2(dt):
    """out (E, H, I)[e] = dy[expert e's tokens]^T @ (w_s * act)[its rows]."""

    @tile.kernel
    def moe_dw2(
        out: tile.Part[dt],
        act: tile.Tensor[dt],
        dy: tile.Tensor[dt],
        sorted_ids: tile.Tensor[fl.i32],
        cumsum: tile.Tensor[fl.i32],
        TOPK: tile.Const[int],
        BR: tile.Const[int],
    ):
        _, BM, BN = out.shape
        e, i, j = out.index
        start, steps = expert_steps(cumsum, e, BR)
        cols = (i * BM + tile.arange(BM))[:, None]
        acc = tile.zeros((BM, BN), fl.f32)
        for r in range(steps):
            k = start // BR + r
            rows = (tile.load(sorted_ids, (k,), (BR,)) // TOPK)[None, :]
            g = tile.gather(dy, (rows, cols))  # (BM, BR): dy transposed; sentinels read 0
            acc = tile.mma(g, tile.load(act, (k, j), (BR, BN)), acc)
        out.store(acc.astype(dt).reshape((1, BM, BN)))

    return moe_dw2


def make_moe_dweights(dt):
    """out (T * top_k,)[s] = the sum of dwp (EM, NJ)[inv[s], :] (NJP >= NJ a power of two)."""

    @tile.kernel
    def moe_dweights(
        out: tile.Part[dt], dwp: tile.Tensor[fl.f32], inv: tile.Tensor[fl.i32], NJP: tile.Const[int]
    ):
        (BS,) = out.shape
        slots = out.index[0] * BS + tile.arange(BS)
        pos = tile.gather(inv, slots, padding=-1)[:, None]
        parts = tile.gather(dwp, (pos, tile.arange(NJP)[None, :]))  # past NJ: 0
        out.store(tile.sum(parts, axis=1).astype(dt))

    return moe_dweights


def act_bwd_launch(act, dh, dwp, x, dy, w1v, w2, sorted_ids, expert_ids, post, weights, topk,
                   block):  # fmt: skip
    """act (EM, I), dh (EM, I, 2) and dwp (EM, ceil(I / BN)) for the sorted blocks of `block`
    rows (w1 viewed (E, 2, I, H))."""
    inter = act.shape[1]
    bn = min(BM_ACT, next_pow2(inter))
    bk = min(BK, next_pow2(x.shape[1]))
    kernel = kernel_of(make_moe_act_bwd, x.dtype)
    with (
        act.partition((block, bn)) as pa,
        dh.partition((block, bn, 2)) as ph,
        dwp.partition((block, 1)) as pw,
    ):
        kernel(pa, ph, pw, x, dy, w1v, w2, sorted_ids, expert_ids, post, weights, topk, bk)


def dx_launch(out, dh, w1, expert_ids, post, block):
    """out (EM, H) = each sorted block's dh @ w1[e] (dh (EM, I, 2), w1 (E, 2I, H))."""
    experts, two_i, hidden = w1.shape
    inter = two_i // 2
    w1t = view(w1, (experts, 2, inter, hidden))
    bk = min(BK, next_pow2(inter))
    dh2 = view(dh, (dh.shape[0], two_i))
    kernel = kernel_of(make_moe_dx, dh.dtype)
    with out.partition((block, min(BN_OUT, next_pow2(hidden)))) as part:
        kernel(part, dh2, w1t, expert_ids, post, bk)


def dw1_launch(out, dh, x, sorted_ids, cumsum, topk, block):
    """out (E, 2I, H): each expert's w1 gradient over its sorted rows."""
    experts, two_i, hidden = out.shape
    inter = two_i // 2
    kernel = kernel_of(make_moe_dw1, x.dtype)
    bm, bn = min(BN_OUT, next_pow2(inter)), min(BN_OUT, next_pow2(hidden))
    with view(out, (experts, 2, inter, hidden)).partition((1, 1, bm, bn)) as part:
        kernel(part, dh, x, sorted_ids, cumsum, topk, min(BK, block))


def dw2_launch(out, act, dy, sorted_ids, cumsum, topk, block):
    """out (E, H, I): each expert's w2 gradient over its sorted rows."""
    _, hidden, inter = out.shape
    kernel = kernel_of(make_moe_dw2, act.dtype)
    bm, bn = min(BN_OUT, next_pow2(hidden)), min(BN_OUT, next_pow2(inter))
    with out.partition((1, bm, bn)) as part:
        kernel(part, act, dy, sorted_ids, cumsum, topk, min(BK, block))


def dweights_launch(out, dwp, inv):
    """out (T * top_k,) = each slot's sum of its row of dwp."""
    kernel = kernel_of(make_moe_dweights, out.dtype)
    with out.partition((min(256, next_pow2(out.shape[0])),)) as part:
        kernel(part, dwp, inv, next_pow2(dwp.shape[1]))
