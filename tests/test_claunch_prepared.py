"""`kernel(prep, *args)` in one C call (claunch_prepared.c), and the default stream decided in C.

A PreparedLaunch on the GPU carries its configuration bound in C; the call hands the whole
argument tuple over. These tests drive it with test_claunch.py's recording cuLaunchKernel and a
real compiled kernel (the driver's load is faked): the bytes must be the Python launcher's, the
error pool must count the launch, and anything the C side does not decide (a `fl.graph`
capture, a capturing torch stream, an error) must go to the Python launcher, which explains it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import fearless as fl
from fearless import simt
from fearless.runtime import device_errors, launch, streams, target
from fearless.runtime.tensor import Tensor
from support.fake_claunch import Calls, c_driver  # noqa: F401
from support.fake_driver import FakeDriver, HostErrorPool, fake_gpu  # noqa: F401


def _axpy(a: fl.f32, x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]) -> None:
    i = simt.thread.index_1d()
    out[i] = a * x[i]


axpy: Any = None  # a new Kernel per test (`gpu`): its plan holds that test's fake driver


@pytest.fixture
def gpu(
    fake_gpu: FakeDriver,  # noqa: F811
    c_driver: Calls,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[FakeDriver, Calls, HostErrorPool]]:
    """The CUDA target on the fake driver, with a host error pool; C launches record."""
    pool = HostErrorPool()
    monkeypatch.setattr(device_errors, "_pool", pool)
    monkeypatch.setattr(target, "_probe", (True, "fake", "sm_90"))
    monkeypatch.setattr(streams, "_torch_current", None)
    monkeypatch.setattr(streams, "_torch_capturing", None)
    monkeypatch.delenv("FEARLESS_SYNC", raising=False)
    monkeypatch.setitem(globals(), "axpy", simt.kernel(_axpy))
    fl.set_target("cuda")
    yield fake_gpu, c_driver, pool
    fl.set_target(None)


def _dev(ptr: int, n: int) -> Tensor:
    return Tensor._make(ptr, (n,), fl.f32, on_device=True, owner=None)


def _prepared(gpu: tuple[FakeDriver, Calls, HostErrorPool]) -> Any:
    fake, _, _ = gpu
    prep = axpy.prepare(4, 256)
    assert prep.compiled is not None
    fake.plan = prep.launcher.plan  # type: ignore[attr-defined]
    return prep


def test_a_prepared_launch_is_one_c_call_packing_what_python_packs(
    gpu: tuple[FakeDriver, Calls, HostErrorPool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake, calls, pool = gpu
    prep = _prepared(gpu)
    x, out = _dev(0x10000, 1000), _dev(0x20000, 1000)
    axpy(prep, 2.0, x, out)
    assert len(calls) == 1 and not fake.calls and pool.launches == 1
    assert calls[0]["grid"] == (4, 1, 1) and calls[0]["block"] == (256, 1, 1)
    assert calls[0]["stream"] == 0  # torch has not touched CUDA: the legacy stream
    monkeypatch.setattr(prep.launcher.plan, "cplan", None)
    python = launch.build_launcher(prep.launcher.plan, launch._PACK_ERRORS)[0]
    python(prep.grid, prep.block, (2.0, x, out))
    assert fake.calls[0]["bytes"] == calls[0]["bytes"] and pool.launches == 2


def test_errors_go_to_the_python_launcher_which_explains_them(
    gpu: tuple[FakeDriver, Calls, HostErrorPool],
) -> None:
    fake, calls, pool = gpu
    prep = _prepared(gpu)
    x = _dev(0x10000, 1000)
    with pytest.raises(fl.BorrowError):
        axpy(prep, 2.0, x, x)
    with pytest.raises(fl.KernelTypeError, match="expects"):
        axpy(prep, 2.0, x, Tensor._make(0x20000, (1000,), fl.f16, on_device=True, owner=None))
    with pytest.raises(fl.KernelTypeError):
        axpy(prep, 2.0, x)
    assert not calls and not fake.calls and pool.launches == 0


def test_the_default_stream_is_decided_in_c_as_streams_decides_it(
    gpu: tuple[FakeDriver, Calls, HostErrorPool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake, calls, pool = gpu
    prep = _prepared(gpu)
    x, out = _dev(0x10000, 1000), _dev(0x20000, 1000)
    monkeypatch.setattr(streams, "_torch_current", lambda device: 0x5000)
    monkeypatch.setattr(streams, "_torch_capturing", lambda: False)
    axpy(prep, 2.0, x, out)
    assert calls[-1]["stream"] == 0x5000 and not fake.calls  # torch's current stream, in C
    monkeypatch.setattr(streams, "_torch_capturing", lambda: True)
    axpy(prep, 2.0, x, out)  # torch is capturing: the Python launcher marks the pool's graphs
    assert len(calls) == 1 and len(fake.calls) == 1 and fake.calls[0]["stream"] == 0x5000
    assert pool.graphs
    monkeypatch.setattr(streams, "_captures", 1)  # inside fl.graph: the Python launcher
    monkeypatch.setattr(streams._override, "stream", None, raising=False)
    monkeypatch.setattr(streams, "_torch_current", lambda device: 0)
    axpy(prep, 2.0, x, out)
    assert len(calls) == 1 and len(fake.calls) == 2 and pool.launches == 3


def test_fearless_sync_synchronises_after_a_c_launch(
    gpu: tuple[FakeDriver, Calls, HostErrorPool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake, calls, _ = gpu
    prep = _prepared(gpu)
    synced: list[int] = []
    monkeypatch.setattr(device_errors, "synchronize", lambda: synced.append(1))
    x, out = _dev(0x10000, 1000), _dev(0x20000, 1000)
    for value, want in (
        *(("0", []), ("1", [1]), ("", [1]), ("false", [1]), ("OFF", [1])),
        *(("yes", [1, 1]), ("TRUE", [1, 1, 1])),  # config.flag's words, in any case (issue 33)
    ):
        monkeypatch.setenv("FEARLESS_SYNC", value)
        axpy(prep, 2.0, x, out)
        assert synced == want, value
    assert len(calls) == 7 and not fake.calls


def test_an_explicit_stream_takes_the_generated_launcher(
    gpu: tuple[FakeDriver, Calls, HostErrorPool],
) -> None:
    fake, calls, pool = gpu
    prep = _prepared(gpu)
    x, out = _dev(0x10000, 1000), _dev(0x20000, 1000)
    axpy(prep, 2.0, x, out, stream=0x7000)  # a raw handle: cuda.bindings, as before
    assert fake.calls[-1]["stream"] == 0x7000 and not calls and pool.launches == 1


def test_the_simulator_prepares_no_c_launch() -> None:
    fl.set_target("sim")
    try:
        axpy = simt.kernel(_axpy)
        prep = axpy.prepare(1, 32)
        assert prep.compiled is None
        out = fl.zeros(32, fl.f32)
        axpy(prep, 3.0, fl.full(32, 2.0, fl.f32), out)
        assert out.numpy().tolist() == [6.0] * 32
    finally:
        fl.set_target(None)
