"""How `fl.autotune` times a configuration (`measure`, with a `HostClock` on the simulator and a
`DeviceClock` on the GPU), which configurations it may leave untimed for their spills
(`spilling`) or their compile time (COMPILE_BUDGET_S), and the progress it reports on stderr
(`Progress`).

The progress line appears once tuning has run for PROGRESS_AFTER_S. On a terminal it is one
line redrawn in place (`\\r`); anywhere else (a log file, CI output) each step is a plain line
of its own, so lines never run into each other.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

PROGRESS_AFTER_S = 1.0  # tuning shorter than this prints nothing
BUDGET_S = 0.05  # timed calls per configuration fill about this much time ...
MAX_REPS = 50  # ... within these bounds
MIN_REPS = 1


def measure(call: Callable[[], Any], restore: Callable[[], None], clock: Clock) -> float:
    """Seconds per call: the median of timed calls, after one warm-up call that compiles."""
    restore()
    call()
    clock.wait()
    restore()
    estimate = clock.time(call)
    reps = max(MIN_REPS, min(MAX_REPS, int(BUDGET_S / max(estimate, 1e-9))))
    times = [estimate]
    for _ in range(reps - 1):
        restore()
        times.append(clock.time(call))
    return statistics.median(times)


class Clock:
    def time(self, call: Callable[[], Any]) -> float:
        raise NotImplementedError

    def wait(self) -> None:
        raise NotImplementedError


class HostClock(Clock):
    """Wall time (the simulator: its launches finish before they return)."""

    def time(self, call: Callable[[], Any]) -> float:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    def wait(self) -> None:
        return None


class DeviceClock(Clock):
    """Device time between two CUDA events on the legacy default stream, which orders them
    after the work of every blocking stream (fearless's and torch's default ones);
    `fl.synchronize` after each call raises device errors.

    Ahead of the start event the stream gets a memset of FLUSH_BYTES, which flushes L2 as the
    benchmarks do, and a spin kernel (`runtime/spin.py`) that keeps the GPU busy for `gate`
    seconds while the host runs the call's Python and enqueues its kernels. The events then
    time the kernels, not the host: without the wait a 10 us kernel behind 50 us of Python
    measures 60 us, and small shapes rank configurations by host noise. The gate follows the
    host: each call sets the next one to twice its host time (at least GATE_S), and a call
    whose host time outran its gate is timed again behind the longer one."""

    FLUSH_BYTES = 256 << 20
    GATE_S = 200e-6  # the shortest gate
    MAX_GATE_S = 0.05

    def __init__(self) -> None:
        from .runtime import driver
        from .runtime.spin import Spinner

        self.driver = driver
        d = driver.cu()
        self.start = driver.call("cuEventCreate", d.cuEventCreate, 0)
        self.end = driver.call("cuEventCreate", d.cuEventCreate, 0)
        self.stream = d.CUstream(0)
        self.scratch = driver.DeviceAllocation(self.FLUSH_BYTES)
        self.spinner = Spinner()
        self.spinner.load()  # not inside the first timed call: the driver compiles it
        self.gate = self.GATE_S

    def time(self, call: Callable[[], Any]) -> float:
        while True:
            gate = self.gate
            seconds, host = self._time_once(call)
            self.gate = min(self.MAX_GATE_S, max(self.GATE_S, 2 * host))
            if host < 0.8 * gate or gate >= self.MAX_GATE_S:
                return seconds

    def _time_once(self, call: Callable[[], Any]) -> tuple[float, float]:
        """(device seconds between the events, host seconds from the spin to the end event)."""
        d, call_driver = self.driver.cu(), self.driver.call
        call_driver(
            "cuMemsetD32Async",
            d.cuMemsetD32Async,
            self.scratch.ptr,
            0,
            self.FLUSH_BYTES // 4,
            self.stream,
        )
        host = time.perf_counter()
        self.spinner.spin(self.stream, self.gate)
        call_driver("cuEventRecord", d.cuEventRecord, self.start, self.stream)
        call()
        call_driver("cuEventRecord", d.cuEventRecord, self.end, self.stream)
        host = time.perf_counter() - host
        self.wait()
        ms = call_driver("cuEventElapsedTime", d.cuEventElapsedTime, self.start, self.end)
        return float(ms) * 1e-3, host

    def wait(self) -> None:
        from .runtime.device_errors import synchronize

        synchronize()

    def __del__(self) -> None:
        d = self.driver.cu()
        for event in (getattr(self, "start", None), getattr(self, "end", None)):
            if event is not None:
                d.cuEventDestroy(event)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


class Progress:
    """What tuning reports on stderr once it has taken more than PROGRESS_AFTER_S: on a
    terminal one line redrawn in place, elsewhere one plain line per step."""

    def __init__(self, name: str, key: Hashable) -> None:
        self.name, self.key = name, key
        self.start = time.perf_counter()
        self.shown = False
        self.terminal = _is_terminal(sys.stderr)
        self._compiling = -1  # the count last reported by `compiling`

    def show(self, n: int, total: int, cfg: Mapping[str, Any]) -> None:
        if time.perf_counter() - self.start < PROGRESS_AFTER_S:
            return
        self.shown = True
        if self.terminal:
            self._write(f"\rfearless: autotuning {self.name}: config {n + 1}/{total}\x1b[K")
        else:
            self._write(f"fearless: autotuning {self.name}: config {n + 1}/{total} {dict(cfg)}\n")

    def compiling(self, left: int, total: int) -> None:
        """While the timing waits for compiles: how many of the `total` configurations to time
        are still compiling (a plain line only when the count changes)."""
        if time.perf_counter() - self.start < PROGRESS_AFTER_S:
            return
        if not self.terminal and left == self._compiling:
            return
        self.shown, self._compiling = True, left
        line = f"fearless: autotuning {self.name}: {left} of {total} configurations compiling"
        self._write(f"\r{line}\x1b[K" if self.terminal else f"{line}\n")

    def done(
        self,
        best: Mapping[str, Any] | None,
        seconds: float | None,
        late: int = 0,
        shortlist: tuple[int, int] | None = None,
    ) -> None:
        """The closing line; `late`: configurations left out still compiling (COMPILE_BUDGET_S);
        `shortlist`: (timed, of all) where only the tuning tables' nearest winners were timed."""
        elapsed = time.perf_counter() - self.start
        if not self.shown and elapsed < PROGRESS_AFTER_S:
            return
        if best is None or seconds is None:
            what = "no configuration ran"
        else:
            what = f"chose {dict(best)} ({seconds * 1e3:.3f} ms)"
        if late:
            what += f"; {late} still compiling past the {COMPILE_BUDGET_S:g} s budget left out"
        if shortlist is not None:
            what += (
                f"; {shortlist[0]} of {shortlist[1]} configurations timed, the tuning tables' "
                "nearest winners (FEARLESS_AUTOTUNE_FULL=1 times all)"
            )
        line = f"fearless: autotuned {self.name} in {elapsed:.1f} s: {what}"
        self._write(f"\r{line}\x1b[K\n" if self.terminal else f"{line}\n")

    @staticmethod
    def _write(text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()


# With SKIP_SPILLING, a configuration whose kernels spill SPILL_PRUNE_BYTES a thread or more
# (local memory, read from the cubins the compile-ahead pass made) is not timed when another
# spills nothing. No spilling configuration won anywhere bench/experiments/spills_vs_times.py
# looked (H100, session 19: GEMM at 4096^3 and 16384^3, attention forward and backward at D 64
# and 128, layer_norm at 16,384 columns): 1 KB and more ran 3 to 30x slower than the winner
# (TileGym's (256, 256) GEMM tiles over 2-CTA clusters, 1.8 KB: 200 ms against 15), 152 to
# 336 bytes 1.5 to 4x, while 40 and 64 bytes ran within 5% of it. `Autotuned.spills` keeps
# each key's figures beside `timings`.
SKIP_SPILLING = True
SPILL_PRUNE_BYTES = 128

# A first call at a new key waits for its slowest compile: a persistent TMA row kernel takes
# tileiras 2.2 to 2.5 s (layer_norm, softmax at 5120 columns) where the other configurations take
# 0.2 to 0.9, and 16 of them compiling side by side stretch it further (H100, session 20: softmax
# and layer_norm tuned in 6.1 and 6.8 s, rms_norm, whose persistent TMA form compiles in 0.4 s,
# in 2.0). With COMPILE_BUDGET_S set, once the tuning of a key has run that long and every
# configuration that finished compiling is timed, those still compiling are left out (None in
# `timings`, like a configuration that failed) and the winner is taken among the rest; their
# compiles finish on the worker threads (into the disk cache). Such a winner serves this process
# only: it is not stored on disk, so the next process tunes the key again, in full, from cached
# cubins. None waits for every compile: `fearless tune`, which writes the shipped tables, does
# (cli/tune.py), so a table's entry weighs every configuration.
COMPILE_BUDGET_S: float | None = 2.0


def spilling(stacks: dict[int, int | None], keep: int | None = None) -> set[int]:
    """The configurations (indices) not to time: those that spill SPILL_PRUNE_BYTES or more a
    thread, when some other configuration spills nothing; `keep` (a table's or the disk's
    stale winner) is always timed."""
    if not any(stack == 0 for stack in stacks.values()):
        return set()
    return {n for n, stack in stacks.items() if spills_much(stack) and n != keep}


def spills_much(stack: int | None) -> bool:
    """Whether a configuration's stack a thread (None: not known) is SPILL_PRUNE_BYTES or more:
    not worth timing beside one that spills nothing."""
    return stack is not None and stack >= SPILL_PRUNE_BYTES
