"""A stand-in for the CUDA driver on the SIMT launch path: `FakeDriver` (cuLaunchKernel records its
arguments), the `fake_gpu` fixture that installs it, `HostErrorPool` (the error pool on host
memory), and the compiled kernels and plans the launch tests drive through them."""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless.abi import (
    ERROR_RECORD_BYTES,
    ERROR_RECORD_WORDS,
    CompiledKernel,
    LaunchContract,
    ParamSpec,
    SiteInfo,
)
from fearless.errors import Location
from fearless.runtime import driver, launch
from fearless.runtime.device_errors import ErrorPool, _Chunk
from fearless.runtime.tensor import Tensor

# what every fake GPU reports: an H200's limits, 132 SMs
FAKE_H200 = driver.DeviceInfo(
    0, "Fake H200", (9, 0), "sm_90", 1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535), 132, 32
)

F32 = fl.f32


def _specs(*kinds: str) -> tuple[ParamSpec, ...]:
    names = "abcdefghijklmnop"
    return tuple(ParamSpec(names[i], k, F32) for i, k in enumerate(kinds))  # type: ignore[arg-type]


class HostErrorPool(ErrorPool):
    """The pool with host memory standing in for the device: same logic, no driver."""

    def __init__(self, chunk_slots: int = 4) -> None:
        super().__init__(chunk_slots)
        self.copies = 0
        self.syncs = 0

    def _new_chunk(self) -> _Chunk:
        memory = np.zeros(self.chunk_slots * ERROR_RECORD_WORDS, np.int64)
        return _Chunk(memory, memory.ctypes.data, self.chunk_slots)

    def _copy_out(self, host: np.ndarray, ptr: int) -> None:
        self.copies += 1
        ctypes.memmove(host.ctypes.data, ptr, host.nbytes)

    def _zero(self, ptr: int) -> None:
        ctypes.memset(ptr, 0, ERROR_RECORD_BYTES)

    def _sync_all(self) -> None:
        self.syncs += 1


def _write_record(address: int, words: list[int]) -> None:
    """What a failing device check does: fill the record (flag last here, it makes no odds)."""
    ctypes.memmove(address, struct.pack(f"<{ERROR_RECORD_WORDS}q", *words), ERROR_RECORD_BYTES)


def _kernel(
    name: str = "vecadd", params: tuple[ParamSpec, ...] | None = None, **contract: Any
) -> CompiledKernel:
    params = params or _specs("slice", "slice", "disjoint")
    sites = tuple(
        SiteInfo("read" if p.kind == "slice" else "write", p.name, Location("k.py", 5 + i, 8))
        for i, p in enumerate(params)
    )
    return CompiledKernel(
        name, f"fearless_{name}", params, sites, LaunchContract(**contract), "sm_90", ptx="// ptx"
    )


class FakeDriver:
    """cuda.bindings.driver, except that cuLaunchKernel records its arguments."""

    def __init__(self) -> None:
        from cuda.bindings import driver as real

        self.CUstream = real.CUstream
        self.CUresult = real.CUresult
        self.calls: list[dict[str, Any]] = []
        self.plan: launch.GpuLaunchPlan | None = None
        self.results: list[Any] = []

    def cuLaunchKernel(
        self,
        f: Any,
        gx: int,
        gy: int,
        gz: int,
        bx: int,
        by: int,
        bz: int,
        shmem: int,
        stream: Any,
        params: int,
        extra: int,
    ) -> tuple[Any]:
        assert self.plan is not None and params == self.plan.packer.address
        self.calls.append(
            {
                "grid": (gx, gy, gz),
                "block": (bx, by, bz),
                "stream": int(stream),
                "bytes": self.plan.packer.to_bytes(),
            }
        )
        return (self.results.pop(0) if self.results else self.CUresult.CUDA_SUCCESS,)


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    fake = FakeDriver()
    monkeypatch.setattr(driver, "_info", FAKE_H200)
    monkeypatch.setattr(driver, "_cu", fake)
    monkeypatch.setattr(
        driver,
        "load_kernel",
        lambda ck: driver.LoadedKernel(
            ck.name,
            ck.entry,
            "CUfunction",
            1,
            None,
            512,
            64,
            "ptx",
            coarse_function="CUfunction_x4" if ck.coarse_entry else None,
            fast_function="CUfunction_fast" if ck.fast_entry else None,
            fast_coarse_function="CUfunction_fast_x4" if ck.fast_coarse_entry else None,
        ),
    )
    monkeypatch.delenv("FEARLESS_SYNC", raising=False)
    return fake


def _plan(
    fake: FakeDriver, ck: CompiledKernel | None = None
) -> tuple[launch.GpuLaunchPlan, HostErrorPool]:
    pool = HostErrorPool()
    plan = launch.GpuLaunchPlan(ck or _kernel(), pool=pool)
    fake.plan = plan
    return plan, pool


def _dev(ptr: int, n: int, dtype: Any = F32) -> Tensor:
    return Tensor._make(ptr, (n,), dtype, on_device=True, owner=None)
