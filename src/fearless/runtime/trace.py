"""Recording what one call did on the GPU, so that ops/_replay.py can do it again without the
Python that decided it.

While a `Trace` records on a thread, the layers below the operators report to it: every
prepared GPU launch its changing values (runtime/dispatch.py), every tensor the operator
allocates through ops/_io.py how to allocate it again, and every random seed it draws.
Anything else that does work a replay would skip (a dtype conversion, a contiguous copy, an
allocation outside torch) calls `refuse` with the reason, and the call is never replayed.
Two things a replay does as well, where the operator says so: a buffer the operator keeps
between calls (`keep`: a kernel's pointer into it is used as it is, and its first allocation is
not made again) and a host step after the launches (`after_launch`: the kvcache attention's
registration of its table check, called again with the replay's tensors in their places).
What only a first call does (an autotuner timing its configurations, a compile-ahead pass)
refuses with `first_call_only`: that call is not replayed, but the next one with its
arguments may be recorded. A thread that records nothing pays one module global read per
launch.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

# How many traces record now, on any thread: the hot paths read this before the thread-local.
recording = 0
_local = threading.local()
_count_lock = threading.Lock()


@dataclass
class Trace:
    """What one call did: `launches` (the launch callable and its changing values, in order),
    `allocations` (each tensor allocated and a function that allocates a new one like it),
    `seeds` (random seeds drawn, and the function that draws one), `kept` (buffers that outlive
    the call, used as they are), `steps` (host steps: after how many launches, the function and
    the tensors it takes), `refused` (why the call cannot be replayed, None while it can) and
    `lasting` (whether that holds for every call like it, not only a first one)."""

    launches: list[tuple[Callable[[list[Any], Any], None], tuple[Any, ...]]] = field(
        default_factory=list
    )
    allocations: list[tuple[Any, Callable[[], Any]]] = field(default_factory=list)
    seeds: list[tuple[int, Callable[[], int]]] = field(default_factory=list)
    kept: list[Any] = field(default_factory=list)
    steps: list[tuple[int, Callable[..., None], tuple[Any, ...]]] = field(default_factory=list)
    refused: str | None = None
    lasting: bool = False

    def launch(self, run: Callable[[list[Any], Any], None], values: Any) -> None:
        """A launch of `run(values, stream=None)` (the stream is taken at launch time)."""
        self.launches.append((run, tuple(values)))

    def allocation(self, tensor: Any, again: Callable[[], Any]) -> None:
        """`tensor` was allocated (and filled) by the call; `again()` does it once more."""
        self.allocations.append((tensor, again))

    def seed(self, value: int, draw: Callable[[], int]) -> None:
        """A random seed `value` was drawn by `draw()`: a replay draws a new one."""
        self.seeds.append((value, draw))

    def refuse(self, why: str, first_call_only: bool = False) -> None:
        """This call cannot be replayed, because of `why`; `first_call_only`: only a first call
        does what `why` says, so a later call like it may be recorded (a lasting reason, given
        before or after, is the one kept)."""
        if not first_call_only and not self.lasting:
            self.refused, self.lasting = why, True
        elif self.refused is None:
            self.refused = why


def current() -> Trace | None:
    """The trace recording on this thread, if any."""
    if not recording:
        return None
    return getattr(_local, "trace", None)


def allocated(tensor: Any, again: Callable[[], Any]) -> None:
    """Tell the trace recording on this thread, if any, of an allocation and how to redo it."""
    if recording:
        trace = getattr(_local, "trace", None)
        if trace is not None:
            trace.allocation(tensor, again)


def drew(value: int, draw: Callable[[], int]) -> None:
    """Tell the trace recording on this thread, if any, of a random seed and how to draw one."""
    if recording:
        trace = getattr(_local, "trace", None)
        if trace is not None:
            trace.seed(value, draw)


def keep(tensor: Any) -> None:
    """Tell the trace recording on this thread, if any, that `tensor` outlives the call (an
    operator's own buffer, the same for every call like this one): a replay launches on it as
    it is, and where this call allocated it, does not allocate it again."""
    if recording:
        trace = getattr(_local, "trace", None)
        if trace is not None:
            trace.kept.append(tensor)


def after_launch(step: Callable[..., None], *tensors: Any) -> None:
    """Run `step(*tensors)` now, a host step after this call's launches so far; a replay of a
    recorded call runs it again at the same place, with the replay's tensors (its arguments or
    its allocations, None where None) in the places of `tensors`."""
    if recording:
        trace = getattr(_local, "trace", None)
        if trace is not None:
            trace.steps.append((len(trace.launches), step, tensors))
    step(*tensors)


def refuse(why: str, first_call_only: bool = False) -> None:
    """Tell the trace recording on this thread, if any, that this call cannot be replayed
    (`Trace.refuse`)."""
    if recording:
        trace = getattr(_local, "trace", None)
        if trace is not None:
            trace.refuse(why, first_call_only)


@contextlib.contextmanager
def record() -> Iterator[Trace]:
    """Within: what this thread does is recorded into the trace given (traces do not nest: an
    inner one records and the outer one is refused)."""
    global recording
    outer = getattr(_local, "trace", None)
    trace = Trace()
    if outer is not None:
        outer.refuse("a recorded call inside another")
    _local.trace = trace
    with _count_lock:
        recording += 1
    try:
        yield trace
    finally:
        with _count_lock:
            recording -= 1
        _local.trace = outer
