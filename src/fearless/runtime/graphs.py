"""CUDA graphs: `fl.CUDAGraph` and `with fl.graph(g):`, torch.cuda's names for the same thing.

Launches inside the `with` block are captured, not run; `g.replay()` then runs all of them with
one driver call, on the same arrays (their pointers are baked in: write new inputs into the
same tensors between replays).

On the GPU the block's launches go to the capture stream (a new `fl.Stream` unless one is
given): `default_cu_stream` hands it to every launch without `stream=` on this thread
(streams.py). The capture is the driver's, in thread-local mode. Everything that cannot be
captured must happen before it, as for torch: the first launch of a kernel with new argument
shapes compiles and loads it, autotuning times configurations, fl.zeros allocates; run the
step once before capturing. A capture the driver invalidated is an error at the end of the
block, naming the likely cause.

On the simulator the block's launches are recorded as they would run (every check done at
capture, as on the GPU), and `replay()` runs them in order, on the arrays' memory as it is
then: the same result the GPU gives.

A replay is a launch of everything captured, so the move check runs again first (on both
targets, before anything runs): every fl.Tensor a captured launch took, and the tensor of
every Partition, must be live, or moved into a partition the graph's own launches took
(MovedError, E0382, at the replay's line). A partition given back since the capture is fine:
its tensor is live again, and the replay writes it as the capture's launch did.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import LaunchContractError, MovedError, ToolchainError
from . import driver
from .device_errors import default_pool
from .location import user_location
from .partition import Partition
from .streams import Stream, capture_stream, using_stream
from .target import current_target, result_text
from .tensor import Tensor

_recording = threading.local()  # .launches: the simulator's list while a block records


def sim_recording() -> list[Callable[[], None]] | None:
    """The list a simulated launch appends itself to instead of running (None: run it)."""
    return getattr(_recording, "launches", None)


class CUDAGraph:
    """A captured sequence of launches; `replay()` runs it again (empty until captured)."""

    def __init__(self) -> None:
        self._sim: list[Callable[[], None]] | None = None
        self._graph: Any = None
        self._exec: Any = None
        self._stream: Stream | None = None
        self._kept: list[Any] = []  # the captured launches' arguments, kept alive
        # what the replay's move check reads (`_watch`): the fl.Tensors the captured launches
        # took (a Partition's too), and the ids of the move marks of their Partitions
        self._tensors: list[Tensor] = []
        self._own: set[int] = set()

    @property
    def captured(self) -> bool:
        return self._sim is not None or self._exec is not None

    def replay(self) -> None:
        """Run the captured launches again, in order (on the GPU: one cuGraphLaunch on the
        capture stream, which orders with the legacy default stream like any fl.Stream)."""
        if self._tensors:
            self._check_moves()
        if self._sim is not None:
            for launch in self._sim:
                launch()
            return
        if self._exec is None:
            raise LaunchContractError(
                "this CUDAGraph holds nothing to replay",
                user_location(),
                help="capture launches first: `with fl.graph(g): kernel(...)`",
            )
        assert self._stream is not None
        d = driver.cu()
        driver.call("cuGraphLaunch", d.cuGraphLaunch, self._exec, self._stream.cu_stream())

    def reset(self) -> None:
        """Forget the captured launches (and free the driver's graph)."""
        d = driver.cu() if self._exec is not None else None
        if d is not None:
            d.cuGraphExecDestroy(self._exec)
            d.cuGraphDestroy(self._graph)
        self._sim = self._graph = self._exec = None
        self._kept = []
        self._tensors, self._own = [], set()

    def _watch(self, kept: list[Any]) -> None:
        """Keep the captured launches' arguments `kept` (one entry per launch) and note the
        fl.Tensors and Partitions among them, for the replay's move check."""
        self._kept = kept
        tensors: dict[int, Tensor] = {}
        own: set[int] = set()

        def note(x: Any, depth: int) -> None:
            if isinstance(x, Partition):
                own.add(id(x._moved_at))  # kept alive by `_kept`: its id stays its own
                tensors[id(x.tensor)] = x.tensor
            elif isinstance(x, Tensor):
                tensors[id(x)] = x
            elif depth and isinstance(x, tuple | list):  # a launch's arguments, a tuple of Parts
                for y in x:
                    note(y, depth - 1)

        note(kept, 3)
        self._tensors, self._own = list(tensors.values()), own

    def _check_moves(self) -> None:
        """MovedError, at the replay's line, if a tensor the captured launches took has moved
        into a partition that is not one of theirs: the replay would write (or read) memory
        that partition owns."""
        for t in self._tensors:
            moved = t._moved
            if moved is not None and id(moved) not in self._own:
                raise MovedError(
                    f"this graph's launches use a tensor (shape {t.shape}, {t.dtype}) that "
                    "has moved into a partition since they were captured",
                    user_location(),
                    notes=[f"the tensor moved at {moved}"],
                    help="give the tensor back (`unpartition()`, or the end of its `with` "
                    "block) before replaying; a partition that the captured launches took "
                    "themselves may stay open",
                )

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.reset()


@contextlib.contextmanager
def graph(g: CUDAGraph, stream: Stream | None = None) -> Iterator[CUDAGraph]:
    """Capture the launches of the block into `g` (replacing what it held)."""
    if not isinstance(g, CUDAGraph):
        raise LaunchContractError(
            f"`fl.graph` captures into an fl.CUDAGraph, not {type(g).__name__} ({g!r:.40})",
            user_location(),
            help="g = fl.CUDAGraph(); with fl.graph(g): ...; then g.replay()",
        )
    if stream is not None and not isinstance(stream, Stream):
        raise LaunchContractError(
            f"`stream=` of `fl.graph` is an fl.Stream or None, not {type(stream).__name__}",
            user_location(),
            help="leave it out: the capture then runs on a stream of its own",
        )
    if getattr(_recording, "launches", None) is not None or capture_stream() is not None:
        raise LaunchContractError(
            "`fl.graph` blocks do not nest",
            user_location(),
            help="end the first capture before starting another",
        )
    g.reset()
    if current_target().simulated:
        launches: list[Callable[[], None]] = []
        arguments: list[Any] = []  # each launch's (keep_if_captured), for the move check
        _recording.launches = launches
        try:
            with using_stream(None, arguments):
                yield g
        finally:
            _recording.launches = None
        g._sim = launches
        g._watch(arguments)
        return
    driver.ensure_initialized()
    d = driver.cu()
    s = stream if stream is not None else Stream()
    mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    driver.call("cuStreamBeginCapture", d.cuStreamBeginCapture, s.cu_stream(), mode)
    failed = True
    kept: list[Any] = []
    with using_stream(s, kept):
        try:
            yield g
            failed = False
        finally:
            err, captured = d.cuStreamEndCapture(s.cu_stream())
    if failed:  # the block raised: its error is the one to see
        if not err and captured is not None:
            d.cuGraphDestroy(captured)
        return
    if err:
        raise ToolchainError(
            f"the CUDA graph capture failed: {result_text(d, err)}",
            user_location(),
            help="everything inside `fl.graph` must be capturable: run the step once before "
            "capturing (the first launch compiles, loads and autotunes), allocate outside "
            "the block, and leave NumPy arrays and synchronisation out of it",
        )
    g._graph = captured
    g._exec = driver.call("cuGraphInstantiate", d.cuGraphInstantiate, captured, 0)
    g._stream = s
    g._watch(kept)
    default_pool().graphs = True  # replays launch without being counted
