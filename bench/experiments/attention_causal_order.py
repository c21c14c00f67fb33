"""Session 30: does the causal forward gain from running each head's longest query tiles
first? kernels_attention.LONGEST_FIRST numbers the query axis from its last tile
(`tile.row_major(reverse=(2,))`, FlashAttention-3's order) instead of the first; off until
this says so.

Prints ms per causal forward (no grad, tuning on: the first call of each shape tunes) of
fearless with the order off and on, beside torch's SDPA, and at head dim 128 per forward and
backward (whose dq kernel takes the order too), at (B, H, L, D) bf16 from 1k to 8k
tokens, head dims 64 and 128. Each shape is timed with the order off, on, off again, so that a
clock drift shows. Run on the GPU machine:
`EXP=attention_causal_order.py bash bench/h200_run.sh OUT exp`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from cuda_timing import events_ms
from train_host_parts import training

from fearless import ops
from fearless.ops import attention as A
from fearless.ops import kernels_attention as KA

SHAPES = [(4, 32, 1024, 128), (4, 32, 4096, 64), (4, 32, 4096, 128), (2, 32, 8192, 64),
          (2, 32, 8192, 128)]  # fmt: skip


REPLAYED = (A.scaled_dot_product_attention, A.scaled_dot_product_attention_lse,
            A.scaled_dot_product_attention_backward)  # fmt: skip


def timed_with(module: Any, setting: str, value: Any, call: Callable[[], Any]) -> float:
    """ms per `call` with `module.setting` = value, put back after (the attention operators'
    replays dropped before and after: a replay would launch what it recorded)."""
    saved = getattr(module, setting)
    setattr(module, setting, value)
    for fn in REPLAYED:
        fn.plans.clear()
    try:
        return events_ms(call)
    finally:
        setattr(module, setting, saved)
        for fn in REPLAYED:
            fn.plans.clear()


def _timed(call: Callable[[], Any], on: bool) -> float:
    """ms per `call` with LONGEST_FIRST `on`."""
    return timed_with(KA, "LONGEST_FIRST", on, call)


def main() -> None:
    torch.manual_seed(0)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    print(f"{'shape':26s} {'off':>8s} {'on':>8s} {'off':>8s} {'torch':>8s}  (ms, bf16 causal)")
    for b, h, n, d in SHAPES:
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        label = "x".join(map(str, (b, h, n, d)))
        fwd = functools.partial(ops.scaled_dot_product_attention, q, k, v, is_causal=True)
        times = [_timed(fwd, on) for on in (False, True, False)]
        ref = events_ms(functools.partial(sdpa, q, k, v, is_causal=True))
        print(f"{label + ' fwd':26s} {times[0]:8.3f} {times[1]:8.3f} {times[2]:8.3f} {ref:8.3f}")
        if d > 64:  # the backward's dq kernel (the atomic dQ at D <= 64 has none)
            leaves = [t.requires_grad_() for t in (q, k, v)]
            dout = torch.randn_like(q)
            train = training(ops.scaled_dot_product_attention, *leaves, dout, True)
            times = [_timed(train, on) for on in (False, True, False)]
            ref = events_ms(training(sdpa, *leaves, dout, True))
            print(f"{label + ' fwd+bwd':26s} {times[0]:8.3f} {times[1]:8.3f} {times[2]:8.3f} "
                  f"{ref:8.3f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
