"""The process's GPU: the one device index every "cuda" launch, allocation and stream is on.

One GPU per process so far. `fl.set_device(i)` or a constructor's `device=i` chooses it
(`choose`; the last choice holds) until the first GPU call fixes it (`fix`, from driver.py,
which makes that GPU's primary context current). A launch's array on GPU i fixes GPU i at
once (`choose(i, fixed=True)`), so that a second array on another GPU is refused, never launched beside it.
Where nothing chose, the first GPU call takes torch's current device once torch has
initialised CUDA (`torch.cuda.set_device(local_rank)`, as every rank of a torchrun job does),
else 0. A later choice of another index is refused by the caller (runtime/devices.py says how).

`GPU` is a plain int: the warm paths compare a torch tensor's `get_device()` with it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

GPU = 0
_chosen = False  # an index was chosen (not only the default)
_fixed = False  # the first GPU call has used it: no other can be chosen
_lock = threading.Lock()
_on_choice: list[Callable[[int], None]] = []


def choose(index: int, *, fixed: bool = False) -> bool:
    """Make GPU `index` the process's GPU (`fixed`: from now on the only one, as for an array
    on it about to be used there); False when another is fixed. The caller has checked
    `index` against the device count."""
    global _chosen, _fixed
    with _lock:
        if _fixed:
            return index == GPU
        _chosen = True
        _set(index)
        _fixed = fixed
    return True


def current() -> int:
    """The process's GPU, or the one the first GPU call will take."""
    if _fixed or _chosen:
        return GPU
    return _torch_current_device()


def fix() -> int:
    """The first GPU call's: the index to make the context on, from now on the only one."""
    global _fixed
    with _lock:
        if not _fixed:
            if not _chosen:
                _set(_torch_current_device())
            _fixed = True
    return GPU


def is_fixed() -> bool:
    return _fixed


def on_choice(callback: Callable[[int], None]) -> None:
    """Call `callback(index)` now and whenever another index is chosen before the first GPU
    call (claunch.py's default-stream lookup keeps its own copy of the index)."""
    _on_choice.append(callback)
    callback(GPU)


def _set(index: int) -> None:
    global GPU
    if index != GPU:
        GPU = index
        for callback in _on_choice:
            callback(index)


def _torch_current_device() -> int:
    """torch's current CUDA device where torch has initialised CUDA in this process, else 0."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return 0
    return int(torch.cuda.current_device())
