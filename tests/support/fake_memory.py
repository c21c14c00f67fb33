"""Stand-ins for device memory under host arrays: `FakeMemory` (allocations, copies and frees
recorded) and the fake GPUs over it for the SIMT (`SimtGpu`) and Tile (`TileGpu`) launch paths."""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from support.fake_driver import FakeDriver
from support.fake_tile_driver import FakeCU


class FakeMemory:
    """Device memory in host memory, through the cuda.bindings calls driver.py makes."""

    def __init__(self) -> None:
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
