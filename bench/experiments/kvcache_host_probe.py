"""Session 36: `flash_attn_with_kvcache` at one query, its warm path (ops/_replay.py, now that
the operator keeps its error words and re-registers its table check on a replay) against its
slow path (the same operator's undecorated function, `__wrapped__`: what every call took
before) and torch's SDPA, in one process on one GPU.

Session 35 measured the slow path at 112 us a call contiguous and 189 us paged on the H100
(200 calls enqueued back to back), against 34-44 us of kernel: the bench's 2048-key cases ran
at 0.43-0.74 of torch. Prints, per case: host us a call (200 calls enqueued, no sync), ms a
call end to end (CUDA events over the same loop), each for the warm and the slow path, and
torch's ms (the contiguous cache; its paged peer would gather pages first).

    EXP=kvcache_host_probe.py bash bench/h200_run.sh OUT exp
"""

from __future__ import annotations

import functools

import torch
from cuda_timing import events_ms, host_us
from kvcache_decode_configs import paged

import fearless as fl
from fearless import ops

B, H, HK, D, REPS = 8, 32, 8, 128, 200


def main() -> None:
    torch.manual_seed(0)
    warm = ops.flash_attn_with_kvcache
    slow = warm.__wrapped__  # type: ignore[attr-defined]
    sdpa = torch.nn.functional.scaled_dot_product_attention
    print(f"{'case':22s} {'warm us':>8s} {'slow us':>8s} {'warm ms':>8s} {'slow ms':>8s} "
          f"{'torch ms':>8s}  warm x torch, slow x torch (speed)")  # fmt: skip
    for s in (2048, 16384):
        q = torch.randn(B, 1, H, D, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(B, s, HK, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        lens = torch.full((B,), s, dtype=torch.int32, device="cuda")
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        ref = events_ms(lambda qt=qt, kt=kt, vt=vt: sdpa(qt, kt, vt, enable_gqa=True), REPS, 5)
        kb, vb, table = paged(k, v)
        for name, kk, vv, tt in (("contiguous", k, v, None), ("paged", kb, vb, table)):
            want = warm(q, kk, vv, lens, tt)
            got = slow(q, kk, vv, lens, tt)
            fl.synchronize()  # the table checks of both paths: nothing to raise
            assert torch.equal(want, got), f"{name} {s}: the replay differs from the slow path"
            plans = [type(p).__name__ for p in warm.plans.values()]  # type: ignore[attr-defined]
            calls = [functools.partial(fn, q, kk, vv, lens, tt) for fn in (warm, slow)]
            row = [host_us(c, REPS) for c in calls] + [events_ms(c, REPS, 5) for c in calls]
            fl.synchronize()
            print(f"{name + ' ' + str(s):22s} {row[0]:8.1f} {row[1]:8.1f} {row[2]:8.4f} "
                  f"{row[3]:8.4f} {ref:8.4f}  {ref / row[2]:9.2f} {ref / row[3]:10.2f}  "
                  f"plans {plans}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
