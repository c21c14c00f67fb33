"""Session 30: where the 70 us go that a short attention training call spends beyond its parts.
Session 30's H100 run of train_host_parts.py (4, 32, 256, 64) f16 causal: training 293 us of
host time, but the bare autograd Function (113), the forward's replay (29) and the backward's
(81) add to 223; full: 244 against 100 + 21 + 49 = 170. And the causal backward's replay costs
32 us more than the full one's, for the same launches.

This prints, each at (4, 32, 256, 64) f16, causal and full:
  - host us per call (loops of N calls without a sync) of the backward's replay, of training,
    of training with autograd's device threads off (`set_multithreading_enabled(False)`: the
    backward runs in the calling thread), and of torch's SDPA training both ways;
  - the GPU's own time per call of each (CUDA events around N calls after a sync: the larger
    of host and GPU time), to tell a host-bound loop from a GPU-bound one;
  - whether the replayable operators on the way hold a plan (a replay) or a Never (the slow
    path every call), and why;
  - cProfile's top functions (by own time) of the backward's replay and of training with the
    device threads off, so that the backward's Python shows.

Run on the GPU machine: `EXP=train_host_profile.py bash bench/h200_run.sh OUT exp`."""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections.abc import Callable
from typing import Any

import torch

# the loops of train_host_parts.py, so that the two scripts' host times are one measure
from train_host_parts import N, host_us, make_case

from fearless import ops
from fearless.ops import attention as A


def wall_us(call: Callable[[], Any]) -> float:
    """Microseconds per call from a sync to a sync: the larger of host and GPU time."""
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(N):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / N * 1e6


def profile(label: str, call: Callable[[], Any], rows: int = 22) -> None:
    """cProfile's top `rows` functions by own time over N calls."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(N):
        call()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(rows)
    body = text.getvalue()
    print(f"--- cProfile {label} ({N} calls)")
    print(body[body.find("ncalls") :], flush=True)


def plans(label: str) -> None:
    """What each replayable operator on the way holds per key: a Plan or a Never (and why)."""
    for fn in (
        A.scaled_dot_product_attention_lse,
        A.scaled_dot_product_attention_backward,
        ops.scaled_dot_product_attention,
    ):
        held = getattr(fn, "plans", {})
        kinds = [
            f"Never({p.why})"
            if hasattr(p, "why")
            else f"Plan({p.source.count('    run')} launches, {p.source.count('= again')} allocs)"
            for p in held.values()
        ]
        print(f"{label} {fn.__name__}: {kinds}", flush=True)


def case(causal: bool) -> None:
    c = make_case(causal)
    label, bwd_replay, train = c.label, c.bwd_replay, c.train
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def one_thread(call: Callable[[], None]) -> Callable[[], None]:
        def wrapped() -> None:
            with torch.autograd.set_multithreading_enabled(False):
                call()

        return wrapped

    parts = (
        ("bwd replay", bwd_replay),
        ("training", train(ops.scaled_dot_product_attention)),
        ("training 1 thread", one_thread(train(ops.scaled_dot_product_attention))),
        ("torch training", train(sdpa)),
        ("torch training 1 thread", one_thread(train(sdpa))),
    )
    for name, call in parts:
        host = host_us(call)
        print(f"{label} {name:24s} {host:8.1f} us host {wall_us(call):8.1f} us wall", flush=True)
    plans(label)
    profile(f"{label} bwd replay", bwd_replay)
    profile(f"{label} training 1 thread", one_thread(train(ops.scaled_dot_product_attention)), 30)


def main() -> None:
    torch.manual_seed(0)
    for causal in (True, False):
        case(causal)


if __name__ == "__main__":
    main()
