"""A stand-in for the CUDA driver on the Tile launch path: `FakeCU` and the `fake_gpu` fixture that
installs it."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import fearless as fl
from fearless.abi import CompiledTile
from fearless.runtime import driver, target
from fearless.runtime.tensor import Tensor


class FakeCU:
    """The parts of cuda.bindings.driver a Tile launch uses; cuLaunchKernel records."""

    def __init__(self) -> None:
        from cuda.bindings import driver as real

        self.CUstream = real.CUstream
        self.CUresult = real.CUresult
        self.CUfunction_attribute = real.CUfunction_attribute
        self.cluster = (0, 0, 0)
        self.calls: list[dict[str, Any]] = []
        self.results: list[Any] = []
        self.sizes: list[int] = []  # bytes of each parameter, to read at launch time

    def cuFuncGetAttribute(self, attr: Any, fn: Any) -> tuple[Any, int]:
        a = self.CUfunction_attribute
        axes = [
            a.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
            a.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
            a.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
        ]
        return self.CUresult.CUDA_SUCCESS, self.cluster[axes.index(attr)]

    def cuLaunchKernel(self, f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                       shmem: int, stream: Any, params: int, extra: int) -> tuple[Any]:  # fmt: skip
        pointers = (ctypes.c_void_p * max(1, len(self.sizes))).from_address(params)
        self.calls.append(
            {
                "function": f,
                "grid": (gx, gy, gz),
                "block": (bx, by, bz),
                "stream": int(stream),
                "params": [
                    ctypes.string_at(p, n) for p, n in zip(pointers, self.sizes, strict=False)
                ],
            }
        )
        return (self.results.pop(0) if self.results else self.CUresult.CUDA_SUCCESS,)


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCU]:
    fake = FakeCU()
    monkeypatch.setattr(driver, "_cu", fake)
    monkeypatch.setattr(driver, "load_kernel", lambda ck: driver.LoadedKernel(
        ck.name, ck.entry, f"CUfunction:{ck.name}", 1, None, 1, 32, "cubin"))  # fmt: skip
    monkeypatch.setattr(target, "_probe", (True, "Fake H200 (sm_90)", "sm_90"))
    monkeypatch.setenv("FEARLESS_TARGET", "cuda")
    monkeypatch.delenv("FEARLESS_ARCH", raising=False)
    monkeypatch.setattr(
        sys.modules["fearless.tile.compiles"],
        "compile_cubin",
        lambda ir, arch: CompiledTile(ir.name, arch, ir.signature, b"", b"\x7fELF"),
    )
    yield fake


def _dev(ptr: int, shape: tuple[int, ...], dtype: Any = fl.f32) -> Tensor:
    return Tensor._make(ptr, shape, dtype, on_device=True, owner=None)
