"""How the suite times things: device time with CUDA events, host time per launch, budgets.

Device time (`DeviceTimer.time`), the method of DESIGN section 6 and METHOD.md: warm-up runs
first (module load, JIT and autotuning stay out of the numbers), then an estimate from a few
runs sets the repetition count so each implementation gets about the same device time; before
every timed run a 256 MB buffer is written, which evicts the H200's 60 MB L2, so no run finds
its inputs in cache; each run sits between its own pair of CUDA events (torch's), and the
result is the median with the 20th and 80th percentiles as its spread. The flush also keeps
the host ahead of the device, so a slow launch path does not leave the GPU idle inside a
timed region.

Host time per launch (`host_per_launch`): launches back to back from Python, timed with
`perf_counter` over many launches, median of several samples; the device is synchronised
before each sample and after it, outside the clock.

Tuning (`weigh_every_configuration`): the suite times kernels as a user's later processes run
them, so fearless's autotuner waits for every configuration's compile in it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FLUSH_BYTES = 256 << 20


@dataclass(frozen=True)
class Budget:
    """How long to spend per measurement. `quick` trades precision for a shorter run."""

    target_ms: float  # device time spent timing one implementation of one case
    min_reps: int
    max_reps: int
    warmup: int
    launches: int  # launches per host-timing sample
    samples: int  # host-timing samples (the median is reported)
    compile_runs: int  # subprocesses per compile measurement (the first is the cold one)


FULL = Budget(
    target_ms=400.0, min_reps=10, max_reps=200, warmup=3, launches=10000, samples=7, compile_runs=3
)
QUICK = Budget(
    target_ms=120.0, min_reps=5, max_reps=50, warmup=2, launches=2000, samples=5, compile_runs=2
)


@dataclass(frozen=True)
class Timing:
    median: float
    p20: float
    p80: float
    reps: int


def quantile(sorted_values: list[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated linearly."""
    if not sorted_values:
        raise ValueError("no values")
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarise(values: list[float]) -> Timing:
    ordered = sorted(values)
    return Timing(
        statistics.median(ordered), quantile(ordered, 0.2), quantile(ordered, 0.8), len(ordered)
    )


def reps_for(estimate_ms: float, budget: Budget) -> int:
    """Repetitions that fill the budget's device time, within its bounds."""
    if estimate_ms <= 0:
        return budget.max_reps
    return max(budget.min_reps, min(budget.max_reps, int(budget.target_ms / estimate_ms)))


class DeviceTimer:
    """CUDA-event timing through torch, with an L2 flush before every timed run."""

    def __init__(self, torch: Any, budget: Budget) -> None:
        self.torch = torch
        self.budget = budget
        self._flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def flush(self) -> None:
        self._flush.zero_()

    def time(self, fn: Callable[[], Any]) -> Timing:
        """Median device time of `fn` in milliseconds (see the module doc)."""
        torch, budget = self.torch, self.budget
        for _ in range(budget.warmup):
            fn()
        torch.cuda.synchronize()
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        self.flush()
        begin.record()
        for _ in range(3):
            fn()
        end.record()
        end.synchronize()
        reps = reps_for(begin.elapsed_time(end) / 3, budget)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for s, e in zip(starts, ends, strict=True):
            self.flush()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return summarise([s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)])


def host_per_launch(
    fn: Callable[[], Any], synchronize: Callable[[], None], budget: Budget
) -> Timing:
    """Host microseconds per call of `fn`, launched back to back (see the module doc)."""
    for _ in range(max(10, budget.launches // 10)):
        fn()
    synchronize()
    samples = []
    for _ in range(budget.samples):
        synchronize()
        t0 = time.perf_counter()
        for _ in range(budget.launches):
            fn()
        t1 = time.perf_counter()
        synchronize()
        samples.append((t1 - t0) / budget.launches * 1e6)
    return summarise(samples)


def weigh_every_configuration() -> None:
    """Turn off fl.autotune's first-call compile budget (`autotune_timing.COMPILE_BUDGET_S`) in
    this process. With it, a key's first tuning may leave a slow-compiling configuration out
    and keep that winner for the process only, while the next process tunes in full. A
    benchmark that times after the first call measures that later state. The tuning family's
    probes, which measure the first call itself, run in processes of their own and keep it."""
    from fearless import autotune_timing

    autotune_timing.COMPILE_BUDGET_S = None
