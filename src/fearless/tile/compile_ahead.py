"""Compiling Tile kernels ahead of their launches, on worker threads: the autotuner's first pass.

Within `compile_ahead(workers)`, a launch of a Tile kernel on the GPU target from this thread
(`k(...)`, `k.launch(grid, ...)`) does not run. It checks its arguments and builds the
specialisation's IR here, then hands the tileiras compile to a pool of worker threads, whose
tileiras processes run side by side. The kernel's `compile` later takes the result from the pool
(tile/compiles.py `Compiles.cubin`). Nothing runs on the device and no output is written.

The autotuner calls every configuration this way once before it times any
(`autotuning.Autotuned._tune`). N configurations then compile in about the time of N / workers
compiles, not of N: on the H200 a row op's configurations took 1 to 3 s each to compile, one
after another.

The timing pass then takes the configurations as their compiles finish (`ready_order`), not in
their order: one slow compile (a persistent TMA row kernel: 2.5 s beside 0.2 s for the rest)
no longer holds up the timing of the others, and past the autotuner's compile budget it is left
out (`deadline`).

Its tileiras processes run at a lower priority than the program
(backends/tileir/cuda_tile.py `compile_in_background`): those still compiling once the tuner has
moved on do not take the launching thread's core.

The pass also lists the launches it met, so that the autotuner can read what each
configuration's kernels use once compiled (`stack_bytes`: their spills) and leave the ones that
spill much untimed (autotune_timing.spilling, when SKIP_SPILLING is on).

Another thread's launches are not affected, since the pass belongs to the thread that opened it.
The check a launch pays when no pass is open is one attribute read (`STATE.thread`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any

from ..backends.tileir.cuda_tile import compile_in_background
from ..runtime.target import Target, default_arch
from .compiler import compile_cubin


class _State:
    def __init__(self) -> None:
        self.thread: int | None = None  # the thread (ident) whose launches compile ahead
        self.pool: ThreadPoolExecutor | None = None
        # the (kernel, key) of each launch the pass met, in order (the autotuner reads a
        # configuration's launches from it, `stack_bytes`)
        self.launches: list[tuple[Any, Any]] = []


STATE = _State()


def workers() -> int:
    """Worker threads for a pass: one tileiras per core, at most 16."""
    return max(1, min(16, os.cpu_count() or 1))


@contextmanager
def compile_ahead(n_workers: int | None = None) -> Iterator[None]:
    """Within: this thread's Tile launches on the GPU target compile on worker threads and do
    not run. On leaving, the compiles carry on; `Kernel.compile` waits for each when needed."""
    if STATE.thread is not None:  # nested (an autotuned function calling another): one pass
        yield
        return
    pool = ThreadPoolExecutor(n_workers or workers(), thread_name_prefix="fearless-compile")
    STATE.pool, STATE.thread, STATE.launches = pool, threading.get_ident(), []
    try:
        yield
    finally:
        STATE.pool = STATE.thread = None
        STATE.launches = []
        pool.shutdown(wait=False)


def in_pass() -> bool:
    """Whether this thread has a pass open (its Tile launches on a GPU compile, not run)."""
    return threading.get_ident() == STATE.thread


def applies(target: Target) -> bool:
    """Whether a launch on `target` from this thread compiles ahead instead of running."""
    return in_pass() and target.on_device


def submit(kernel: Any, args: tuple[Any, ...], target: Target) -> None:
    """Check `args` and build the IR of their specialisation here; compile it on the pool."""
    signature, _ = kernel.signature_of(args, target)
    arch = default_arch()
    key = (signature, arch)
    pool = STATE.pool
    STATE.launches.append((kernel, key))
    compiles = kernel.compiles
    if key in compiles.cubins or key in compiles.ahead or pool is None:
        return
    ir = kernel.ir_for(signature)
    compiles.ahead[key] = pool.submit(compile_in_background, compile_cubin, ir, arch)


def stack_bytes(launches: list[tuple[Any, Any]]) -> int | None:
    """The most stack (local memory: spilled registers) a thread of these launches' kernels
    uses, waiting for their compiles (backends/cubin_info.py); None when one did not compile
    (its launch fails again when timed, and says why) or there is no Tile launch to read."""
    from ..backends.cubin_info import kernel_resources

    if not launches:
        return None
    most = 0
    for kernel, key in launches:
        try:
            ct = kernel.compiles.cubins.get(key)
            if ct is None:
                pending = kernel.compiles.ahead.get(key)
                ct = None if pending is None else pending.result()
            if ct is None:
                return None
            most = max([most, *(r.stack for r in kernel_resources(ct.cubin))])
        except Exception:  # a compile error is met again, and reported, at the timed launch
            return None
    return most


def ready_order(
    order: Sequence[int],
    launches: dict[int, list[tuple[Any, Any]]],
    first: int | None = None,
    busy: int | None = None,
    deadline: float | None = None,
    waiting: Callable[[int], None] | None = None,
) -> Iterator[int]:
    """`order`'s configurations (indices into `launches`, what each launched in the pass) as
    their compiles finish: `first` (a stale winner, timed first) once compiled, then any whose
    compiles are all done, in `order` among those ready, once at most `busy` compiles are still
    to finish (default a quarter of the workers), so that timing does not share the CPUs with
    many tileiras processes. A configuration with nothing compiling (it failed before its
    launch, or launched no Tile kernel) is ready at once: its timing says what it does.

    Past `deadline` (a `time.perf_counter()` reading), the ready ones go at once, and once one
    configuration has gone, those still compiling are left out: the iteration ends without
    them (the autotuner's compile budget, autotune_timing.COMPILE_BUDGET_S). Before each wait,
    `waiting` is told how many of the configurations still to go are compiling (the tuner's
    progress line)."""
    futures = {
        n: [
            f
            for kernel, key in launches.get(n, ())
            if (f := kernel.compiles.ahead.get(key)) is not None
        ]
        for n in order
    }
    slack = max(1, workers() // 4) if busy is None else busy
    pending = list(order)
    gone = False
    if first is not None and first in futures:
        wait(futures[first])
        pending.remove(first)
        gone = True
        yield first
    while pending:
        running = [f for n in pending for f in futures[n] if not f.done()]
        ready = [n for n in pending if all(f.done() for f in futures[n])]
        late = deadline is not None and time.perf_counter() >= deadline
        if ready and (len(running) <= slack or late):
            pending.remove(ready[0])
            gone = True
            yield ready[0]
        elif late and gone:
            return  # what still compiles is past the budget
        else:
            left = None if deadline is None or late else deadline - time.perf_counter()
            if waiting is not None:
                waiting(len(pending) - len(ready))
            wait(running, timeout=left, return_when=FIRST_COMPLETED)
