"""Session 30: does the causal forward gain from running each head's longest query tiles
first? kernels_attention.LONGEST_FIRST numbers the query axis from its last tile
(`tile.row_major(reverse=(2,))`, FlashAttention-3's order) instead of the first; off until
this says so.

Prints ms per causal forward (no grad, tuning on: the first call of each shape tunes) of
fearless with the order off and on, beside torch's SDPA, at (B, H, L, D) bf16 from 1k to 8k
tokens, head dims 64 and 128. Each shape is timed with the order off, on, off again, so that a
clock drift shows. Run on the GPU machine:
`EXP=attention_causal_order.py bash bench/h200_run.sh OUT exp`."""

from __future__ import annotations

import functools

import torch
from attention_backward_mask import _events_ms

from fearless import ops
from fearless.ops import kernels_attention as KA

SHAPES = [(4, 32, 1024, 128), (4, 32, 4096, 64), (4, 32, 4096, 128), (2, 32, 8192, 64),
          (2, 32, 8192, 128)]  # fmt: skip


def _forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, on: bool) -> float:
    """ms per fearless causal forward with LONGEST_FIRST `on` (the operator's replays dropped:
    a replay would launch the recorded order)."""
    KA.LONGEST_FIRST = on
    ops.scaled_dot_product_attention.plans.clear()
    try:
        return _events_ms(
            functools.partial(ops.scaled_dot_product_attention, q, k, v, is_causal=True)
        )
    finally:
        KA.LONGEST_FIRST = False
        ops.scaled_dot_product_attention.plans.clear()


def main() -> None:
    torch.manual_seed(0)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    print(f"{'shape':22s} {'off':>8s} {'on':>8s} {'off':>8s} {'torch':>8s}  (ms, bf16 causal)")
    for b, h, n, d in SHAPES:
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        times = [_forward(q, k, v, on) for on in (False, True, False)]
        ref = _events_ms(functools.partial(sdpa, q, k, v, is_causal=True))
        label = "x".join(map(str, (b, h, n, d)))
        print(f"{label:22s} {times[0]:8.3f} {times[1]:8.3f} {times[2]:8.3f} {ref:8.3f}", flush=True)


if __name__ == "__main__":
    main()
