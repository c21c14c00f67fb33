"""Flash attention's backward, its host side: the gradients of
`fearless.ops.scaled_dot_product_attention` (ops/kernels_attention.py's forward) and of its
variants (TileGym's fmha, swa_attention, gemma_attention; the ragged forms of attention_sink
and fmha_varlen) and of its masked form (a bool or additive `attn_mask`): each step's candidate
tiles, its tuner (`fl.autotune`) and launch, and `attention_backward`, which runs the steps.
The kernels themselves are kernels_attention_backward_tiles.py's.
"""

import sys

import fearless as fl

from ..autotune_ahead import compile_ahead_once
from ..runtime.target import current_target
from ._io import empty_beside, view, zeros_beside
from .kernels_attention import LSE_COLUMNS, causal_orders, mask_form, tile_order
from .kernels_attention_backward_tiles import (
    make_attention_delta,
    make_attention_dkdv,
    make_attention_dq,
    make_attention_stats,
    make_finish_dq,
)
from .kernels_rows import kernel_of, next_pow2, size_class

# Each kernel's candidate (query rows, keys, occupancy[, worker warps]) by head dim: the tuner's
# choices 0..3 (`fl.autotune` over the choice, per kernel: its key holds D). Choice 0 is the
# kernel's best alone at (4, 32, 8192, D) f16 on the H100 (bench/experiments/
# attention_backward_variants.py; bench/results/h100-2026-12-05-session18), what runs with
# tuning off: causal D 64 delta 0.22 + dk_dv 6.25 + dq 3.83 ms (torch SDPA's backward 6.65),
# causal D 128 0.26 + 9.24 + 6.81 (11.4), full D 128 0.27 + 17.2 + 13.0 (21.0). The others
# came next there, but for those with 8 worker warps (two warp groups share the tiles), chosen
# on the CPU where every other setting spills (`inspect(stage="resources")`: dk_dv at D 256
# spills 1 KB a thread on one warp group, and on two 192 bytes at 64 keys with GQA, none at
# 32; at D 128 (64, 128) spills 1.2 KB on one, none on two). Session 19 timed them (H100): dq
# at D 128 on (128, 128) over two warp groups, 5.46 ms causal and 10.2 full against (64, 128)'s
# 8.97 and 15.3, is choice 0 now; dk_dv there at (128, 128) on two ran 109 ms (not a
# candidate). Choice 0 spills nothing at D 64, 128 and 256 (tests/test_ops_attention.py).
STEPS = ("stats", "dkdv", "dq", "atomic")  # atomic: dk_dv with FlashAttention-2's dQ adds
BACKWARD_CANDIDATES = (  # (largest head dim, {kernel: four candidates})
    (
        64,
        {
            "stats": ((128, 128, 2), (128, 64, 2), (64, 64, 2), (64, 64, None)),
            "dkdv": ((128, 64, 2), (64, 64, 2), (64, 128, None), (128, 64, None)),
            "dq": ((128, 64, 2), (64, 64, 2), (128, 64, None), (64, 128, None)),
            "atomic": ((128, 128, None, 8), (64, 128, None, 8), (128, 64, 2), (64, 64, 2)),
        },
    ),
    (
        128,
        {
            "stats": ((128, 64, 2), (64, 64, 2), (128, 128, None), (64, 64, None)),
            "dkdv": ((128, 64, 2), (64, 64, 2), (128, 64, None), (64, 128, None, 8)),
            "dq": ((128, 128, None, 8), (64, 128, None), (64, 64, 2), (64, 64, None)),
            "atomic": ((64, 128, None, 8), (128, 64, 2), (64, 64, 2), (64, 64, None, 8)),
        },
    ),
    (
        None,
        {
            "stats": ((64, 64, 2), (64, 64, None), (64, 32, None), (32, 64, None)),
            "dkdv": ((64, 32, None, 8), (64, 64, None, 8), (64, 32, None), (64, 64, None)),
            "dq": ((64, 64, None, 8), (128, 64, None, 8), (64, 32, None), (64, 64, None)),
            "atomic": ((64, 64, None, 8), (64, 32, None, 8), (64, 32, None), (64, 64, None)),
        },
    ),
)
CHOICES = [{"choice": i} for i in range(4)]
BACKWARD_TILES = None  # (rows, keys): every kernel on these tiles instead (the tests' small ones)
# FlashAttention-2's dQ: dk_dv adds each pair's dS K into an f32 dQ (5 products a pair instead
# of 8, no dq kernel), not deterministic (the adds' order varies), tuned over the "atomic"
# candidates (`atomic_tuned`). Taken up to head dim DQ_BY_ATOMICS_UP_TO (0: never). With
# per-element relaxed adds (a REDG.F32x4 each) it paid only at D 64 (session 19, H100: causal D
# 128, 14.77 ms against 9.83 + 5.46 for dk_dv + dq at (4, 32, 8192, 128)). Since session 35 each
# pair's (rows, D) tile goes in with one `tile.atomic_store_add` (a TMA reduction, UTMAREDG),
# and it pays at every head dim: forward + backward, bf16, H100, ms with DQ_BY_ATOMICS_UP_TO 0 /
# 64 / 128 / 256 (bench/experiments/attention_backward_dq.py, bench/results/
# h100-2026-12-07-session35): (4, 32, 4096, 64) causal 3.06 / 2.91 / 2.92 / 2.94, (4, 32, 4096,
# 128) causal 5.03 / 5.05 / 4.82 / 4.89, full 9.13 / 9.24 / 8.59 / 8.83, (2, 32, 8192, 128)
# causal 9.28 / 9.14 / 8.89 / 8.88, (2, 16, 4096, 256) causal 3.50 / 3.52 / 3.52 / 3.39.
DQ_BY_ATOMICS_UP_TO = 256


def atomic_dq(d):
    """Whether the backward at head dim d takes FlashAttention-2's dQ: up to
    DQ_BY_ATOMICS_UP_TO, and never under torch's deterministic mode
    (`torch.use_deterministic_algorithms(True)`: its adds' order varies between runs)."""
    torch = sys.modules.get("torch")  # asked only where torch is loaded: fearless needs none
    return d <= DQ_BY_ATOMICS_UP_TO and not (
        torch is not None and torch.are_deterministic_algorithms_enabled()
    )


def backward_configs(d, choice=0):
    """{kernel: (rows, keys, occupancy, worker warps)} of the backward's three kernels at head
    dim d, the tuner's `choice` of each (None: no hint)."""
    if BACKWARD_TILES is not None:
        return dict.fromkeys(STEPS, (*BACKWARD_TILES, None, None))
    table = next(cfg for top, cfg in BACKWARD_CANDIDATES if top is None or d <= top)
    return {step: (*table[step][choice], None)[:4] for step in STEPS}


def _step(make, step, choice, q, k, causal, variant, mask, **kw):
    """(kernel, rows, keys): `make`'s kernel at `step`'s candidate `choice`."""
    tm, tn, occupancy, warps = backward_configs(q.shape[3], choice)[step]
    ragged = variant is not None and len(variant) > 4  # one kernel for even and not
    even_k = ragged or k.shape[2] % tn == 0
    flags = (q.dtype, causal, even_k, variant) + (() if mask is None else (mask_form(mask),))
    kernel = kernel_of(make, *flags, **kw)
    return kernel.options(occupancy=occupancy, num_worker_warps=warps), tm, tn


def _backward_key(q, k, causal, group, variant, mask, extra, *_, **__):
    """Batch x heads, L and S by size class, D, the grouping, causal, the variant with its
    window's sizes by size class, and the mask's form."""
    b, h, lq, d = q.shape
    wl, wr, _ = extra
    form = None if mask is None else mask_form(mask)
    sizes = size_class(b * h), size_class(lq), size_class(k.shape[2])
    return (*sizes, d, group, causal, variant, size_class(wl + 1), size_class(wr + 1), form)


def _distinct(step):
    """The prune of `step`'s tuner: the choices whose candidates differ at this D (one where
    BACKWARD_TILES fixes them all); on the simulator choice 0 alone (its timings say nothing of
    a GPU, and the tests' every backward would run four times)."""

    def prune(configs, q, *_, **__):
        if not current_target().on_device:
            return configs[:1]
        seen, kept = set(), []
        for cfg in configs:
            candidate = backward_configs(q.shape[3], cfg["choice"])[step]
            if candidate not in seen:
                seen.add(candidate)
                kept.append(cfg)
        return kept

    return prune


@fl.autotune(configs=CHOICES, key=_backward_key, prune=_distinct("stats"))
def stats_tuned(q, k, causal, group, variant, mask, extra, a0, a1, lse, delta, out, dout, scale,
                *, choice):  # fmt: skip
    """lse and delta ((B, H, L) f32 fl.Tensors) by `make_attention_stats`' kernel."""
    stats, tm, tn = _step(make_attention_stats, "stats", choice, q, k, causal, variant, mask)
    with (
        lse.partition((1, 1, tm), tile_order()) as lse_p,
        delta.partition((1, 1, tm), tile_order()) as delta_p,
    ):
        td = next_pow2(q.shape[3])
        stats(lse_p, delta_p, q, k, out, dout, a0, a1, mask, scale, *extra, tn, td, group)


@fl.autotune(configs=CHOICES, key=_backward_key, prune=_distinct("dkdv"))
def dkdv_tuned(q, k, causal, group, variant, mask, extra, a0, a1, dk, dv, v, dout, lse, delta,
               scale, *, choice):  # fmt: skip
    """dk and dv (fl.Tensors like k and v) by `make_attention_dkdv`'s kernel."""
    step = _step(make_attention_dkdv, "dkdv", choice, q, k, causal, variant, mask)
    _run_dkdv(*step, None, q, k, v, dout, lse, delta, a0, a1, mask, scale, extra, group, dk, dv)


@fl.autotune(
    configs=CHOICES, key=_backward_key, prune=_distinct("atomic"), reset_to_zero=["dq_acc"]
)
def atomic_tuned(q, k, causal, group, variant, mask, extra, a0, a1, dk, dv, dq_acc, v, dout, lse,
                 delta, scale, *, choice):  # fmt: skip
    """dk and dv, and dq_acc (f32, like q, zeroed) += dS K, by `make_attention_dkdv`'s atomic
    form (FlashAttention-2's dQ)."""
    step = _step(make_attention_dkdv, "atomic", choice, q, k, causal, variant, mask, atomic_dq=True)
    _run_dkdv(*step, dq_acc, q, k, v, dout, lse, delta, a0, a1, mask, scale, extra, group, dk, dv)


def _run_dkdv(dkdv, tm, tn, dq_acc, q, k, v, dout, lse, delta, a0, a1, mask, scale, extra,
              group, dk, dv):  # fmt: skip
    """One launch of the dk_dv kernel `dkdv` at (tm, tn) over dk's and dv's key tiles; dq_acc
    None, or the atomic form's f32 dQ."""
    td = next_pow2(q.shape[3])
    with (
        dk.partition((1, 1, tn, td), tile_order()) as dk_p,
        dv.partition((1, 1, tn, td), tile_order()) as dv_p,
    ):
        args = (q, k, v, dout, lse, delta, a0, a1, mask, scale, *extra, tm, group)
        dkdv(dk_p, dv_p, dq_acc, *args)


@fl.autotune(configs=CHOICES, key=_backward_key, prune=_distinct("dq"))
def dq_tuned(q, k, causal, group, variant, mask, extra, a0, a1, dq, v, dout, lse, delta, scale,
             *, choice):  # fmt: skip
    """dq (an fl.Tensor like q) by `make_attention_dq`'s kernel."""
    dq_kernel, tm, tn = _step(make_attention_dq, "dq", choice, q, k, causal, variant, mask)
    order, _ = causal_orders(causal and variant is None, False)  # query tile i walks i + 1
    with dq.partition((1, 1, tm, next_pow2(q.shape[3])), order) as dq_p:
        args = (q, k, v, dout, lse, delta, a0, a1, mask, scale, *extra, tn, group)
        dq_kernel(dq_p, *args)


def attention_backward(
    q, k, v, out, dout, dq, dk, dv, scale, causal, group, variant=None, wl=0, wr=0, cap=1.0,
    aux=(), mask=None, lse=None,
):  # fmt: skip
    """dq, dk, dv (fl.Tensors like q, k, v) of attention's out for d_out: the three kernels,
    each autotuned; returns the rows' (lse, delta), (B, H, L) f32. `variant` (make_attention's,
    with its run-time WL, WR and CAP): None for scaled_dot_product_attention's; a ragged form's
    (its fifth element, `_flags`) takes its two auxiliary tensors `aux` (ragged_geometry's a0,
    a1). `mask`: None, or scaled_dot_product_attention's (an fl.Tensor of (1 or B, 1 or H, L,
    S), bool or q's dtype; no variant with it). `lse`: None, or the rows' lse as the forward
    kept it (make_attention's keep_lse, (B, H, L) f32): only delta is computed then.

    On the first call in a process with a key of the tuners (and dtype, and lse given or
    not), the kernels of every step first compile side by side (`compile_ahead_of`: the
    winners where they are known, else every configuration to time), not one step after
    another."""
    args = (q, k, v, out, dout, dq, dk, dv, scale, causal, group, variant, wl, wr, cap, aux,
            mask, lse)  # fmt: skip
    form = _backward_key(q, k, bool(causal), group, variant, mask, (wl, wr, cap))
    first = ("attention_backward", form, q.dtype, lse is None, atomic_dq(q.shape[3]))
    compile_ahead_once(first, lambda: _backward(*args))
    return _backward(*args)


def forward_with_backward_ahead(
    forward, q, k, v, out, lse, mask, scale, causal, group, variant=None, wl=0, wr=0, cap=1.0
):  # fmt: skip
    """Run `forward` (a training forward of `scaled_dot_product_attention`'s or of a variant's,
    `variant` with its WL, WR and CAP as make_attention's, which keeps `lse` for the
    backward), its backward's kernels compiling beside its own on the first such call in a
    process with a key of the tuners: one compile-ahead pass over both, the gradients it
    would write scratch tensors like q, k and v, and `out` standing in for d_out. The backward
    that follows then finds its kernels compiled or compiling."""

    def both():
        forward()
        grads = [empty_beside(x, x.shape, x.dtype) for x in (q, k, v)]
        attention_backward(q, k, v, out, out, *grads, scale, causal, group, variant, wl, wr,
                           cap, mask=mask, lse=lse)  # fmt: skip

    form = _backward_key(q, k, bool(causal), group, variant, mask, (wl, wr, cap))
    compile_ahead_once(("attention with its backward", form, q.dtype), both)
    forward()


def _backward(
    q, k, v, out, dout, dq, dk, dv, scale, causal, group, variant, wl, wr, cap, aux, mask, lse
):  # fmt: skip
    """attention_backward's steps."""
    b, h, lq, d = q.shape
    causal, extra = bool(causal), (wl, wr, cap)
    a0, a1 = aux or (None, None)
    form = (q, k, causal, group, variant, mask, extra, a0, a1)
    atomic = atomic_dq(d)
    delta = empty_beside(q, (b, h, lq), fl.f32)
    dq_acc = None
    if lse is None:
        lse = empty_beside(q, (b, h, lq), fl.f32)
        stats_tuned(*form, lse, delta, out, dout, scale)
    else:  # the forward's: delta alone, streaming out and dout once (8192 f32 values of each
        # a block: 64 rows up to D 128, 32 at D 256), and zeroing the atomic dQ's dq_acc
        rows, td = min(64, 8192 // next_pow2(d)), next_pow2(d)
        if atomic:
            dq_acc = empty_beside(q, q.shape, fl.f32)
            with (
                view(delta, (b, h, lq, 1)).partition(
                    (1, 1, rows, LSE_COLUMNS), tile_order()
                ) as delta_p,
                dq_acc.partition((1, 1, rows, td), tile_order()) as acc_p,
            ):
                kernel_of(make_attention_delta, q.dtype, True)(delta_p, acc_p, out, dout)
        else:
            with delta.partition((1, 1, rows), tile_order()) as delta_p:
                kernel_of(make_attention_delta, q.dtype)(delta_p, out, dout, td)
    if not atomic:
        dkdv_tuned(*form, dk, dv, v, dout, lse, delta, scale)
        dq_tuned(*form, dq, v, dout, lse, delta, scale)
        return lse, delta
    # FlashAttention-2's dQ: dk_dv adds into dq_acc, then dq = dq_acc * scale
    if dq_acc is None:
        dq_acc = zeros_beside(q, q.shape, fl.f32)
    atomic_tuned(*form, dk, dv, dq_acc, v, dout, lse, delta, scale)
    with dq.partition((1, 1, 64, next_pow2(d)), tile_order()) as dq_p:
        kernel_of(make_finish_dq, q.dtype)(dq_p, dq_acc, scale)
    return lse, delta
