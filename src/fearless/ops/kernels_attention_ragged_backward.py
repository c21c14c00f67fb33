"""The backward of `fearless.ops.attention_sink` (GPT-OSS's attention with sinks) and
`fmha_varlen` (per-sequence lengths): their launches of flash attention's backward kernels
(ops/kernels_attention_backward.py, in a ragged form: `ragged_geometry`), with the two Tile
kernels only they need: the sinks' gradient and a layout swap.

Sinks. With s_ij = q_i k_j * scale over the keys row i sees and the head's sink logit c,
P_ij = exp(s_ij - lse_i), lse_i = log(sum_j exp(s_ij) + exp(c)), O_i = sum_j P_ij V_j. The sink
only moves lse, so dQ, dK, dV are flash attention's with that lse (the stats kernel adds
exp(c) to each row's sum). c's own gradient: dP_ij / dc = -P_ij P_c,i with
P_c,i = exp(c - lse_i), so dO_i . dO_i/dc = -P_c,i (dO_i . O_i) and
    d c_h = - sum over the batch and the rows i of head h of P_c,i * delta_i,
delta_i = rowsum(dO_i * O_i), the stats kernel's delta (`make_sink_grads`). A row that sees no
key has O_i = 0 (delta_i = 0) and lse_i = c: it adds nothing. The sequence-major tensors
(q, out (B, L, H, D), k, v (B, S, H_kv, D)) are swapped to heads-major for the kernels and dQ,
dK, dV back (`make_swap`).

Varlen: the kernels read q_lens and kv_lens inside (`ragged_geometry`); rows past a sequence's
length get lse = +inf, so every gradient through them is 0, and the keys past it get dK = dV = 0;
whatever the padding holds (NaN, Inf) reaches no real gradient (the kernels zero it where a tile
crosses a length: kernels_attention_backward_tiles.py's section comment).

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile

from ._io import empty_beside
from .kernels_attention import INV_LOG_2
from .kernels_attention_backward import attention_backward
from .kernels_rows import kernel_of, next_pow2

SWAP_ROWS = 64  # rows per tile of the layout swap


def make_swap(dt, to_heads):
    """out = x with axes 1 and 2 swapped, D (axis 3) kept: `to_heads` (compile-time) out of
    (B, H, L, D) from x of (B, L, H, D) in tiles of (1, 1, ROWS, D), else the reverse in tiles
    of (1, ROWS, 1, D)."""

    @tile.kernel
    def swap(out: tile.Part[dt], x: tile.Tensor[dt]):
        if to_heads:
            _, _, ROWS, TILE_D = out.shape
            b, h, i, _ = out.index
            t = tile.load(x, (b, i, h, 0), (1, ROWS, 1, TILE_D))
            out.store(t.reshape((1, 1, ROWS, TILE_D)))
        else:
            _, ROWS, _, TILE_D = out.shape
            b, i, h, _ = out.index
            t = tile.load(x, (b, h, i, 0), (1, 1, ROWS, TILE_D))
            out.store(t.reshape((1, ROWS, 1, TILE_D)))

    return swap


def _swapped(x, out):
    """out (an fl.Tensor of x's axes 1 and 2 swapped) = x swapped."""
    to_heads = out.shape[1] == x.shape[2]
    td = next_pow2(x.shape[3])
    rows = (1, 1, SWAP_ROWS, td) if to_heads else (1, SWAP_ROWS, 1, td)
    with out.partition(rows) as part:
        kernel_of(make_swap, x.dtype, to_heads)(part, x)
    return out


def _heads_major(x):
    """A new (B, H, L, D) fl.Tensor of x (B, L, H, D)."""
    b, lq, h, d = x.shape
    return _swapped(x, empty_beside(x, (b, h, lq, d), x.dtype))


def make_sink_grads(sdt):
    """d sinks (H,) in `sdt`: -sum over the batch and the rows of head h of
    exp2(c_h / ln 2 - lse) * delta (lse, delta (B, H, L) f32, base 2 as the stats kernel's)."""

    @tile.kernel
    def sink_grads(
        dsinks: tile.Part[sdt],
        sinks: tile.Tensor[sdt],
        lse: tile.Tensor[fl.f32],
        delta: tile.Tensor[fl.f32],
        TILE_M: tile.Const[int],
    ):
        (h,) = dsinks.index
        sk = tile.load(sinks, (h,), (1,)).astype(fl.f32).reshape((1, 1)) * INV_LOG_2
        acc = tile.zeros((1, TILE_M), fl.f32)
        for b in range(lse.shape[0]):
            for i in range(tile.cdiv(lse.shape[2], TILE_M)):
                li = tile.load(lse, (b, h, i), (1, 1, TILE_M)).reshape((1, TILE_M))
                di = tile.load(delta, (b, h, i), (1, 1, TILE_M)).reshape((1, TILE_M))
                # rows past L load lse = delta = 0; a row of lse +inf has P_c = 0
                acc = acc + tile.exp2(sk - li, flush_to_zero=True) * di
        dsinks.store((0.0 - tile.sum(acc, axis=1)).astype(sdt))

    return sink_grads


def sink_attention_backward(
    q, k, v, sinks, start, out, dout, dq, dk, dv, dsinks, scale, group, wl
):  # fmt: skip
    """dq (B, L, H, D), dk, dv (B, S, H_kv, D) and dsinks (H,) (fl.Tensors like q, k, v, sinks)
    of attention with sinks (kernels_attention_sink.py's), whose output was out (B, L, H, D),
    for d_out: start the (1,) i32 query offset, `wl` None (no window) or the keys a row sees
    before its own position."""
    qh, kh, vh, oh, gh = (_heads_major(x) for x in (q, k, v, out, dout))
    dqh, dkh, dvh = (empty_beside(x, x.shape, x.dtype) for x in (qh, kh, vh))
    variant = (False, wl is not None, False, False, ("sink", sinks.dtype))
    lse, delta = attention_backward(
        qh, kh, vh, oh, gh, dqh, dkh, dvh, scale, True, group, variant, wl or 0, 0, 1.0,
        (sinks, start),
    )  # fmt: skip
    for src, dst in ((dqh, dq), (dkh, dk), (dvh, dv)):
        _swapped(src, dst)
    with dsinks.partition((1,)) as part:
        kernel_of(make_sink_grads, sinks.dtype)(part, sinks, lse, delta, 64)


def varlen_attention_backward(
    q, k, v, q_lens, kv_lens, out, dout, dq, dk, dv, scale, causal, group
):  # fmt: skip
    """dq, dk, dv (fl.Tensors like q (B, H, L, D), k, v (B, H_kv, S, D)) of per-sequence
    attention (kernels_attention_varlen.py's), whose output was out, for d_out; q_lens and
    kv_lens (B,) i32 fl.Tensors."""
    variant = (False, False, False, False, ("varlen", fl.i32))
    attention_backward(
        q, k, v, out, dout, dq, dk, dv, scale, causal, group, variant, 0, 0, 1.0,
        (q_lens, kv_lens),
    )  # fmt: skip
