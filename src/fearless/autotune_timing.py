"""How `fl.autotune` times a configuration (`measure`, with a `HostClock` on the simulator and a
`DeviceClock` on the GPU), which configurations it may leave untimed for their spills
(`spilling`) or their compile time (COMPILE_BUDGET_S), the progress it reports on stderr
(`Progress`), and the arguments it puts back around the timed calls: `keep` (a copy of an
array's contents, on the GPU for a GPU tensor, and what puts it back), `zero`, and `Watch` (the
arrays no `restore_value` or `reset_to_zero` names, caught when a second call changes them
again).

The progress line appears once tuning has run for PROGRESS_AFTER_S. On a terminal it is one
line redrawn in place (`\\r`); anywhere else (a log file, CI output) each step is a plain line
of its own, so lines never run into each other.
"""

from __future__ import annotations

import functools
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from .errors import FearlessError, FearlessWarning, KernelTypeError, OutOfMemoryError
from .frames import user_stacklevel
from .runtime.location import user_location
from .runtime.partition import Partition

PROGRESS_AFTER_S = 1.0  # tuning shorter than this prints nothing
BUDGET_S = 0.05  # timed calls per configuration fill about this much time ...
MAX_REPS = 50  # ... within these bounds
MIN_REPS = 1


def measure(
    call: Callable[[], Any],
    restore: Callable[[], None],
    clock: Clock,
    check: Callable[[], Callable[[], None]] | None = None,
) -> float:
    """Seconds per call: the median of timed calls, after one warm-up call that compiles.
    `check`, if given, is called between the warm-up and the first timed call (which follows
    it with no `restore`), and what it returns right after that call (the tuner's look at the
    arguments a call changes again, `Watch.check`)."""
    restore()
    call()
    clock.wait()
    restore()
    after = check() if check is not None else None
    estimate = clock.time(call)
    if after is not None:
        after()
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
        self.failures = 0  # configurations that raised (`failed`)

    def show(self, n: int, total: int, cfg: Mapping[str, Any]) -> None:
        if time.perf_counter() - self.start < PROGRESS_AFTER_S:
            return
        self.shown = True
        if self.terminal:
            self._write(f"\rfearless: autotuning {self.name}: config {n + 1}/{total}\x1b[K")
        else:
            self._write(f"fearless: autotuning {self.name}: config {n + 1}/{total} {dict(cfg)}\n")

    def failed(self, n: int, total: int, cfg: Mapping[str, Any], error: str) -> None:
        """Configuration `n` of `total` raised `error` (its first line) and is skipped: a line
        of its own, once tuning has taken PROGRESS_AFTER_S."""
        self.failures += 1
        if time.perf_counter() - self.start < PROGRESS_AFTER_S:
            return
        self.shown = True
        line = (
            f"fearless: autotuning {self.name}: config {n + 1}/{total} {dict(cfg)} failed: {error}"
        )
        self._write(f"\r{line}\x1b[K\n" if self.terminal else f"{line}\n")

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
        if self.failures and best is not None:
            what += f"; {self.failures} failed and skipped"
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


# ------------------------------------------------------------ the arguments put back


def _array(value: Any) -> Any:
    """The array whose contents a call may change (a partition's tensor), or None."""
    from .runtime.tensor import Tensor

    if isinstance(value, Partition):
        value = value.tensor
    if isinstance(value, (np.ndarray, Tensor)) or _is_torch(value):
        return value
    return None


def _is_torch(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _nbytes(array: Any) -> int:
    if _is_torch(array):
        return int(array.numel() * array.element_size())
    return int(array.nbytes)


def keep(name: str, value: Any) -> Callable[[], None]:
    """A copy of `value`'s contents now, and the function that puts it back: on the array's
    own side (a GPU tensor's on the GPU where it fits, else in host memory)."""
    from .runtime.tensor import Tensor

    array = _array(value)
    if isinstance(array, np.ndarray):
        return functools.partial(np.copyto, array, array.copy())
    if isinstance(array, Tensor):
        host = array._host  # a moved tensor's memory: its partition still owns it
        if host is not None:
            return functools.partial(np.copyto, host, host.copy())
        from .runtime import driver
        from .runtime.device_errors import synchronize

        synchronize()
        ptr, nbytes = array.data_ptr, array.nbytes
        try:
            saved = driver.DeviceAllocation(nbytes)
        except OutOfMemoryError:  # no room beside it on the GPU: in host memory
            copy = np.empty(array.shape, array.dtype.np)
            driver.copy_device_to_host(copy, ptr)
            return functools.partial(driver.copy_host_to_device, ptr, copy)
        driver.copy_device_to_device(saved.ptr, ptr, nbytes)

        def put_back() -> None:
            driver.copy_device_to_device(ptr, saved.ptr, nbytes)  # `saved` lives as long

        return put_back
    if array is not None:  # torch
        view = array.detach()
        return functools.partial(view.copy_, view.clone())
    raise KernelTypeError(
        f"autotuning cannot restore `{name}`: a `{type(value).__name__}` is not an array it knows",
        user_location(),
        help="pass an fl.Tensor, a NumPy array or a torch tensor",
    )


def zero(name: str, value: Any) -> Callable[[], None]:
    """The function that zeroes `value`'s contents (`reset_to_zero`)."""
    from .runtime.tensor import Tensor

    array = _array(value)
    if isinstance(array, np.ndarray):
        return functools.partial(array.fill, 0)
    if isinstance(array, Tensor):
        if array._host is not None:
            return functools.partial(array._host.fill, 0)
        from .runtime import driver

        return functools.partial(driver.fill, array.data_ptr, 0, 1, array.nbytes)
    if array is not None:  # torch
        return array.detach().zero_  # type: ignore[no-any-return]
    return keep(name, value)  # raises: not an array


def _contents(array: Any) -> Any:
    """A copy of an array's contents to compare (`_differs`): in host memory, a torch
    tensor's beside it."""
    from .runtime.tensor import Tensor, public_view

    if isinstance(array, np.ndarray):
        return array.copy()
    if isinstance(array, Tensor):
        if array._host is not None:
            return public_view(array._host, array.dtype).copy()
        from .runtime import driver
        from .runtime.device_errors import synchronize

        synchronize()
        out = np.empty(array.shape, array.dtype.np)
        driver.copy_device_to_host(out, array.data_ptr)
        return public_view(out, array.dtype)
    return array.detach().clone()


# Two calls' contents of an argument within this of each other (relative, and of the largest
# magnitude in it) are the same: a sum by atomics may add in another order each call.
SAME_RTOL = 1e-2
COMPARE_CHUNK = 1 << 22  # elements widened to compare at a time (memory beside the copies)


def _differs(before: Any, after: Any) -> bool:
    """Whether an argument's contents after a second call differ from those after the first,
    beyond the rounding of sums taken in another order (SAME_RTOL). Floats compare in f32 (f64
    for f64), a chunk at a time; other dtypes exactly."""
    torch_side = _is_torch(before)
    kind = ("f" if before.dtype.is_floating_point else "i") if torch_side else before.dtype.kind
    if kind in "biuSUOMmc":  # exactly
        return not (bool(before.equal(after)) if torch_side else np.array_equal(before, after))

    def wide(x: Any) -> Any:
        if torch_side:
            return x.double() if x.element_size() == 8 else x.float()
        return x.astype(np.float64 if x.dtype.itemsize == 8 else np.float32)

    a_all, b_all = before.reshape(-1), after.reshape(-1)
    chunks = range(0, int(a_all.shape[0]), COMPARE_CHUNK)
    with np.errstate(all="ignore"):  # scratch memory holds any bits
        try:  # floats, ml_dtypes' bf16 and f8 (kind "V") among them
            largest = 0.0
            for at in chunks:
                a = wide(a_all[at : at + COMPARE_CHUNK])
                finite = abs(a[a.isfinite()] if torch_side else a[np.isfinite(a)])
                if finite.shape[0]:
                    largest = max(largest, float(finite.max()))
            atol = SAME_RTOL * largest
            for at in chunks:
                a, b = wide(a_all[at : at + COMPARE_CHUNK]), wide(b_all[at : at + COMPARE_CHUNK])
                if torch_side:
                    same = bool(b.isclose(a, rtol=SAME_RTOL, atol=atol, equal_nan=True).all())
                else:
                    same = bool(np.allclose(b, a, rtol=SAME_RTOL, atol=atol, equal_nan=True))
                if not same:
                    return True
        except (TypeError, ValueError):  # no numbers (a structured dtype): the bytes
            return bool(before.tobytes() != after.tobytes())
    return False


# The undeclared array arguments `Watch` copies, in bytes in all: past it, no more are watched.
WATCH_BYTES = 1 << 28  # 256 MiB: a copy and two reads back of each, on the first call only


class Watch:
    """The array arguments of a call that tunes which `restore_value` and `reset_to_zero` do
    not name (up to WATCH_BYTES of them), copied as tuning starts. The first timed call, which
    follows the warm-up with nothing put back, shows whether the function changes one again on
    a second call (`out += x`, `x *= 2`): such an argument is named in a FearlessWarning and
    put back, as `restore_value` would, before each later timed call and after tuning, so the
    call's result is right. The others' copies go then. Only a call that tunes pays for it."""

    def __init__(
        self, owner: str, named: Sequence[tuple[str, Any]], declared: Sequence[Any]
    ) -> None:
        """`named`: the call's arguments, (name, value); `declared`: those `restore_value` and
        `reset_to_zero` name, already put back."""
        self.name = owner
        self.saved: list[tuple[str, Any, Callable[[], None]]] = []  # (name, array, put back)
        self.flagged: list[Callable[[], None]] = []
        seen = {id(_array(value)) for value in declared}
        budget = WATCH_BYTES
        for name, value in named:
            array = _array(value)
            if array is None or id(array) in seen or _nbytes(array) > budget:
                continue
            seen.add(id(array))
            try:
                self.saved.append((name, array, keep(name, array)))
            except FearlessError:  # no room for a copy: not watched
                continue
            budget -= _nbytes(array)
        self.pending = bool(self.saved)

    def check(self) -> Callable[[], None]:
        """Between the warm-up and the first timed call: the contents the warm-up left; returns
        what compares them with the timed call's."""
        before = [(name, array, keep, _contents(array)) for name, array, keep in self.saved]

        def after() -> None:
            self.pending = False
            changed = [
                (name, keep) for name, array, keep, first in before
                if _differs(first, _contents(array))
            ]  # fmt: skip
            self.saved = []  # the unchanged ones' copies go
            if not changed:
                return
            self.flagged = [keep for _, keep in changed]
            names = ", ".join(f"`{name}`" for name, _ in changed)
            warnings.warn(
                f"fearless: `{self.name}` changed {names} again when the autotuner called it a "
                "second time: it adds into or changes in place an argument that `restore_value` "
                "does not name. Tuning calls it many times, so the call's contents were put "
                "back before each timed call and after tuning; list "
                f"{'it' if len(changed) == 1 else 'them'} in `restore_value=[...]` (or "
                "`reset_to_zero=[...]`)",
                FearlessWarning,
                stacklevel=user_stacklevel(),
            )

        return after

    def put_back(self) -> None:
        for keep in self.flagged:
            keep()

    def release(self) -> None:
        self.saved, self.flagged = [], []
