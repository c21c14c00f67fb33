"""Does a configuration that spills ever win? Each configuration's time beside the stack its
kernels spill (fl.autotune's `timings` and `spills`), for the tuners where the CPU found spills
(bench/results/h100-2026-12-05-session18/NOTES.md): the GEMM (TileGym's (256, 256) tiles over
2-CTA clusters spill 1.8 KB), the attention forward (256-row tiles on one warp group: 1.9 to
5.5 KB), layer_norm on 16,384 columns and the attention backward. It decides
`autotune_timing.SKIP_SPILLING` (issue 37: leave untimed what cannot win).

Run on the GPU machine (tuning from scratch: its own cache folder, no table):
    python3 bench/experiments/spills_vs_times.py
Prints, per tuner and key, each configuration's time (ms; "-" untimed) and stack (bytes a
thread), the winner marked, and at the end the winners that spill.
"""

import os
import sys
import tempfile

os.environ["FEARLESS_CACHE_DIR"] = tempfile.mkdtemp(prefix="fearless-spills-")

import torch

import fearless as fl
from fearless import autotune_tables, ops
from fearless.ops import kernels_attention as KA
from fearless.ops import kernels_attention_backward as KB
from fearless.ops import kernels_gemm as KG
from fearless.ops import kernels_rows as KR

TUNERS = (
    KG.matmul_tuned, KA.attention_tuned, KR.layer_norm_tuned, KB.stats_tuned, KB.dkdv_tuned,
    KB.dq_tuned,
)  # fmt: skip


def _cases():
    dev, bf16 = "cuda", torch.bfloat16
    for n in (4096, 16384):
        a, b = (torch.randn(n, n, device=dev, dtype=bf16) for _ in range(2))
        yield f"matmul bf16 {n}^3", lambda a=a, b=b: ops.matmul(a, b)
    for d in (64, 128):
        q, k, v = (
            torch.randn(4, 32, 4096, d, device=dev, dtype=bf16, requires_grad=True)
            for _ in range(3)
        )
        yield (
            f"sdpa forward + backward bf16 (4, 32, 4096, {d}) causal",
            lambda q=q, k=k, v=v: (
                ops.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
            ),
        )
    x = torch.randn(4096, 16384, device=dev, dtype=bf16)
    w, bias = torch.ones(16384, device=dev, dtype=bf16), torch.zeros(16384, device=dev, dtype=bf16)
    yield "layer_norm bf16 4096 x 16384", lambda: ops.layer_norm(x, (16384,), w, bias, 1e-5)


def main():
    if not fl.cuda_status()[0]:
        sys.exit("needs the GPU")
    with autotune_tables.disabled():
        for label, run in _cases():
            print(f"== {label}", flush=True)
            run()
            torch.cuda.synchronize()
    spilled_winners = []
    for tuner in TUNERS:
        for key, times in tuner.timings.items():
            stacks = tuner.spills.get(key, [None] * len(times))
            timed = [(t, n) for n, t in enumerate(times) if t is not None]
            best = min(timed)[1] if timed else None
            print(f"\n{tuner.name} {key}")
            for n, (cfg, t, stack) in enumerate(zip(tuner.configs, times, stacks, strict=True)):
                ms = "-" if t is None else f"{t * 1e3:.3f}"
                mark = " <- chosen" if n == best else ""
                print(f"  {ms:>9} ms  stack {stack!s:>5}  {dict(cfg)}{mark}")
            if best is not None and stacks[best]:
                spilled_winners.append((tuner.name, key, stacks[best]))
    print(f"\nwinners that spill: {spilled_winners or 'none'}")


if __name__ == "__main__":
    main()
