"""Session 35: the split-KV decode of `flash_attn_with_kvcache` (ops/kernels_kvcache_decode.py)
per tuner configuration, beside the general kernel it replaced at one query and torch's SDPA:
the bench's paged case at 2048 keys ran at 0.43 of torch (0.22 ms) where the contiguous one ran
at 0.74 and the 16384-key ones at 1.0 and 2.5.

Prints ms per call at q (8, 1, 32, 128) bf16 over 8 KV heads, contiguous and in pages of 256
(a shuffled table), for each configuration of KVCACHE_DECODE_CONFIGS (no tuning: the tuned
function's body), the general kernel (`kvcache_attention_tuned`, tuned) and torch. Run on the
GPU machine: `EXP=kvcache_decode_configs.py bash bench/h200_run.sh OUT exp`."""

from __future__ import annotations

from typing import Any

import torch
from cuda_timing import events_ms

import fearless as fl
from fearless.ops._device_checks import NO_ERROR
from fearless.ops.kernels_kvcache import kvcache_attention_tuned
from fearless.ops.kernels_kvcache_decode import KVCACHE_DECODE_CONFIGS, kvcache_decode_tuned
from fearless.ops.kernels_rows import sm_count

B, H, HK, D, PAGE = 8, 32, 8, 128, 256


def paged(k: Any, v: Any) -> tuple[Any, Any, Any]:
    """The contiguous caches k, v (B, S, HK, D) in pages of PAGE rows at shuffled block ids:
    (k blocks, v blocks, the (B, S / PAGE) int32 block table)."""
    b, s = k.shape[:2]
    blocks = b * s // PAGE
    perm = torch.randperm(blocks, device=k.device)
    table = perm.view(b, s // PAGE).to(torch.int32)
    kb, vb = (torch.empty(blocks, PAGE, *k.shape[2:], device=k.device, dtype=k.dtype)
              for _ in range(2))  # fmt: skip
    kb[perm], vb[perm] = (
        k.reshape(blocks, PAGE, *k.shape[2:]),
        v.reshape(blocks, PAGE, *k.shape[2:]),
    )
    return kb, vb, table


def main() -> None:
    torch.manual_seed(0)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for s in (2048, 16384):
        q = torch.randn(B, 1, H, D, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(B, s, HK, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        lens = torch.full((B,), s, dtype=torch.int32, device="cuda")
        ref = events_ms(lambda q=q, k=k, v=v: sdpa(q.transpose(1, 2), k.transpose(1, 2),
                                                     v.transpose(1, 2), enable_gqa=True))  # fmt: skip
        kb, vb, table = paged(k, v)
        for name, kk, vv, tt in (("contiguous", k, v, None), ("paged", kb, vb, table)):
            fq = fl.asarray(q.view(B, HK, H // HK, D))
            fk, fv, fs = fl.asarray(kk), fl.asarray(vv), fl.asarray(lens)
            ft = None if tt is None else fl.asarray(tt)
            err = fl.asarray(torch.full((2,), NO_ERROR, dtype=torch.int32, device="cuda"))
            out = fl.asarray(torch.empty(B, HK, H // HK, D, device="cuda", dtype=torch.bfloat16))
            cols = []
            for cfg in KVCACHE_DECODE_CONFIGS:
                args = (fq, fk, fv, fs, ft, err, out, 0.088, (False, False), 0, 1.0, sm_count())
                cols.append(events_ms(lambda a=args, c=cfg: kvcache_decode_tuned.fn(*a, **c)))
            gq = fl.asarray(q)
            gout = fl.asarray(torch.empty(B, 1, H, D, device="cuda", dtype=torch.bfloat16))
            gargs = (gq, fk, fv, fs, ft, err, gout, 0.088, H // HK, (False, False, False, False),
                     0, 0, 1.0)  # fmt: skip
            general = events_ms(lambda a=gargs: kvcache_attention_tuned(*a))
            shown = " ".join(f"{c:.4f}" for c in cols)
            print(f"S {s:5d} {name:10s} configs {shown} | general {general:.4f} | torch {ref:.4f}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
