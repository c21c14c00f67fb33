"""A stand-in for the CUDA driver on the cooperative launch path (grid-wide sync):
`FakeCooperativeDriver` (occupancy, memsets and cuLaunchCooperativeKernel recorded) and the
`fake` fixture that installs it."""

from __future__ import annotations

from typing import Any

import pytest

import fearless as fl
from fearless.abi import CompiledKernel, LaunchContract, ParamSpec
from fearless.runtime import driver
from support.fake_driver import FAKE_H200

F32 = fl.f32


class FakeCooperativeDriver:
    """cuda.bindings.driver, except for the calls a cooperative launch makes, recorded."""

    def __init__(self, per_sm: int) -> None:
        from cuda.bindings import driver as real

        self.CUstream = real.CUstream
        self.CUresult = real.CUresult
        self.per_sm = per_sm
        self.calls: list[tuple[str, Any]] = []
        self.packer: Any = None

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, f: Any, threads: int, shmem: int) -> Any:
        self.calls.append(("occupancy", (f, threads, shmem)))
        return self.CUresult.CUDA_SUCCESS, self.per_sm

    def cuMemAlloc(self, nbytes: int) -> Any:
        self.calls.append(("alloc", nbytes))
        return self.CUresult.CUDA_SUCCESS, 0xB000 + 0x100 * sum(c[0] == "alloc" for c in self.calls)

    def cuMemFree(self, ptr: int) -> Any:
        return (self.CUresult.CUDA_SUCCESS,)

    def cuMemsetD32Async(self, ptr: int, value: int, count: int, stream: Any) -> Any:
        self.calls.append(("memset", (ptr, value, count, int(stream))))
        return (self.CUresult.CUDA_SUCCESS,)

    def cuLaunchKernel(self, *args: Any) -> Any:
        raise AssertionError("a cooperative kernel must not go through cuLaunchKernel")

    def cuLaunchCooperativeKernel(
        self, f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shm: int, s: Any, p: int
    ) -> Any:
        self.calls.append(("launch", ((gx, gy, gz), (bx, by, bz), int(s), self.packer.to_bytes())))
        return (self.CUresult.CUDA_SUCCESS,)


def _cooperative_kernel() -> CompiledKernel:
    return CompiledKernel(
        name="k",
        entry="fearless_k",
        params=(ParamSpec("x", "slice", F32), ParamSpec("out", "disjoint", F32)),
        sites=(),
        contract=LaunchContract(),
        arch="sm_90",
        cooperative=True,
    )


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCooperativeDriver:
    fake = FakeCooperativeDriver(per_sm=4)
    monkeypatch.setattr(driver, "_info", FAKE_H200)
    monkeypatch.setattr(driver, "_cu", fake)
    monkeypatch.setattr(
        driver,
        "load_kernel",
        lambda ck: driver.LoadedKernel(ck.name, ck.entry, "CUfunction", 1, None, 1024, 40, "ptx"),
    )
    monkeypatch.delenv("FEARLESS_SYNC", raising=False)
    return fake
