"""Device-side bounds-check failures: the records kernels write, and how they come back as errors.

Every launch plan owns one error record (a slot; layout in abi.py). A failing check in the
kernel wins a compare-and-swap on the record's flag, fills in the site, block, thread, index
and length, and returns: no `trap`, so the CUDA context stays usable. Records live in pooled
device memory (chunks of 256 slots, zeroed). A launch only counts itself in the pool; `check()`,
called where the user already synchronises, copies each chunk back with one memcpy when
something launched since the last full check, and raises KernelIndexError for the first record
whose flag is set, after zeroing that record so the kernel can run again.

`format_index_error` builds the error from a record; the CPU simulator uses it too, so both
targets say the same thing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..abi import ERROR_RECORD_BYTES, ERROR_RECORD_WORDS, CompiledKernel
from ..errors import KernelIndexError
from ..ir.simt.ops_block import TILE_ROW_PAST
from . import driver

CHUNK_SLOTS = 256


def format_index_error(ck: CompiledKernel, record_words: Sequence[int]) -> KernelIndexError:
    """The KernelIndexError for one error record: [flag, site, block xyz, thread xyz, index, len]."""
    _, site, bx, by, bz, tx, ty, tz, index, length = (
        int(w) for w in record_words[:ERROR_RECORD_WORDS]
    )
    where = f"in kernel `{ck.name}`, block ({bx}, {by}, {bz}), thread ({tx}, {ty}, {tz})"
    if 0 <= site < len(ck.sites):
        info = ck.sites[site]
        verb = "reading" if info.kind == "read" else "writing"
        if info.axis is None:
            notes = [f"{verb} `{info.param}` {where}"]
            bound = f"`len({info.param})`"
        else:  # a 2-D access: each axis is checked on its own
            notes = [f"{verb} `{info.param}` on axis {info.axis} of `{info.param}` {where}"]
            bound = f"`{info.param}.shape[{info.axis}]`"
        if index == TILE_ROW_PAST:
            notes.append(
                f"{index} is the row `simt.thread.tile_index_2d(k, rows)` gives a step past "
                "its block's tile: the thread's row in the block plus k times the block's "
                "rows reached `rows`"
            )
        if info.unsafe:
            notes.append(
                "this access stands inside `with simt.unsafe():`, so the kernel is unsafe "
                "here: its index is not proven to be this thread's own (the bounds check ran)"
            )
        return KernelIndexError(
            f"index out of bounds: the len is {length} but the index is {index}",
            info.loc,
            label=f"{info.kind} out of bounds",
            notes=notes,
            help=f"check the index against {bound} before using it",
        )
    return KernelIndexError(
        f"index out of bounds: the len is {length} but the index is {index}",
        notes=[where, f"the failing check (site {site}) is unknown to this kernel's build"],
        help="this is a fearless bug: please report it with the kernel's source",
    )


class ErrorPool:
    """Error records of every loaded kernel, in chunks of device memory."""

    def __init__(self, chunk_slots: int = CHUNK_SLOTS) -> None:
        self.chunk_slots = chunk_slots
        self.launches = 0  # counted by every launch (the warm path's only cost here)
        # Set once a launch went into a CUDA graph: its replays launch without being counted,
        # so from then on every check reads the records.
        self.graphs = False
        self._checked = 0  # every launch up to this count has been checked after a full sync
        self._chunks: list[_Chunk] = []
        self._kernels: list[CompiledKernel] = []
        self._lock = threading.Lock()

    def alloc(self, ck: CompiledKernel) -> tuple[int, int]:
        """A zeroed record for `ck`: (slot, device address of the record)."""
        with self._lock:
            slot = len(self._kernels)
            index, offset = divmod(slot, self.chunk_slots)
            if index == len(self._chunks):
                self._chunks.append(self._new_chunk())
            chunk = self._chunks[index]
            chunk.used = offset + 1
            self._kernels.append(ck)
            return slot, chunk.ptr + offset * ERROR_RECORD_BYTES

    def mark_launched(self, slot: int) -> None:
        """Note that the kernel owning `slot` was launched (its record may be written)."""
        self.launches += 1

    def check(self, upto: int | None = None) -> None:
        """Raise the first recorded device error, if any launch since the last full check made one.

        `upto` is the launch count taken before a device-wide synchronisation: those launches
        have all finished, so once their records read clean they need no further check.
        """
        if (self.launches == self._checked and not self.graphs) or not self._chunks:
            return
        found = self._scan()
        if found is not None:
            # A kernel still running on another stream may be half-way through filling its
            # record (the flag is set first): let all work finish, then read again.
            self._sync_all()
            found = self._scan()
        if found is None:
            if upto is not None:
                self._checked = max(self._checked, upto)
            return
        slot, words = found
        self._zero(self._record_address(slot))
        self._host_row(slot)[:] = 0
        raise format_index_error(self._kernels[slot], words)

    def kernel_of(self, slot: int) -> CompiledKernel:
        return self._kernels[slot]

    # -------------------------------------------------------------------------- internals

    def _scan(self) -> tuple[int, list[int]] | None:
        for index, chunk in enumerate(self._chunks):
            self._copy_out(chunk.host[: chunk.used], chunk.ptr)
            flagged = np.flatnonzero(chunk.host[: chunk.used, 0])
            if flagged.size:
                offset = int(flagged[0])
                return index * self.chunk_slots + offset, [int(w) for w in chunk.host[offset]]
        return None

    def _record_address(self, slot: int) -> int:
        index, offset = divmod(slot, self.chunk_slots)
        return self._chunks[index].ptr + offset * ERROR_RECORD_BYTES

    def _host_row(self, slot: int) -> np.ndarray:
        index, offset = divmod(slot, self.chunk_slots)
        return self._chunks[index].host[offset]

    # Device operations, one method each so tests can run the pool on host memory.

    def _new_chunk(self) -> _Chunk:
        nbytes = self.chunk_slots * ERROR_RECORD_BYTES
        alloc = driver.DeviceAllocation(nbytes)
        driver.fill(alloc.ptr, 0, 1, nbytes)
        # The memset runs on the legacy stream; a kernel on a non-blocking stream must not see
        # the records before they are zero.
        driver.synchronize_stream(0)
        return _Chunk(alloc, alloc.ptr, self.chunk_slots)

    def _copy_out(self, host: np.ndarray, ptr: int) -> None:
        """One memcpy of the chunk, on a private non-blocking stream so it waits for no one."""
        read_without_waiting(host, ptr, "reading device error records")

    def _zero(self, ptr: int) -> None:
        d = driver.cu()
        stream = _private_stream()
        driver.call(
            "clearing a device error record", d.cuMemsetD8Async, ptr, 0, ERROR_RECORD_BYTES, stream
        )
        driver.call("cuStreamSynchronize", d.cuStreamSynchronize, stream)

    def _sync_all(self) -> None:
        driver.synchronize_context()


class _Chunk:
    __slots__ = ("host", "owner", "ptr", "used")

    def __init__(self, owner: Any, ptr: int, slots: int) -> None:
        self.owner = owner  # keeps the device memory alive
        self.ptr = ptr
        self.host = np.zeros((slots, ERROR_RECORD_WORDS), dtype=np.int64)
        self.used = 0


_pool: ErrorPool | None = None
_stream: Any = None
_global_lock = threading.Lock()


def default_pool() -> ErrorPool:
    """The process's pool (one GPU, one primary context)."""
    global _pool
    if _pool is None:
        with _global_lock:
            if _pool is None:
                _pool = ErrorPool()
    return _pool


def _private_stream() -> Any:
    global _stream
    if _stream is None:
        d = driver.cu()
        flags = int(d.CUstream_flags.CU_STREAM_NON_BLOCKING)
        _stream = driver.call("cuStreamCreate", d.cuStreamCreate, flags)
    return _stream


def read_without_waiting(host: np.ndarray, ptr: int, what: str) -> None:
    """Copy device bytes at `ptr` into `host` now, on a private non-blocking stream: it waits
    for no launch, so a kernel still running may write them later (error words read between
    synchronisations: a record there is final, its absence is not)."""
    d = driver.cu()
    stream = _private_stream()
    driver.call(what, d.cuMemcpyDtoHAsync, host.ctypes.data, ptr, host.nbytes, stream)
    driver.call("cuStreamSynchronize", d.cuStreamSynchronize, stream)


_deferred: list[Callable[[], None]] = []


def defer(check: Callable[[], None]) -> None:
    """Run `check` (a host-side read of an operator's own error words, e.g. a bad block table
    recorded by `fearless.ops.flash_attn_with_kvcache`'s kernel) at the next `synchronize`."""
    with _global_lock:
        _deferred.append(check)


def _run_deferred() -> None:
    """Every deferred check, once; the first error raised goes up after all have run."""
    with _global_lock:
        checks = _deferred[:]
        _deferred.clear()
    first: BaseException | None = None
    for check in checks:
        try:
            check()
        except Exception as exc:
            first = first or exc
    if first is not None:
        raise first


def _capturable(what: str) -> None:
    """Anything may happen outside `fl.graph` (streams.py replaces this at import)."""


# `streams.refuse_in_sim_capture`, which streams.py puts here when it loads (it imports this
# module, so this one does not import it): `synchronize` on the simulator asks it first
refuse_in_capture: list[Callable[[str], None]] = [_capturable]


def synchronize() -> None:
    """`fl.synchronize()`: wait for all launched GPU work, then raise any pending device error.

    On the simulator there is nothing to wait for: it runs each launch to completion and raises
    device errors at the launch itself. Inside `fl.graph` it is refused, as the GPU's driver
    refuses it in a capture.
    """
    if not driver.is_initialized():
        refuse_in_capture[0]("`fl.synchronize()`")
        return
    pool = _pool
    upto = pool.launches if pool is not None else 0
    driver.synchronize_context()
    if pool is not None:
        pool.check(upto)
    _run_deferred()
