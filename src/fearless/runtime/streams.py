"""CUDA streams: `fl.Stream`, and reading the handle out of anyone's stream object.

A launch's `stream=` may be None (the default: torch's current stream where torch uses CUDA in
this process, so that a launch orders with torch's work, joins a `torch.cuda.graph` capture
and follows `with torch.cuda.stream(s):`; else the legacy default stream, handle 0, which
orders with torch's and CuPy's default stream; `default_cu_stream`), an `fl.Stream`, a
torch.cuda.Stream (`.cuda_stream`), a
CuPy stream (`.ptr`), any object with `__cuda_stream__` (cuda.core, and the protocol's other
adopters), or a raw handle int. How to read a handle is decided once per type; anything else
is refused (E0701). A torch or CuPy stream of another GPU than the process's is refused
(E0702) where the stream says its device; a raw handle or a `__cuda_stream__` object is taken
as the process GPU's. The simulator refuses the same objects (`check_stream`, which needs no
GPU) and then has nothing to order: it runs each launch to completion.

`fl.Stream()` makes a *blocking* stream (it synchronises with the legacy default stream),
because fearless allocates, fills and copies tensors on the legacy stream: a kernel on an
fl.Stream then never sees a tensor before it is ready, nor outlives its memory.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import DeviceError, ToolchainError
from . import device_errors, devices, driver, process_gpu
from .device_errors import _run_deferred, default_pool
from .location import argument_error, user_location
from .target import current_target

_by_handle: dict[int, Any] = {}  # CUstream objects of torch's streams seen, by handle
_BY_HANDLE_MAX = 64
# .stream: the stream `fl.graph` captures on, on this thread (on the simulator the one it was
# given, if any); .kept: the arguments of the launches it captured (the graph holds them, so
# that no array dies before its last replay); .sim: the simulator records the block
_override = threading.local()
_captures = 0  # `fl.graph` blocks open on any thread: while 0, no thread-local to read


def capture_stream() -> Stream | None:
    """The stream launches without `stream=` go to on this thread (`fl.graph`), if any."""
    return getattr(_override, "stream", None)


@contextlib.contextmanager
def using_stream(stream: Stream | None, kept: list[Any], sim: bool = False) -> Iterator[None]:
    """Within: launches on this thread without `stream=` go to `stream`, and the arguments of
    those the capture takes (`captured`) are appended to `kept`. `sim`: the simulator's
    `fl.graph`, which records those launches (`stream` is the one it was given, or None)."""
    global _captures
    _override.stream, _override.kept, _override.sim = stream, kept, sim
    _captures += 1
    try:
        yield
    finally:
        _override.stream = _override.kept = None
        _override.sim = False
        _captures -= 1


def captured(stream: Any) -> bool:
    """Inside `fl.graph` on this thread: whether a launch given `stream` goes into the graph,
    as the driver's capture takes it: one without `stream=` (it goes to the capture stream), or
    one on the capture stream itself. A launch on any other stream runs now, on both targets."""
    if stream is None:
        return True
    capture = getattr(_override, "stream", None)
    if capture is None:
        return False
    if stream is capture:
        return True
    # the simulator's own fl.Streams all have handle 0: there only the capture stream is it
    return capture._handle != 0 and stream_handle(stream) == capture._handle


def keep_if_captured(args: Any, stream: Any) -> None:
    """Inside `fl.graph`, keep the arguments of a launch the capture takes (`captured`) alive
    as long as the graph, whose replays check that none of its tensors has moved since
    (graphs.py)."""
    if _captures:
        kept = getattr(_override, "kept", None)
        if kept is not None and captured(stream):
            kept.append(args)


def refuse_in_sim_capture(what: str) -> None:
    """While the simulator records an `fl.graph` block on this thread, refuse `what` (an
    allocation, a synchronisation, a read back to the host) as the GPU's driver refuses it
    inside a capture: ToolchainError (E0900), at the user's line. Nothing outside a block."""
    if _captures and getattr(_override, "sim", False):
        raise ToolchainError(
            f"{what} failed: operation not permitted when stream is capturing (inside "
            "`fl.graph`, which the simulator refuses as the GPU's driver does)",
            user_location(),
            help="everything inside `fl.graph` must be capturable: allocate the tensors before "
            "the block, and read results (`.numpy()`, `fl.synchronize()`) after it, or after "
            "`g.replay()`",
        )


# torch's raw current-stream getter and its "is the current stream capturing" test, once torch
# has initialised CUDA. claunch_streams.c reads these globals (and calls the function below)
# by name: the compiled launchers decide the default stream as this module does.
_torch_current: Callable[[int], int] | None = None
_torch_capturing: Callable[[], bool] | None = None


def _torch_current_stream() -> Callable[[int], int] | None:
    """torch's current-stream getter, once torch has initialised CUDA (then kept: it stays)."""
    global _torch_current, _torch_capturing
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    _torch_capturing = getattr(
        torch._C, "_cuda_isCurrentStreamCapturing", torch.cuda.is_current_stream_capturing
    )
    _torch_current = torch._C._cuda_getCurrentRawStream
    return _torch_current


def _torch_handle() -> int:
    """torch's current stream on fearless's GPU once torch has initialised CUDA, else 0 (the
    legacy stream). A launch on a stream torch is capturing (`torch.cuda.graph`) sets
    `ErrorPool.graphs`: its replays will not be counted."""
    current = _torch_current or _torch_current_stream()
    if current is None:
        return 0
    handle = int(current(process_gpu.GPU))
    if handle and (_torch_capturing or sys.modules["torch"].cuda.is_current_stream_capturing)():
        default_pool().graphs = True
    return handle


def default_cu_stream(legacy: Any, args: Any = None) -> Any:
    """The CUstream of a launch given `stream=None`: torch's current stream on fearless's GPU
    when torch has initialised CUDA in this process (it is `legacy` unless torch code chose
    another), else `legacy`, the legacy default stream. `args`, the launch's arguments, are
    kept alive by a graph that captures the launch. A few hundred nanoseconds with torch
    loaded; one dict lookup without. Inside `fl.graph`, the capture stream."""
    captured = getattr(_override, "stream", None) if _captures else None
    if captured is not None:
        if args is not None:
            keep_if_captured(args, None)
        return captured.cu_stream()
    handle = _torch_handle()
    if not handle:
        return legacy
    cs = _by_handle.get(handle)
    if cs is None:
        if len(_by_handle) >= _BY_HANDLE_MAX:
            _by_handle.clear()
        cs = _by_handle[handle] = driver.cu().CUstream(handle)
    return cs


class Stream:
    """A CUDA stream: a new one (`fl.Stream()`), or a wrapper of a torch/CuPy/raw stream."""

    __slots__ = ("_core", "_cu", "_device", "_handle", "_owner")

    def __init__(self, stream: Any = None, device: int | None = None) -> None:
        self._core: Any = None  # the cuda.core Stream this object created, if any
        self._owner = stream  # a wrapped foreign stream stays alive as long as this
        if device is None and stream is not None:
            device = _device_of(stream)  # a torch or CuPy stream's own GPU, where it says
        self._device = devices.resolve(device, "fl.Stream")
        if stream is not None:
            self._handle = stream_handle(stream)
        elif current_target().simulated:
            self._handle = 0  # the simulator runs each launch to completion: nothing to order
        else:
            from cuda.core import Device, StreamOptions

            driver.ensure_initialized()
            self._core = Device(self._device).create_stream(
                options=StreamOptions(nonblocking=False)
            )
            self._handle = int(self._core.handle)
        self._cu = driver.cu().CUstream(self._handle) if driver.is_initialized() else None

    @property
    def handle(self) -> int:
        """The CUstream handle as an int (0: the legacy default stream)."""
        return self._handle

    @property
    def device(self) -> int:
        """The device whose work this stream orders (runtime/devices.py)."""
        return self._device

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self._handle)

    def synchronize(self) -> None:
        """Wait for this stream's work, then raise any device error it left (KernelIndexError)
        or an operator's deferred check found (`device_errors.defer`), as `fl.synchronize` does."""
        if not driver.is_initialized():
            return
        driver.synchronize_stream(self._handle)
        default_pool().check()
        _run_deferred()

    def cu_stream(self) -> Any:
        """The handle as a cuda.bindings CUstream (made once)."""
        if self._cu is None:
            self._cu = driver.cu().CUstream(self._handle)
        return self._cu

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other._handle == self._handle

    def __hash__(self) -> int:
        return hash(self._handle)

    def __repr__(self) -> str:
        on = f", device={self._device}" if self._device else ""
        return f"fl.Stream(handle=0x{self._handle:x}{on})"


def stream_handle(obj: Any) -> int:
    """The CUstream handle (an int) of any supported stream object; None is the legacy stream 0."""
    reader = _readers.get(type(obj))
    if reader is None:
        reader = _reader_for(obj)
        _readers[type(obj)] = reader
    return reader(obj)


def check_stream(obj: Any, device: int | None = None) -> None:
    """Refuse `obj` as a launch's `stream=` unless a GPU launch would take it (no GPU needed),
    or when it is an fl.Stream of another device than the launch's arrays (`device`; None: a
    launch of host arrays alone, which runs on its stream's device)."""
    if obj is not None:
        stream_handle(obj)
        if isinstance(obj, Stream) and device is not None and obj._device != device:
            raise DeviceError(
                f"the launch's arrays are on device {device}, but its stream is device "
                f"{obj._device}'s",
                user_location(),
                help=f"launch on a stream of that device: `fl.Stream(device={device})`",
            )


def _reader_for(obj: Any) -> Callable[[Any], int]:
    if isinstance(obj, Stream):
        return _read_fl
    if isinstance(obj, int) and not isinstance(obj, bool):
        return _read_int
    if hasattr(obj, "__cuda_stream__"):
        return _read_protocol
    if hasattr(obj, "cuda_stream"):  # torch.cuda.Stream and torch.cuda.ExternalStream
        return _read_torch
    if hasattr(obj, "ptr") and type(obj).__module__.startswith("cupy"):
        return _read_cupy
    return _refuse


def _read_none(obj: Any) -> int:
    return 0


def _read_fl(obj: Any) -> int:
    return int(obj._handle)


def _read_int(obj: Any) -> int:
    if obj < 0:
        _refuse(obj)
    return int(obj)


def _read_protocol(obj: Any) -> int:
    _version, handle = obj.__cuda_stream__()
    return int(handle)


def _read_torch(obj: Any) -> int:
    index = getattr(obj, "device_index", None)
    if index is not None and index != process_gpu.GPU and process_gpu.is_fixed():
        raise _other_gpu(obj, index)
    return int(obj.cuda_stream)


def _read_cupy(obj: Any) -> int:
    index = getattr(obj, "device_id", None)
    if index is not None and index != process_gpu.GPU and process_gpu.is_fixed():
        raise _other_gpu(obj, index)
    return int(obj.ptr)


def _device_of(obj: Any) -> int | None:
    """The GPU a stream object says it belongs to (an fl.Stream's, torch's `device_index`,
    CuPy's `device_id`), or None where it does not say (a raw handle, `__cuda_stream__`)."""
    if isinstance(obj, Stream):
        return obj._device
    if isinstance(obj, int):
        return None
    index = getattr(obj, "device_index", None)
    if index is None and type(obj).__module__.startswith("cupy"):
        index = getattr(obj, "device_id", None)
    return index if isinstance(index, int) and not isinstance(index, bool) else None


def _other_gpu(obj: Any, index: int) -> DeviceError:
    """E0702 for a stream of GPU `index` given to a process that runs on another GPU."""
    gpu = process_gpu.GPU
    return DeviceError(
        f"the stream (a `{type(obj).__name__}`) is GPU {index}'s, but fearless runs on GPU "
        f"{gpu} in this process: a launch on it would run on GPU {gpu} with another GPU's stream",
        user_location(),
        help=f"launch on a stream of GPU {gpu} (`fl.Stream()`, "
        f"`torch.cuda.Stream(device={gpu})`), or choose GPU {index} before fearless's first "
        f"GPU call (`fl.set_device({index})`, or `torch.cuda.set_device({index})`)",
    )


def _refuse(obj: Any) -> int:
    raise argument_error(
        f"`{type(obj).__name__}` is not a CUDA stream",
        help="pass stream=None (the default stream), an fl.Stream, a torch.cuda.Stream, a "
        "CuPy stream, or an object with `__cuda_stream__`",
    )


_readers: dict[type, Callable[[Any], int]] = {type(None): _read_none}

device_errors.refuse_in_capture[0] = refuse_in_sim_capture  # `fl.synchronize()` inside fl.graph
