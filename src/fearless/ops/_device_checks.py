"""What an operator's kernels find wrong on the GPU, raised later on the host: a bad index in data
the host never reads (a KV cache's block table, MoE expert ids, sparse attention's key
indices) is clamped or dropped by the kernel, never read through, and the kernel keeps the
smallest bad record in a few int32 error words (an atomic min from NO_ERROR). The operator's
check of those words raises it as a fearless error at the call's line: at the next
`fl.synchronize()` on the GPU (runtime/device_errors.py `defer`), at once on the simulator,
where each launch has run to completion. No call waits for the GPU.

On the GPU the words are the operator's own buffer, one per operator, key (what the words'
meaning depends on, e.g. a table's width) and device, shared by every launch since the last
synchronisation (`Pending`), so that a serving loop that never synchronises through fearless
holds a few words, not a check per call. Such a loop (torch's `.item()` and
`torch.cuda.synchronize()` run no fearless check) still meets the error: every POLL_S a launch
reads its words without waiting for the GPU, and a record found there is raised by that call,
at the line of the first launch since the last check; a process that ends with unchecked
launches reads them at exit and prints what they record. A call's check is registered as a host step of the
call (runtime/trace.py `after_launch`, the words `keep`-ed), which a replay of the call
(ops/_replay.py) runs again with its own tensors: the operators stay `@replayable`. A call
captured into a CUDA graph leaves a standing check (`Pending`), since the graph's replays run
no host step.

An operator gives `words` its key, launches with the buffer, then calls `check_after` with a
`make_check(*tensors, loc)` that builds its `Check` from the call's tensors (those it reads
to name the bad value) and the call's location.
"""

from __future__ import annotations

import atexit
import functools
import sys
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Protocol

import numpy as np

from .. import dtypes
from ..autotune_ahead import capturing
from ..errors import FearlessError
from ..runtime import device_errors, driver, trace
from ..runtime.location import user_location
from ..runtime.target import current_target
from ..runtime.tensor import Tensor
from ._io import Operand, full

NO_ERROR = 2**31 - 1  # the words start here; the kernels' atomic min keeps the smallest record
POLL_S = 0.05  # between synchronisations, a launch reads its words when the last read is older


class Check(Protocol):
    """One call's reading of the words: raise what they record, nothing when they record
    nothing. After `calls` > 1 launches, or for a captured graph's replays (`calls` 0), the
    words may be another launch's, so the message names what the words give (a slot, a row),
    not this call's values, and says which launches (`since`)."""

    def raise_for(self, words: np.ndarray, calls: int = 1) -> None: ...


MakeCheck = Callable[..., Check]  # (*the call's tensors, its Location | None) -> Check


class Pending:
    """The GPU's error words of every launch of one operator and key on one device since the
    last `fl.synchronize()`, checked once there: after one launch with that launch's check (it
    may name the bad value), after several with the first's (its line, and how many).

    A launch captured into a CUDA graph (a torch capture or `fl.graph`) writes the words at
    every replay of the graph, where no host step runs: its check stands (`standing`, the first
    captured one), and the words are read at every synchronisation from then on, an error named
    at the captured call's line."""

    def __init__(self, err: Tensor) -> None:
        self.err = err
        self.first: Check | None = None  # the first launch's check since the last one ran
        self.last: Check | None = None
        self.calls = 0
        self.standing: Check | None = None
        self.deferred = False  # `run` is among the next synchronisation's checks
        self.next_read = time.monotonic() + POLL_S  # `launched` reads the words after this
        self.lock = threading.Lock()

    def launched(self, check: Check, captured: bool = False) -> None:
        """Count a launch made with `check`; then, outside a capture and at most every
        POLL_S, read the words without waiting: a record there is raised now, at the first
        unchecked launch's line (`fl.synchronize()`, which runs every deferred check), so that
        a loop that synchronises only through torch still meets it a few calls later."""
        with self.lock:
            if captured and self.standing is None:
                self.standing = check
            self.calls += 1
            self.last = check
            if self.first is None:
                self.first = check
            now = time.monotonic()
            due = not captured and now >= self.next_read
            if due:
                self.next_read = now + POLL_S
            register, self.deferred = not self.deferred, True
        if register:
            device_errors.defer(self.run)
        if due and self._recorded():
            device_errors.synchronize()

    def _recorded(self) -> bool:
        """Whether the words hold a record now (read without waiting for the launches)."""
        words = np.empty(self.err.size, np.int32)
        device_errors.read_without_waiting(words, self.err.data_ptr, "reading error words")
        return bool((words != NO_ERROR).any())

    def run(self) -> None:
        with self.lock:
            first, last, calls, standing = self.first, self.last, self.calls, self.standing
            self.first = self.last = None
            self.calls = 0
            self.deferred = standing is not None
        try:
            self._check(first, last, calls, standing)
        finally:  # after the read, which synchronises (and so runs the deferred checks)
            if standing is not None:  # a graph may replay any time: read at every sync
                device_errors.defer(self.run)

    def _check(
        self, first: Check | None, last: Check | None, calls: int, standing: Check | None
    ) -> None:
        if first is None and standing is None:
            return
        words = np.array(self.err.numpy()).reshape(-1)  # a copy: the buffer is reset below
        if (words == NO_ERROR).all():
            return
        clean = np.full(words.shape, NO_ERROR, np.int32)  # the next launches start clean
        if self.err._host is not None:
            self.err._host[...] = clean
        else:
            driver.copy_host_to_device(self.err.data_ptr, clean)
        if standing is not None:
            standing.raise_for(words, calls=0)
        if calls == 1 and last is not None:
            last.raise_for(words)
        if first is not None:
            first.raise_for(words, calls=calls)


def since(calls: int) -> str:
    """Which launch wrote the words, for a message that names no value: after `calls` launches
    (0: a check standing for a captured CUDA graph; 1: one launch whose arguments have changed
    since)."""
    if calls == 0:
        return (
            "in a launch since the last synchronisation (a replay of the CUDA graph captured "
            "at this line, or a later call)"
        )
    if calls == 1:
        return "in the launch at this line (its arguments have changed since)"
    return f"in one of the {calls} launches since the last synchronisation (the first at this line)"


_pending: dict[tuple[Any, ...], Pending] = {}
_pending_lock = threading.Lock()


def words(like: Operand, key: Hashable, n: int = 2) -> tuple[Tensor, Pending | None]:
    """(the error words a call launches with, the pending record they belong to): on the GPU
    the shared words of `key` (the operator and what their meaning depends on) on like's
    device; on the simulator a fresh buffer of `n` NO_ERROR words and None."""
    if not current_target().on_device:
        return full(like, (n,), NO_ERROR, dtypes.i32), None
    at = (key, like.tensor.device)
    with _pending_lock:
        found = _pending.get(at)
        if found is None:
            if not _pending:
                atexit.register(_at_exit)
            found = _pending[at] = Pending(full(like, (n,), NO_ERROR, dtypes.i32))
    return found.err, found


def _at_exit() -> None:
    """At the end of a process whose last launches were never checked: read their words (a
    synchronisation) and print what they record, since nothing can raise it any more."""
    with _pending_lock:
        unchecked = [p for p in _pending.values() if p.first is not None or p.standing]
    if not unchecked:
        return
    try:
        device_errors.synchronize()
    except FearlessError as exc:
        print(
            "fearless: the GPU recorded this error after the last synchronisation, and the "
            f"process ended before one raised it:\n{exc}",
            file=sys.stderr,
        )
    except Exception:  # the driver may be gone at exit: nothing to say
        pass


def check_after(err: Tensor, pending: Pending | None, make_check: MakeCheck, *tensors: Any) -> None:
    """After a call's launches over `err`: on the simulator, its check now; on the GPU, its
    check registered with `pending` for the next synchronisation, as a host step a replay runs
    again (with its own tensors in the places of `tensors`)."""
    if pending is None:
        make_check(*tensors, user_location()).raise_for(np.asarray(err.numpy()).reshape(-1))
        return
    trace.keep(err)
    trace.after_launch(functools.partial(_register, pending, make_check), *tensors)


def _register(pending: Pending, make_check: MakeCheck, *tensors: Any) -> None:
    pending.launched(make_check(*tensors, user_location()), captured=capturing())


def host_values(t: Any) -> np.ndarray:
    """The values of an fl.Tensor, or of the torch tensor a replay passes, on the host (a
    check's reading of the call's data, on its error path only)."""
    if isinstance(t, Tensor):
        return np.asarray(t.numpy())
    return t.detach().cpu().numpy()  # type: ignore[no-any-return]
