"""Session 28: why a training call of attention (forward, then `.backward(dout)`, as the ops
family's attention_backward cases time it) costs fearless about 0.3 ms at short sequences,
where torch's SDPA takes 0.085 ms (H100, 4 x 32 x 256 x 64 f16, full), and why causal at 1024
is slower than full at 1024. Per shape and mask, for fearless and torch: host time per call
(the loop without a sync), wall time per call (with it), GPU time by CUDA events, then for
fearless the kernels one call launches with their GPU times (torch.profiler) and the host
functions that take the time (cProfile of 20 calls).

Session 29 adds the call through `torch.ops.fearless` (the custom op and torch's dispatcher,
the path before ops/torch_eager.py's eager autograd forms) beside `fearless.ops`'s.

Run on the GPU machine: `EXP=attention_train_small.py bash bench/h200_run.sh OUT exp`."""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections.abc import Callable
from typing import Any

import torch

from fearless import ops

SHAPES = ((4, 32, 256, 64), (4, 32, 1024, 64), (4, 32, 1024, 128))


def timed(call: Callable[[], Any], n: int = 50) -> tuple[float, float, float]:
    """(host, wall, events) microseconds per call of `call`, after a warm-up."""
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        call()
    host = (time.perf_counter() - t) / n
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t) / n
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        call()
    end.record()
    torch.cuda.synchronize()
    return host * 1e6, wall * 1e6, start.elapsed_time(end) / n * 1e3


def kernels_of(call: Callable[[], Any]) -> str:
    """The CUDA kernels one call launches, with their GPU time (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return str(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14))


def case(b: int, h: int, n: int, d: int, causal: bool) -> None:
    """One shape and mask: both implementations' times, then fearless's kernels and profile."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    q, k, v = (
        torch.randn(b, h, n, d, device="cuda", dtype=torch.float16).requires_grad_()
        for _ in range(3)
    )
    dout = torch.randn(b, h, n, d, device="cuda", dtype=torch.float16)

    def train(f: Callable[..., Any]) -> Callable[[], None]:
        def call() -> None:
            q.grad = k.grad = v.grad = None
            f(q, k, v, is_causal=causal).backward(dout)

        return call

    def forward() -> None:
        with torch.no_grad():
            ops.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def through_custom_op(q: Any, k: Any, v: Any, is_causal: bool) -> Any:
        # the path before ops/torch_eager.py (session 29): torch's dispatcher and custom ops
        return torch.ops.fearless.scaled_dot_product_attention_lse(q, k, v, None, is_causal)[0]

    fearless = train(ops.scaled_dot_product_attention)
    label = f"{b}x{h}x{n}x{d} {'causal' if causal else 'full'}"
    calls = (
        ("fearless", fearless),
        ("fearless custom op", train(through_custom_op)),
        ("torch", train(sdpa)),
        ("fearless fwd", forward),
    )
    for name, call in calls:
        host, wall, events = timed(call)
        print(
            f"{label} {name}: host {host:.1f} us/call, wall {wall:.1f}, events {events:.1f}",
            flush=True,
        )
    print(kernels_of(fearless))
    if n == 256:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(20):
            fearless()
        torch.cuda.synchronize()
        pr.disable()
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("cumulative").print_stats(22)
        print(out.getvalue())


def main() -> None:
    torch.manual_seed(0)
    for shape in SHAPES:
        for causal in (False, True):
            case(*shape, causal)


if __name__ == "__main__":
    main()
