"""The red-team findings on devices, streams and graphs (runtime/devices.py, streams.py,
graphs.py) on the simulator: `fl.set_device` is per thread; inside `fl.graph` a launch on
another stream runs now, and what the driver refuses in a capture (allocating, synchronising,
reading back, staging NumPy arrays) is refused at the user's line; a replay runs every launch
before raising its first device error; `fl.graph`'s errors name the `with` line;
`Stream.synchronize` runs the deferred checks; a torch or CuPy stream of another GPU is E0702;
host arrays follow their stream's device; malformed environment ints are refused; any integer
but a bool is a device index; on the GPU a block that raises destroys what it captured (a
stand-in driver here)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config
from fearless.runtime import device_errors, devices, driver, graphs, process_gpu, streams
from support.graph_kernels import axpy, double, shifted


@pytest.fixture(autouse=True)
def two_sim_devices(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("FEARLESS_SIM_DEVICES", "2")
    monkeypatch.setattr(config, "_target_override", "sim")
    yield
    devices._current.device = 0


def test_set_device_is_per_thread() -> None:
    fl.set_device(1)
    seen: list[int] = []

    def other() -> None:
        seen.append(fl.current_device())  # a new thread: the process default
        fl.set_device(1)
        fl.set_device(0)
        seen.append(fl.empty(4).device)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == [0, 0]
    assert fl.current_device() == 1 and fl.zeros(4).device == 1  # this thread's own


def test_inside_fl_graph_a_launch_on_another_stream_runs_now() -> None:
    n, s = 256, fl.Stream()
    x, out, out2 = fl.ones(n), fl.zeros(n), fl.zeros(n)
    part = fl.zeros(n).partition((128,))
    g = fl.CUDAGraph()
    with fl.graph(g):
        axpy[1, 256, s](1.0, x, x, out)  # not the capture stream: runs now, as on the GPU
        double(part, x, stream=s)
        axpy[1, 256](1.0, x, x, out2)  # captured
    assert out.numpy()[0] == 2.0 and part.unpartition().numpy()[0] == 2.0
    assert out2.numpy()[0] == 0.0 and len(g._sim or []) == 1 and len(g._kept) == 1
    g2 = fl.CUDAGraph()
    with fl.graph(g2, stream=s):
        axpy[1, 256, s](1.0, x, x, out2)  # the capture stream itself: captured
    assert out2.numpy()[0] == 0.0 and len(g2._sim or []) == 1
    g2.replay()
    assert out2.numpy()[0] == 2.0


def test_a_captured_launch_is_one_on_the_capture_stream() -> None:
    capture = fl.Stream(0x10)  # a wrapped handle: compared by handle, as the driver does
    with streams.using_stream(capture, []):
        assert streams.captured(None) and streams.captured(capture) and streams.captured(0x10)
        assert not streams.captured(0x20) and not streams.captured(fl.Stream())
    with streams.using_stream(fl.Stream(), [], sim=True):  # the simulator's: handle 0
        assert not streams.captured(fl.Stream())


def test_a_replay_runs_every_launch_then_raises_the_first_device_error() -> None:
    n = 256
    x, o1, o2, ones = fl.zeros(n), fl.zeros(n), fl.zeros(n), fl.ones(n)
    g = fl.CUDAGraph()
    with fl.graph(g):
        shifted[1, 256](x, o1)  # thread 255 reads x[256]
        axpy[1, 256](1.0, ones, ones, o2)
    with pytest.raises(fl.KernelIndexError, match="index out of bounds"):
        g.replay()
    assert o2.numpy()[0] == 2.0  # the launch after the failing one ran, as on the GPU


def test_inside_fl_graph_what_the_driver_refuses_is_refused() -> None:
    t, h = fl.zeros(8), np.ones(8, np.float32)
    part = fl.zeros(8).partition((8,))
    g = fl.CUDAGraph()
    calls = [
        lambda: fl.zeros(8),
        lambda: fl.empty(8),
        lambda: fl.arange(3),
        lambda: fl.from_numpy(h),
        lambda: t.numpy(),
        lambda: fl.synchronize(),
        lambda: axpy[1, 32](1.0, h, h, t),
        lambda: double(part, h),
    ]
    with fl.graph(g):
        for call in calls:
            with pytest.raises(
                fl.ToolchainError, match="not permitted when stream is capturing"
            ) as e:
                call()
            assert e.value.code == "E0900"
            assert e.value.loc is not None and e.value.loc.file == __file__
            assert e.value.loc.line == call.__code__.co_firstlineno
    part.unpartition()
    assert fl.zeros(2).numpy().tolist() == [0.0, 0.0]  # after the block: allowed again
    fl.synchronize()


def test_fl_graph_errors_name_the_with_line() -> None:
    g = fl.CUDAGraph()
    nested = pytest.raises(fl.LaunchContractError, match="do not nest")
    with nested as e, fl.graph(g), fl.graph(fl.CUDAGraph()):  # this line
        pass
    assert e.value.loc is not None and e.value.loc.file == __file__
    line = Path(__file__).read_text().splitlines()[e.value.loc.line - 1]
    assert line.endswith("# this line")
    with pytest.raises(fl.LaunchContractError, match="not int") as e2:
        fl.graph(3)  # type: ignore[arg-type]
    assert e2.value.loc is not None and e2.value.loc.file == __file__


def test_stream_synchronize_runs_the_deferred_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    s = fl.Stream()
    monkeypatch.setattr(driver, "is_initialized", lambda: True)
    monkeypatch.setattr(driver, "synchronize_stream", lambda handle: None)
    monkeypatch.setattr(streams, "default_pool", lambda: SimpleNamespace(check=lambda: None))

    def bad_block_table() -> None:
        raise fl.KernelIndexError("a bad block table")

    device_errors.defer(bad_block_table)
    with pytest.raises(fl.KernelIndexError, match="bad block table"):
        s.synchronize()
    s.synchronize()  # run once


def test_a_torch_or_cupy_stream_of_another_gpu_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class TorchStream:
        def __init__(self, device_index: int) -> None:
            self.device_index, self.cuda_stream = device_index, 0x40

    class CupyStream:
        def __init__(self, device_id: int) -> None:
            self.device_id, self.ptr = device_id, 0x50

    CupyStream.__module__ = "cupy.cuda.stream"
    assert fl.Stream(TorchStream(1)).device == 1  # its own device, where it says
    monkeypatch.setattr(process_gpu, "GPU", 0)
    monkeypatch.setattr(process_gpu, "_fixed", True)
    assert streams.stream_handle(TorchStream(0)) == 0x40
    assert streams.stream_handle(CupyStream(0)) == 0x50
    for other in (TorchStream(1), CupyStream(1)):
        with pytest.raises(fl.DeviceError, match="is GPU 1's, but fearless runs on GPU 0") as e:
            streams.stream_handle(other)
        assert e.value.code == "E0702"


def test_host_arrays_alone_follow_their_streams_device() -> None:
    h, out = np.ones(32, np.float32), np.zeros(32, np.float32)
    axpy[1, 32, fl.Stream(device=1)](1.0, h, h, out)  # current device 0: no device of its own
    assert out[0] == 2.0
    with pytest.raises(fl.DeviceError, match="arrays are on device 0, but its stream"):
        axpy[1, 32, fl.Stream(device=1)](1.0, h, h, fl.zeros(32))


@pytest.mark.parametrize("bad", ["²", "٢", "99999999999999", "1" * 5000])
def test_environment_ints_are_ascii_and_bounded(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("FEARLESS_SIM_DEVICES", bad)
    with pytest.raises(
        fl.DeviceError, match=f"FEARLESS_SIM_DEVICES must be .*not '{bad[:20]}"
    ) as e:
        fl.device_count()
    assert e.value.loc is not None and e.value.loc.file == __file__
    for name, read in (
        ("FEARLESS_SIM_MAX_THREADS", config.sim_max_threads),
        ("FEARLESS_SIM_CO_RESIDENT_BLOCKS", config.sim_co_resident_blocks),
    ):
        monkeypatch.setenv(name, bad)
        if not bad.isascii() or len(bad) > 30:  # a digit elsewhere, or past any launch
            with pytest.raises(ValueError, match=name):
                read()
    monkeypatch.setenv("FEARLESS_SIM_DEVICES", "02")
    assert fl.device_count() == 2


def test_any_integer_but_a_bool_is_a_device_index() -> None:
    assert fl.empty(4, device=np.int64(1)).device == 1
    fl.set_device(np.int32(1))  # type: ignore[arg-type]
    assert type(fl.current_device()) is int and fl.current_device() == 1
    for bad in (True, np.True_, 1.0, "1"):
        with pytest.raises(fl.DeviceError, match="is a device index"):
            fl.empty(4, device=bad)


def test_on_the_gpu_a_block_that_raises_destroys_its_capture(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """graphs.py's driver branch with a stand-in driver: the graph captured before the block
    raised is destroyed (it leaked), and a block that ends instantiates it."""
    s = fl.Stream()
    log: list[Any] = []

    class Cu:
        CUstreamCaptureMode = SimpleNamespace(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL=1)

        def CUstream(self, handle: int) -> int:
            return handle

        def cuStreamBeginCapture(self, stream: int, mode: int) -> tuple[int]:
            log.append("begin")
            return (0,)

        def cuStreamEndCapture(self, stream: int) -> tuple[int, str]:
            return (0, "graph")

        def cuGraphDestroy(self, graph: str) -> None:
            log.append(("destroy", graph))

        def cuGraphInstantiate(self, graph: str, flags: int) -> tuple[int, str]:
            return (0, "exec")

        def cuGraphExecDestroy(self, exec_: str) -> None:
            log.append(("destroy", exec_))

    def call(what: str, fn: Any, *args: Any) -> Any:
        result = fn(*args)
        return result[1] if len(result) == 2 else None

    monkeypatch.setattr(graphs, "current_target", lambda: SimpleNamespace(simulated=False))
    monkeypatch.setattr(driver, "ensure_initialized", lambda: None)
    monkeypatch.setattr(driver, "cu", lambda: Cu())
    monkeypatch.setattr(driver, "call", call)
    monkeypatch.setattr(graphs, "default_pool", lambda: SimpleNamespace(graphs=False))
    g = fl.CUDAGraph()
    with pytest.raises(RuntimeError, match="the user's"), fl.graph(g, stream=s):
        raise RuntimeError("the user's")
    assert log == ["begin", ("destroy", "graph")] and not g.captured
    assert streams._captures == 0 and streams.capture_stream() is None
    log.clear()
    with fl.graph(g, stream=s):
        pass
    assert g.captured and log == ["begin"]
    g.reset()
    assert log == ["begin", ("destroy", "exec"), ("destroy", "graph")]
