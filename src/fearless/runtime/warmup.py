"""Toolchain warm-up: the first kernel a process defines on a track starts, on a daemon thread,
what that track's first compile would otherwise wait for (the Tile track: importing cuda-tile's
bytecode encoders and asking tileiras which versions it reads; SIMT: LLVM's NVPTX set-up and
loading nvJitLink), so that it overlaps whatever the program does between defining its kernels
and calling them. Only where launches run on a GPU (the simulator compiles nothing), and only
while the disk cache holds nothing this version compiled on that track (`cache.built_here`):
once it does, first calls are mostly cache hits, which need no toolchain, and a warm-up running
beside one slows it (the H100's cache hits went from about 15 ms to 83 ms SIMT and 148 ms Tile
with the warm-up in, 2026-12-05). A failure here is left for the compile itself to report,
where it points at the user's call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .. import cache, config
from .target import current_target

_started: set[str] = set()
_lock = threading.Lock()


def start(track: str, work: Callable[[], None]) -> threading.Thread | None:
    """Run `work` on a daemon thread, the first time `track` asks in this process (None after
    that, and when the simulator is chosen)."""
    with _lock:
        if track in _started:
            return None
        _started.add(track)
    if config.target_override() == "sim" or cache.built_here(track):
        return None
    thread = threading.Thread(
        target=_run, args=(work,), name=f"fearless-warmup-{track}", daemon=True
    )
    thread.start()
    return thread


def _run(work: Callable[[], None]) -> None:
    try:
        if current_target().on_device:  # finds the GPU (or not) once, for the process
            work()
    except Exception:  # the compile that needs this raises it again, at the user's line
        return
