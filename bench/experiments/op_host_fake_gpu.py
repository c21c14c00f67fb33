"""An operator's host path on the CPU, no GPU needed: the cuda target over tests/support's fake
driver (device memory in host memory, launches recorded and dropped, cubins faked, tuning off),
so that what a call costs before the GPU runs anything can be timed and profiled where no
device is lent. Session 35: `flash_attn_with_kvcache` at one query took 112 us a call
(contiguous) and 189 us (paged) on the H100 machine against 34-44 us of kernel; here (2-core
CPU, the first tuner configuration: a split and a combine) about 130 and 140 us, most of it
the split path's partial allocations, partitions and two launches, and the tuner's key.

    .venv/bin/python bench/experiments/op_host_fake_gpu.py [--profile] [--no-replay]

fearless.ops' warm path (ops/_replay.py) runs where torch is imported: --no-replay leaves torch
out, so that every call takes the operator's slow path.

Times on the fake driver are relative: a faster CPU and the real driver's launch differ.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["FEARLESS_AUTOTUNE"] = "0"  # the first configuration: nothing timed on a fake GPU
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import numpy as np

import fearless as fl
from fearless import ops
from support.fake_memory import install_tile_gpu


def kvcache_calls() -> dict[str, Callable[[], Any]]:
    """flash_attn_with_kvcache at one query, (8, 1, 32, 128) bf16 over 8 KV heads and 2048
    cached keys, contiguous and in pages of 256."""
    b, h, hk, d, page, s = 8, 32, 8, 128, 256, 2048
    q = fl.zeros((b, 1, h, d), dtype=fl.bf16)
    k, v = (fl.zeros((b, s, hk, d), dtype=fl.bf16) for _ in range(2))
    kb, vb = (fl.zeros((b * s // page, page, hk, d), dtype=fl.bf16) for _ in range(2))
    lens = fl.asarray(np.full(b, s, np.int32))
    perm = np.random.default_rng(0).permutation(b * s // page).astype(np.int32)
    table = fl.asarray(perm.reshape(b, s // page))
    return {
        "kvcache contiguous": lambda: ops.flash_attn_with_kvcache(q, k, v, lens, None, 0.088),
        "kvcache paged": lambda: ops.flash_attn_with_kvcache(q, kb, vb, lens, table, 0.088),
    }


def moe_calls() -> dict[str, Callable[[], Any]]:
    """fused_moe at one token of Qwen3-30B-A3B's MoE layer (hidden 2048, intermediate 768,
    128 experts, top 8), bf16 weights and int64 ids as a router gives them."""
    t, hidden, inter, experts, topk = 1, 2048, 768, 128, 8
    x = fl.zeros((t, hidden), dtype=fl.bf16)
    w1 = fl.zeros((experts, 2 * inter, hidden), dtype=fl.bf16)
    w2 = fl.zeros((experts, hidden, inter), dtype=fl.bf16)
    weights = fl.zeros((t, topk), dtype=fl.bf16)
    ids = fl.asarray(np.arange(t * topk, dtype=np.int64).reshape(t, topk))
    return {"fused_moe one token": lambda: ops.fused_moe(x, w1, w2, weights, ids)}


def main() -> None:
    if "--no-replay" not in sys.argv:
        import torch  # noqa: F401  (ops/_replay.py replays only where torch is loaded)
    fake = install_tile_gpu(setattr)  # for good: this process runs nothing else
    fake.cuLaunchKernel = lambda *a: (fake.CUresult.CUDA_SUCCESS,)  # launches dropped, unread
    for name, call in {**kvcache_calls(), **moe_calls()}.items():
        for _ in range(5):
            call()
        t = time.perf_counter()
        for _ in range(500):
            call()
        print(f"{name}: {(time.perf_counter() - t) / 500 * 1e6:.1f} us a call", flush=True)
        if "--profile" in sys.argv:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(300):
                call()
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
