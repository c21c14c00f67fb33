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
then: the same result the GPU gives. As on the GPU, only the launches the capture stream takes
are captured (those without `stream=`, or on the stream `fl.graph` was given); a launch on
another stream runs at once. What the driver refuses inside a capture the simulator refuses
too, at the user's line (ToolchainError, E0900): allocating a tensor, `fl.synchronize()`,
`Tensor.numpy()` (`streams.refuse_in_sim_capture`). A replay runs every captured launch, as
the GPU's does, and raises the first device error (KernelIndexError) after the last.

A replay is a launch of everything captured, so the move check runs again first (on both
targets, before anything runs): every fl.Tensor a captured launch took, and the tensor of
every Partition, must be live, or moved into a partition the graph's own launches took
(MovedError, E0382, at the replay's line). A partition given back since the capture is fine:
its tensor is live again, and the replay writes it as the capture's launch did.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from ..errors import KernelIndexError, LaunchContractError, MovedError, ToolchainError
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
            first: KernelIndexError | None = None
            for launch in self._sim:  # all of them, as cuGraphLaunch runs the whole graph
                try:
                    launch()
                except KernelIndexError as exc:
                    first = first or exc
            if first is not None:
                raise first
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


def graph(g: CUDAGraph, stream: Stream | None = None) -> _Capture:
    """Capture the launches of the block into `g` (replacing what it held): `with fl.graph(g):`.

    A plain function returning the block's context manager (not a generator): its errors point
    at the user's `with` line, never at contextlib's frame."""
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
    return _Capture(g, stream)


class _Capture:
    """The `with fl.graph(g):` block: a capture begun at `__enter__`, ended at `__exit__`."""

    __slots__ = ("_arguments", "_entered", "_g", "_launches", "_sim", "_stream", "_using")

    def __init__(self, g: CUDAGraph, stream: Stream | None) -> None:
        self._g = g
        self._stream = stream
        self._entered = False
        self._sim = False  # the simulator records the block
        self._using: Any = None  # streams.using_stream's context, while the block runs
        self._launches: list[Callable[[], None]] = []
        self._arguments: list[Any] = []  # each captured launch's (keep_if_captured)

    def __enter__(self) -> CUDAGraph:
        if self._entered:
            raise LaunchContractError(
                "this `fl.graph(...)` block was entered already",
                user_location(),
                help="write `with fl.graph(g):` for each capture",
            )
        if getattr(_recording, "launches", None) is not None or capture_stream() is not None:
            raise LaunchContractError(
                "`fl.graph` blocks do not nest",
                user_location(),
                help="end the first capture before starting another",
            )
        g = self._g
        g.reset()
        self._entered = True
        if current_target().simulated:
            self._sim = True
            self._using = using_stream(self._stream, self._arguments, sim=True)
            self._using.__enter__()
            _recording.launches = self._launches
            return g
        driver.ensure_initialized()
        d = driver.cu()
        s = self._stream if self._stream is not None else Stream()
        self._stream = s
        mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        driver.call("cuStreamBeginCapture", d.cuStreamBeginCapture, s.cu_stream(), mode)
        self._using = using_stream(s, self._arguments)
        self._using.__enter__()
        return g

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        g = self._g
        if self._sim:
            _recording.launches = None
            self._using.__exit__(None, None, None)
            if exc_type is None:  # a block that raised captures nothing
                g._sim = self._launches
                g._watch(self._arguments)
            return
        self._using.__exit__(None, None, None)
        d = driver.cu()
        s = self._stream
        assert s is not None
        err, captured = d.cuStreamEndCapture(s.cu_stream())
        if exc_type is not None:  # the block raised: its error is the one to see
            if not err and captured is not None:
                d.cuGraphDestroy(captured)  # what was captured before it goes
            return
        if err:
            raise ToolchainError(
                f"the CUDA graph capture failed: {result_text(d, err)}",
                user_location(),
                help="everything inside `fl.graph` must be capturable: run the step once before "
                "capturing (the first launch compiles, loads and autotunes), allocate outside "
                "the block, and leave NumPy arrays and synchronisation out of it",
            )
        try:
            g._exec = driver.call("cuGraphInstantiate", d.cuGraphInstantiate, captured, 0)
        except BaseException:
            d.cuGraphDestroy(captured)
            raise
        g._graph = captured
        g._stream = s
        g._watch(self._arguments)
        default_pool().graphs = True  # replays launch without being counted
