"""An operator's first call compiled ahead, and whether launches are being captured now.

`compile_ahead_of(call)` runs an op once in a compile-ahead pass (tile/compile_ahead.py) on the
GPU, so that the kernels of its several steps, and the configurations its autotuned functions
will time, compile side by side instead of one after another; `compile_ahead_once(key, call)`
does so on an op's first call with `key` in a process. Inside the pass an autotuned function
tunes nothing: it queues its compiles (autotuning.py, `Autotuned._queue`).

`capturing()` says whether a capture or trace is open (`fl.graph`, a torch CUDA graph capture,
torch.compile's tracing), where nothing may be timed, synchronised or run twice: the pass does
not open there, and the tuner takes an untimed configuration.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Hashable

from .runtime import trace
from .tile.compile_ahead import STATE as AHEAD  # the pass open, if any (tile/compile_ahead.py)
from .tile.compile_ahead import in_pass


def compile_ahead_of(call: Callable[[], object]) -> None:
    """Run `call` once in a compile-ahead pass (tile/compile_ahead.py) on the GPU: every Tile
    launch in it, and every configuration that each autotuned function it calls will compile,
    starts compiling on worker threads, and nothing runs. An op whose kernels would otherwise
    compile one after another on its first call (the attention backward's three tuned kernels)
    runs this first, so that they compile side by side; the real call then finds them
    compiled or compiling. Off the GPU, under capture and while a pass is open, nothing
    happens (on this thread the call runs in that pass next anyway; passes are one at a time
    in a process, and one opened beside another thread's would run the call for real). An
    error in the pass is left for the real call to raise, or not: the pass only saves time,
    and what ran nothing may fail where the real call does not."""
    from .runtime.target import current_target
    from .tile.compile_ahead import compile_ahead

    if AHEAD.thread is not None or not current_target().on_device or capturing():
        return
    # its scratch allocations are no call's; a later call compiles nothing ahead
    trace.refuse("a compile-ahead pass ran", first_call_only=True)
    with compile_ahead(), contextlib.suppress(Exception):
        call()


def compile_ahead_once(key: Hashable, call: Callable[[], object]) -> None:
    """`compile_ahead_of(call)` on the first call in this process with `key` (an op's name
    and what its tuners' keys read): the ops' way of compiling their steps side by side."""
    if key not in _compiled_ahead:
        if len(_compiled_ahead) >= 4096:  # a program that makes new shapes without end
            _compiled_ahead.clear()
        _compiled_ahead.add(key)
        compile_ahead_of(call)


_compiled_ahead: set[Hashable] = set()  # compile_ahead_once's keys


def compile_ahead_pass() -> bool:
    """Whether this thread is inside a compile-ahead pass, where Tile launches compile and do
    not run: an op skips there what is no Tile launch (its GEMMs through torch, say)."""
    return in_pass()


def capturing() -> bool:
    """Whether launches are being captured or traced now, where tuning may not time: inside
    `fl.graph`, a torch CUDA graph capture on the current stream, or torch.compile's tracing.
    Reads torch only where it is already imported, and its CUDA state only once initialised."""
    from .runtime.graphs import sim_recording
    from .runtime.streams import capture_stream

    if capture_stream() is not None or sim_recording() is not None:
        return True
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and compiler.is_compiling():
        return True
    cuda = getattr(torch, "cuda", None)
    return bool(cuda is not None and cuda.is_initialized() and cuda.is_current_stream_capturing())
