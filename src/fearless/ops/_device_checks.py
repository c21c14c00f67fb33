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
holds a few words, not a check per call. A call's check is registered as a host step of the
call (runtime/trace.py `after_launch`, the words `keep`-ed), which a replay of the call
(ops/_replay.py) runs again with its own tensors: the operators stay `@replayable`.

An operator gives `words` its key, launches with the buffer, then calls `check_after` with a
`make_check(*tensors, loc)` that builds its `Check` from the call's tensors (those it reads
to name the bad value) and the call's location.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable
from typing import Any, Protocol

import numpy as np

from .. import dtypes
from ..runtime import device_errors, driver, trace
from ..runtime.location import user_location
from ..runtime.target import current_target
from ..runtime.tensor import Tensor
from ._io import Operand, full

NO_ERROR = 2**31 - 1  # the words start here; the kernels' atomic min keeps the smallest record


class Check(Protocol):
    """One call's reading of the words: raise what they record, nothing when they record
    nothing. After `calls` > 1 launches the words may be another launch's, so the message names
    what the words give (a slot, a row), not this call's values."""

    def raise_for(self, words: np.ndarray, calls: int = 1) -> None: ...


MakeCheck = Callable[..., Check]  # (*the call's tensors, its Location | None) -> Check


class Pending:
    """The GPU's error words of every launch of one operator and key on one device since the
    last `fl.synchronize()`, checked once there: after one launch with that launch's check (it
    may name the bad value), after several with the first's (its line, and how many)."""

    def __init__(self, err: Tensor) -> None:
        self.err = err
        self.first: Check | None = None  # the first launch's check since the last one ran
        self.last: Check | None = None
        self.calls = 0
        self.lock = threading.Lock()

    def launched(self, check: Check) -> None:
        with self.lock:
            self.calls += 1
            self.last = check
            if self.first is not None:
                return
            self.first = check
        device_errors.defer(self.run)

    def run(self) -> None:
        with self.lock:
            first, last, calls = self.first, self.last, self.calls
            self.first = self.last = None
            self.calls = 0
        if first is None or last is None:
            return
        words = np.array(self.err.numpy()).reshape(-1)  # a copy: the buffer is reset below
        if (words == NO_ERROR).all():
            return
        clean = np.full(words.shape, NO_ERROR, np.int32)  # the next launches start clean
        if self.err._host is not None:
            self.err._host[...] = clean
        else:
            driver.copy_host_to_device(self.err.data_ptr, clean)
        if calls == 1:
            last.raise_for(words)
        first.raise_for(words, calls=calls)


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
            found = _pending[at] = Pending(full(like, (n,), NO_ERROR, dtypes.i32))
    return found.err, found


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
    pending.launched(make_check(*tensors, user_location()))


def host_values(t: Any) -> np.ndarray:
    """The values of an fl.Tensor, or of the torch tensor a replay passes, on the host (a
    check's reading of the call's data, on its error path only)."""
    if isinstance(t, Tensor):
        return np.asarray(t.numpy())
    return t.detach().cpu().numpy()  # type: ignore[no-any-return]
