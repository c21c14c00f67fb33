"""Session 27: where ops.group_gemm's time goes at small groups (4 x 1024^3 f16): GPU time per
call, host time per call, and a cProfile of the host side (does the slow path run each call?)."""

import cProfile
import pstats
import time

import torch

from fearless import ops

torch.manual_seed(0)
for count, n in ((4, 1024), (16, 1024)):
    As = [torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(count)]
    Bs = [torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(count)]
    ops.group_gemm(As, Bs)  # tune
    torch.cuda.synchronize()
    for label, f in (
        ("fearless", lambda: ops.group_gemm(As, Bs)),
        ("torch", lambda: [a @ b for a, b in zip(As, Bs)]),
    ):
        for _ in range(5):
            f()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(50):
            f()
        host = (time.perf_counter() - t) / 50
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t) / 50
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(50):
            f()
        e1.record()
        torch.cuda.synchronize()
        print(f"{count}x{n} {label}: host {host * 1e6:.1f} us/call, wall {wall * 1e6:.1f}, "
              f"events {e0.elapsed_time(e1) / 50 * 1e3:.1f} us/call")
    if n == 1024 and count == 4:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(20):
            ops.group_gemm(As, Bs)
        pr.disable()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(18)
