"""Session 35: the attention backward's dQ as one tiled atomic add a (query tile, key tile) pair
(`tile.atomic_store_add`, which tileiras issues as a TMA reduction, UTMAREDG) instead of a
`red.global.v4.f32` a four elements: up to which head dim does FlashAttention-2's dQ (dk_dv adds
dS K into an f32 dQ; no dq kernel, 5 products a pair instead of 8) now beat the dq kernel?

Prints ms per forward + backward (bf16, tuning on: the first call of each shape and setting
tunes) of `fearless.ops.scaled_dot_product_attention` with
kernels_attention_backward.DQ_BY_ATOMICS_UP_TO at 0 (three kernels: delta, dk_dv, dq), 64 (the
shipped value before this experiment), 128 and 256, beside torch's SDPA (its default backend),
and each setting's largest gradient error against torch's. Each shape runs the settings, then
the first again, so that a clock drift shows. Run on the GPU machine:
`EXP=attention_backward_dq.py bash bench/h200_run.sh OUT exp`."""

from __future__ import annotations

import torch
from attention_causal_order import timed_with
from cuda_timing import events_ms
from train_host_parts import training

from fearless import ops
from fearless.ops import kernels_attention_backward as B

SHAPES = [(4, 32, 4096, 64, True), (4, 32, 4096, 128, True), (4, 32, 4096, 128, False),
          (2, 32, 8192, 128, True), (2, 16, 4096, 256, True)]  # fmt: skip
SETTINGS = (0, 64, 128, 256, 0)


def _error(grads: list[torch.Tensor], want: list[torch.Tensor]) -> float:
    return max(float((g.float() - w.float()).abs().max()) for g, w in zip(grads, want, strict=True))


def main() -> None:
    torch.manual_seed(0)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    head = " ".join(f"{'atom<=' + str(s):>10s}" for s in SETTINGS)
    print(f"{'shape':24s} {head} {'torch':>8s}  (ms, bf16 forward + backward; max |grad err|)")
    for b, h, n, d, causal in SHAPES:
        q, k, v = (
            torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16).requires_grad_()
            for _ in range(3)
        )
        dout = torch.randn_like(q)
        label = "x".join(map(str, (b, h, n, d))) + (" causal" if causal else " full")
        ref = training(sdpa, q, k, v, dout, causal)
        ref()
        want = [t.grad.clone() for t in (q, k, v)]  # type: ignore[union-attr]
        times, errors = [], []
        for up_to in SETTINGS:
            train = training(ops.scaled_dot_product_attention, q, k, v, dout, causal)
            times.append(timed_with(B, "DQ_BY_ATOMICS_UP_TO", up_to, train))  # grads: its last run
            errors.append(_error([t.grad for t in (q, k, v)], want))  # type: ignore[misc]
        ref_ms = events_ms(ref)
        cols = " ".join(f"{t:10.3f}" for t in times)
        errs = " ".join(f"{e:10.2g}" for e in errors)
        print(f"{label:24s} {cols} {ref_ms:8.3f}\n{'':24s} {errs}", flush=True)


if __name__ == "__main__":
    main()
