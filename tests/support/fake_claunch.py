"""The C launcher (fearless._claunch) over a recording stand-in for the driver: `Calls` and the
`c_driver` fixture, and the Tile side's `TileCu` and `tile_c`."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import pytest

from fearless.runtime import claunch, launch
from support.fake_driver import FakeDriver

LAUNCH = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    *([ctypes.c_uint] * 7),
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
)


FUNCTION = 0xF00D  # the CUfunction the fake driver's kernels have


class Calls(list):  # type: ignore[type-arg]
    """The fake cuLaunchKernel's calls; `result` is what it returns (0: CUDA_SUCCESS)."""

    result = 0


@pytest.fixture
def c_driver(fake_gpu: FakeDriver, monkeypatch: pytest.MonkeyPatch) -> Iterator[Calls]:
    """Every plan built in the test gets a C plan whose cuLaunchKernel records its call."""
    if claunch.module() is None:
        why = str(claunch.unavailable_reason())
        if "no C compiler" not in why and "no Python.h" not in why:
            pytest.fail(
                f"the claunch*.c sources do not build here: {why}"
            )  # a broken source, not a gap
        pytest.skip(f"no compiled launcher here: {why}")
    calls = Calls()

    def record(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):  # type: ignore[no-untyped-def]
        plan = fake_gpu.plan
        assert plan is not None and params != plan.packer.address  # the C plan's own buffer
        base = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))[0] - plan.packer.offsets[0]
        calls.append(
            {"f": f, "grid": (gx, gy, gz), "block": (bx, by, bz), "stream": stream or 0,
             "bytes": ctypes.string_at(base, plan.packer.size)}
        )  # fmt: skip
        return calls.result

    callback = LAUNCH(record)
    address = ctypes.cast(callback, ctypes.c_void_p).value
    monkeypatch.setattr(claunch, "driver_launch_address", lambda: address)
    monkeypatch.setattr(
        launch.driver,
        "load_kernel",
        lambda ck: launch.driver.LoadedKernel(ck.name, ck.entry, FUNCTION, 1, None, 512, 64, "ptx"),
    )
    yield calls
    del callback


class TileCu:
    """The part of cuda.bindings.driver a Tile GpuLaunch uses; cuLaunchKernel records the
    bytes each kernel parameter points at (the Python path)."""

    def __init__(self, sizes: list[int]) -> None:
        from cuda.bindings import driver as real

        self.CUstream, self.CUresult = real.CUstream, real.CUresult
        self.sizes = sizes
        self.calls: list[list[bytes]] = []

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):  # type: ignore[no-untyped-def]
        self.calls.append(_param_bytes(params, self.sizes))
        return (self.CUresult.CUDA_SUCCESS,)


def _param_bytes(params: int, sizes: list[int]) -> list[bytes]:
    pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
    return [ctypes.string_at(pointers[k], n) for k, n in enumerate(sizes)]


@pytest.fixture
def tile_c(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Calls, TileCu]]:
    """A Tile GpuLaunch's C plan calling a recording cuLaunchKernel, and a fake driver for its
    Python path; the default stream is the legacy one."""
    if claunch.module() is None:
        pytest.skip(f"no compiled launcher here: {claunch.unavailable_reason()}")
    from fearless.runtime import driver, tile_gpu

    # out, its 2 extents and 1 stride, x likewise, eps, n, flag
    sizes = [8, 4, 4, 4, 8, 4, 4, 4, 4, 8, 1]
    cu = TileCu(sizes)
    monkeypatch.setattr(driver, "_cu", cu)
    monkeypatch.setattr(tile_gpu, "default_cu_stream", lambda legacy: legacy)
    calls = Calls()

    def record(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):  # type: ignore[no-untyped-def]
        calls.append(
            {"f": f, "grid": (gx, gy, gz), "block": (bx, by, bz), "stream": stream or 0,
             "bytes": _param_bytes(params, sizes)}
        )  # fmt: skip
        return calls.result

    callback = LAUNCH(record)
    address = ctypes.cast(callback, ctypes.c_void_p).value
    monkeypatch.setattr(claunch, "driver_launch_address", lambda: address)
    yield calls, cu
    del callback
