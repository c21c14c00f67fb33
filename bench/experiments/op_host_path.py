"""Host time per call of a few fearless.ops operators on torch tensors, and where it goes.

The ops bench's DeviceTimer flushes L2 (about 85 us of GPU work) before each call, so an
operator whose host path is longer than that is timed by its host path. This prints each
operator's host time per call (calls enqueued back to back, no synchronisation between them)
beside its GPU time, then cProfile's top functions for the slowest. Run on the GPU machine:
`PYTHONPATH=src python3 bench/experiments/op_host_path.py`.
"""

from __future__ import annotations

import cProfile
import pstats
import time
from collections.abc import Callable

import torch

from fearless import ops


def host_us(fn: Callable[[], object], n: int = 300) -> float:
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t) / n
    torch.cuda.synchronize()
    return host * 1e6


def gpu_us(fn: Callable[[], object], n: int = 100) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / n


def main() -> None:
    dev, bf = "cuda", torch.bfloat16
    x16 = torch.randn(1 << 20, device=dev, dtype=torch.float16)
    rows = torch.randn(4096, 1024, device=dev, dtype=bf)
    w = torch.randn(1024, device=dev, dtype=bf)
    q = torch.randn(1, 32, 1, 128, device=dev, dtype=bf)
    k, v = (torch.randn(1, 8, 8192, 128, device=dev, dtype=bf) for _ in range(2))
    q2 = torch.randn(8, 32, 1, 128, device=dev, dtype=bf)
    k2, v2 = (torch.randn(8, 32, 2048, 128, device=dev, dtype=bf) for _ in range(2))
    cases: dict[str, Callable[[], object]] = {
        "relu f16 2^20": lambda: ops.relu(x16),
        "rms_norm bf16 4096x1024": lambda: ops.rms_norm(rows, (1024,), w),
        "softmax bf16 4096x1024": lambda: ops.softmax(rows, -1),
        "decode 1x32(8)x8192": lambda: ops.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        "decode 8x32x2048": lambda: ops.scaled_dot_product_attention(q2, k2, v2),
        "torch relu (for scale)": lambda: torch.relu(x16),
    }
    for name, fn in cases.items():
        print(f"{name:28} host {host_us(fn):8.1f} us/call, GPU {gpu_us(fn):8.1f} us/call")
    for name in ("decode 1x32(8)x8192", "relu f16 2^20"):
        prof = cProfile.Profile()
        fn = cases[name]
        prof.enable()
        for _ in range(200):
            fn()
        prof.disable()
        torch.cuda.synchronize()
        print(f"== {name}: cProfile, 200 calls")
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
