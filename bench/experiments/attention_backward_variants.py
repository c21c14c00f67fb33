"""Where the attention backward's time goes, and what a FlashAttention-2 dQ would save (issue
35: the backward of `fearless.ops.scaled_dot_product_attention` ran at 0.36 of torch's SDPA at
(4, 32, 8192, 64) causal f16 on the H100, forward and backward timed together, 2026-12-05).

Two measurements, each kernel timed alone (median of REPS launches after a warm-up, the GPU
synchronised around each launch batch), q, k, v, out, dout (B, H, L, D) f16:

  tiles   the three shipped kernels (ops/kernels_attention_backward.py: stats, dk_dv, dq) at
          four (query rows, keys) tiles and occupancy hints: the shipped BACKWARD_TILES are
          fixed at (64, 64) and untuned;
  atomic  FlashAttention-2's order, the shipped dk_dv with `atomic_dq` (DQ_BY_ATOMICS): it
          also adds each (query tile, key tile) pair's dS K into an f32 dQ with relaxed
          `tile.atomic_add`s (no separate dq pass, which recomputes S, P and dP: 5 matmuls a
          pair instead of 8); dq = dq_acc * scale afterwards (make_finish_dq, not timed). Not
          deterministic (the adds' order varies), as FlashAttention-2's dQ.

Measured on the H100 (bench/results/h100-2026-12-05-session17): each kernel's best tiles
differ (they are now BACKWARD_CONFIGS); the atomic form was 5 to 40x slower than the three
kernels: its adds were acq_rel, one ordered `atom.global.acq_rel.add.f32` an element in the
PTX; with `memory_order="relaxed"` tileiras emits `red.global.gpu.v4.f32.add` (four a
instruction, unordered), as FlashAttention-2's dQ: to be measured.

`--check` runs a tiny case on the current target (the simulator without a GPU): the atomic
form's dq, dk, dv against the shipped kernels'.

Run on the GPU machine: python3 bench/experiments/attention_backward_variants.py [--check]
[--forms=0,1,2] [--grid-order] [TM,TN[,OCC[,WARPS]] ...]: the forms by index (below), the settings
(default: four); the kernels' tiles in `kernels_attention.ORDER` (row-major: a head's tiles
run together), or with --grid-order in the grid's order (every head's tile i together).
"""

import sys
import time

import numpy as np

import fearless as fl
from fearless.ops import kernels_attention as KA
from fearless.ops import kernels_attention_backward as B
from fearless.ops.kernels_rows import next_pow2

REPS = 10


def _inputs(b, h, n, d, seed=0):
    rng = np.random.default_rng(seed)
    return [fl.asarray(rng.standard_normal((b, h, n, d)).astype(np.float16)) for _ in range(5)]


def _stats(q, k, out, dout, scale, causal, tm, tn, **hints):
    """(run, lse, delta): the stats kernel, made once, and its (B, H, L) f32 outputs, allocated
    once; run() launches it (what the timing repeats), and has run once here."""
    b, h, n, d = q.shape
    lse, delta = fl.empty((b, h, n), dtype=fl.f32), fl.empty((b, h, n), dtype=fl.f32)
    stats = B.make_attention_stats(fl.f16, causal, n % tn == 0, **hints)

    def run():
        lse_p, delta_p = (
            lse.partition((1, 1, tm), KA.tile_order()),
            delta.partition((1, 1, tm), KA.tile_order()),
        )
        stats(lse_p, delta_p, q, k, out, dout, None, None, None, scale, 0, 0, 1.0, tn,
              next_pow2(d), 1)  # fmt: skip
        lse_p.unpartition()
        delta_p.unpartition()

    run()
    return run, lse, delta


def _timed(launch):
    launch()
    fl.synchronize()
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        launch()
        fl.synchronize()
        times.append(time.perf_counter() - t0)
    return 1e3 * sorted(times)[len(times) // 2]


def shipped(q, k, v, out, dout, scale, causal, tm, tn, **hints):
    """(lse, delta), dq, dk, dv and each kernel's time (ms) of the shipped three kernels."""
    n, d = q.shape[2:]
    td = next_pow2(d)
    even = n % tn == 0
    run_stats, lse, delta = _stats(q, k, out, dout, scale, causal, tm, tn, **hints)
    dq, dk, dv = (fl.empty(q.shape, dtype=fl.f16) for _ in range(3))
    dkdv = B.make_attention_dkdv(fl.f16, causal, even, **hints)
    dqk = B.make_attention_dq(fl.f16, causal, even, **hints)

    def run_dkdv():
        dk_p, dv_p = (
            dk.partition((1, 1, tn, td), KA.tile_order()),
            dv.partition((1, 1, tn, td), KA.tile_order()),
        )
        dkdv(dk_p, dv_p, None, q, k, v, dout, lse, delta, None, None, None, scale, 0, 0, 1.0, tm, 1)
        dk_p.unpartition()
        dv_p.unpartition()

    def run_dq():
        dq_p = dq.partition((1, 1, tm, td), KA.tile_order())
        dqk(dq_p, q, k, v, dout, lse, delta, None, None, None, scale, 0, 0, 1.0, tn, 1)
        dq_p.unpartition()

    delta_k = B.make_attention_delta(fl.f16)

    def run_delta():  # training's first step: the forward kept lse (make_attention's keep_lse)
        delta_p = delta.partition((1, 1, 64), KA.tile_order())
        delta_k(delta_p, out, dout, td)
        delta_p.unpartition()

    times = {
        "stats": _timed(run_stats),
        "delta": _timed(run_delta),
        "dkdv": _timed(run_dkdv),
        "dq": _timed(run_dq),
    }
    return dq, dk, dv, times


def atomic(q, k, v, out, dout, scale, causal, tm, tn, **hints):
    """dq, dk, dv and the time (ms) of the atomic form's kernel (dq_acc zeroed each call)."""
    d = q.shape[3]
    _, lse, delta = _stats(q, k, out, dout, scale, causal, tm, tn, **hints)
    dk, dv = fl.empty(q.shape, dtype=fl.f16), fl.empty(q.shape, dtype=fl.f16)
    kernel = B.make_attention_dkdv(fl.f16, causal, q.shape[2] % tn == 0, atomic_dq=True, **hints)
    pool = [fl.zeros(q.shape, dtype=fl.f32) for _ in range(REPS + 1)]  # zeroed outside the timing
    acc = [pool[0]]

    def run():
        acc[0] = pool.pop() if pool else acc[0]
        dk_p, dv_p = (
            dk.partition((1, 1, tn, d), KA.tile_order()),
            dv.partition((1, 1, tn, d), KA.tile_order()),
        )
        kernel(dk_p, dv_p, acc[0], q, k, v, dout, lse, delta, None, None, None, scale, 0, 0, 1.0,
               tm, 1)  # fmt: skip
        dk_p.unpartition()
        dv_p.unpartition()

    ms = _timed(run)
    dq = np.asarray(acc[0].numpy()) * scale
    return dq, dk, dv, ms


def _max_diff(a, b):
    a = np.asarray(a.numpy() if hasattr(a, "numpy") else a, np.float64)
    return float(np.abs(a - np.asarray(b.numpy(), np.float64)).max())


def torch_backward_ms(b, h, n, d, causal):
    """torch SDPA's backward alone (autograd.grad over a kept forward), f16 on the GPU."""
    import torch

    q, k, v = (
        torch.randn(b, h, n, d, device="cuda", dtype=torch.float16, requires_grad=True)
        for _ in range(3)
    )
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    do = torch.randn_like(o)

    def run():
        torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        torch.cuda.synchronize()

    run()
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return 1e3 * sorted(times)[len(times) // 2]


def check():
    q, k, v, out, dout = _inputs(1, 2, 96, 32)
    for causal in (False, True):
        dq0, dk0, dv0, _ = shipped(q, k, v, out, dout, 0.2, causal, 32, 32)
        dq1, dk1, dv1, _ = atomic(q, k, v, out, dout, 0.2, causal, 32, 32)
        errs = [_max_diff(a, b) for a, b in ((dq1, dq0), (dk1, dk0), (dv1, dv0))]
        print(f"check causal={causal}: max |atomic - shipped| dq, dk, dv = {errs}")
        assert max(errs) < 2e-2, errs


FORMS = ((4, 32, 8192, 64, True), (4, 32, 8192, 128, True), (4, 32, 8192, 128, False))
SETTINGS = ((64, 64, None, None), (64, 128, None, None), (128, 64, None, None), (64, 64, 2, None))


def _setting(arg):
    """TM,TN[,OCC[,WARPS]] (0 or absent: no hint): tiles, occupancy, worker warps (8: two
    warp groups share the tiles, as FlashAttention-3's consumers)."""
    tm, tn, occ, warps = ([int(x) for x in arg.split(",")] + [0, 0])[:4]
    return tm, tn, occ or None, warps or None


def main():
    if "--check" in sys.argv:
        check()
        return
    args = sys.argv[1:]
    if "--grid-order" in args:
        KA.ORDER = None
    picked = [a.split("=", 1)[1] for a in args if a.startswith("--forms=")]
    forms = [FORMS[int(x)] for x in picked[0].split(",")] if picked else FORMS
    settings = [_setting(a) for a in args if not a.startswith("--")] or SETTINGS
    # 3 (causal, D) forms x 4 settings x 4 kernels: about 48 compiles, a few minutes
    for b, h, n, d, causal in forms:
        q, k, v, out, dout = _inputs(b, h, n, d)
        scale = d**-0.5
        try:
            ms = torch_backward_ms(b, h, n, d, causal)
            print(f"torch   {b}x{h}x{n}x{d} causal={causal}: backward {ms:.3f} ms", flush=True)
        except Exception as exc:  # no torch or no CUDA torch here
            print(f"torch   {type(exc).__name__}: {str(exc)[:120]}", flush=True)
        for tm, tn, occ, warps in settings:
            hints = {"occupancy": occ, "num_worker_warps": warps}
            hints = {key: value for key, value in hints.items() if value is not None}
            label = f"{b}x{h}x{n}x{d} causal={causal} tiles=({tm},{tn}) occ={occ}"
            label += f" warps={warps}" if warps else ""
            try:
                _, _, _, t = shipped(q, k, v, out, dout, scale, causal, tm, tn, **hints)
                total = sum(t.values())
                kept = total - t["stats"]  # delta alone in stats' place (training)
                total -= t["delta"]
                print(f"shipped {label}: stats {t['stats']:.3f} delta {t['delta']:.3f} dkdv "
                      f"{t['dkdv']:.3f} dq {t['dq']:.3f} total {total:.3f} ms, with the "
                      f"forward's lse {kept:.3f} ms", flush=True)  # fmt: skip
            except Exception as exc:  # a tile size that does not fit: say so, go on
                print(f"shipped {label}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            try:
                _, _, _, ms = atomic(q, k, v, out, dout, scale, causal, tm, tn, **hints)
                print(f"atomic  {label}: dkdv+dq {ms:.3f} ms", flush=True)
            except Exception as exc:
                print(f"atomic  {label}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)


if __name__ == "__main__":
    main()
