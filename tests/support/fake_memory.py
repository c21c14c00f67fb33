"""Stand-ins for device memory under host arrays: `FakeMemory` (allocations, copies and frees
recorded), the fake GPUs over it for the SIMT (`SimtGpu`) and Tile (`TileGpu`) launch paths, and
`install_tile_gpu`, which makes a TileGpu the cuda target's driver."""

from __future__ import annotations

import ctypes
import struct
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from fearless import config
from fearless.abi import CompiledTile
from fearless.runtime import device_errors, driver, target
from support.fake_driver import FAKE_H200, FakeDriver, HostErrorPool
from support.fake_tile_driver import FakeCU


class FakeMemory:
    """Device memory in host memory, through the cuda.bindings calls driver.py makes."""

    def __init__(self) -> None:
        from cuda.bindings import driver as real

        self.CUstream_flags = real.CUstream_flags
        self.blocks: dict[int, Any] = {}
        self.copies: list[tuple[str, int]] = []  # (direction, bytes)
        self.syncs = 0

    def _ok(self) -> Any:
        return self.CUresult.CUDA_SUCCESS  # type: ignore[attr-defined]

    def cuMemAlloc(self, n: int) -> tuple[Any, int]:
        buf = ctypes.create_string_buffer(n)
        self.blocks[ctypes.addressof(buf)] = buf
        return self._ok(), ctypes.addressof(buf)

    def cuMemFree(self, ptr: int) -> tuple[Any]:
        self.blocks.pop(int(ptr))
        return (self._ok(),)

    def cuMemcpyHtoD(self, dst: int, src: int, n: int) -> tuple[Any]:
        self.copies.append(("in", n))
        ctypes.memmove(dst, src, n)
        return (self._ok(),)

    def cuMemcpyDtoH(self, dst: int, src: int, n: int) -> tuple[Any]:
        self.copies.append(("out", n))
        ctypes.memmove(dst, src, n)
        return (self._ok(),)

    def cuCtxSynchronize(self) -> tuple[Any]:
        self.syncs += 1
        return (self._ok(),)

    def cuStreamCreate(self, flags: int) -> tuple[Any, int]:
        return self._ok(), 0xF00D

    def cuStreamSynchronize(self, stream: Any) -> tuple[Any]:
        return (self._ok(),)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, n: int, stream: Any) -> tuple[Any]:
        self.copies.append(("out async", n))
        ctypes.memmove(dst, src, n)
        return (self._ok(),)

    def cuMemsetD8(self, ptr: int, pattern: int, count: int) -> tuple[Any]:
        ctypes.memset(ptr, pattern, count)
        return (self._ok(),)

    def cuMemsetD16(self, ptr: int, pattern: int, count: int) -> tuple[Any]:
        view = np.ctypeslib.as_array((ctypes.c_uint16 * count).from_address(ptr))
        view[:] = pattern
        return (self._ok(),)

    def cuMemsetD32(self, ptr: int, pattern: int, count: int) -> tuple[Any]:
        view = np.ctypeslib.as_array((ctypes.c_uint32 * count).from_address(ptr))
        view[:] = pattern
        return (self._ok(),)


class SimtGpu(FakeMemory, FakeDriver):
    """FakeDriver's recording cuLaunchKernel, then `run(pointers and lengths)` as the kernel."""

    def __init__(self) -> None:
        FakeMemory.__init__(self)
        FakeDriver.__init__(self)
        self.run: Callable[[bytes], None] | None = None

    def cuLaunchKernel(self, *args: Any) -> tuple[Any]:
        result = FakeDriver.cuLaunchKernel(self, *args)
        if self.run is not None:
            self.run(self.calls[-1]["bytes"])
        return result


class TileGpu(FakeMemory, FakeCU):
    def __init__(self) -> None:
        FakeMemory.__init__(self)
        FakeCU.__init__(self)
        self.seen: list[np.ndarray] = []  # the input each launch read, from "device memory"

    def cuLaunchKernel(self, *args: Any) -> tuple[Any]:
        result = FakeCU.cuLaunchKernel(self, *args)
        params = self.calls[-1]["params"]
        ptr = struct.unpack("<Q", params[2])[0]  # out: pointer, extent; x: pointer, extent
        self.seen.append(np.ctypeslib.as_array((ctypes.c_float * 8).from_address(ptr)).copy())
        return result


def install_tile_gpu(set_attr: Callable[[Any, str, Any], None]) -> TileGpu:
    """A TileGpu as the driver of the cuda target on a fake H200: kernels load as stand-ins and
    compile to a fake cubin, device errors go to a host pool. `set_attr` sets each attribute
    (a test's `monkeypatch.setattr`, or `setattr` for good)."""
    fake = TileGpu()
    set_attr(driver, "_info", FAKE_H200)
    set_attr(driver, "_cu", fake)
    set_attr(driver, "load_kernel", lambda ck: driver.LoadedKernel(
        ck.name, ck.entry, f"CUfunction:{ck.name}", 1, None, 1, 32, "cubin"))  # fmt: skip
    set_attr(device_errors, "_pool", HostErrorPool())
    set_attr(device_errors, "_stream", None)  # its private stream, made on the fake
    set_attr(target, "_probe", (True, "Fake H200 (sm_90)", "sm_90"))
    set_attr(config, "_target_override", "cuda")
    set_attr(
        sys.modules["fearless.tile.compiles"],
        "compile_cubin",
        lambda ir, arch: CompiledTile(ir.name, arch, ir.signature, b"", b"\x7fELF"),
    )
    return fake
