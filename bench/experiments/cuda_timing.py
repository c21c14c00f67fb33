"""The experiments' two timings of a call on the GPU: `events_ms`, the time a call takes end to
end (CUDA events around `reps` calls back to back, after a warm-up: the first calls tune and
compile), and `host_us`, the host time a call takes to enqueue its work (`reps` calls with no
synchronisation; a call that waits for the GPU shows the GPU's time here)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def events_ms(call: Callable[[], Any], reps: int = 20, warmup: int = 3) -> float:
    """ms a call, by CUDA events over `reps` calls after `warmup` ones."""
    import torch

    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def host_us(call: Callable[[], Any], reps: int = 200, warmup: int = 5) -> float:
    """us of host time a call, over `reps` calls enqueued back to back after `warmup` ones."""
    import torch

    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        call()
    host = (time.perf_counter() - t) / reps * 1e6
    torch.cuda.synchronize()
    return host
