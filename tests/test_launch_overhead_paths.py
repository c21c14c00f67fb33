"""The cheap paths of a warm SIMT launch keep every check.

The generated launcher reads a plain torch tensor inline (shape, is_cuda, get_device,
is_contiguous, dtype, data_ptr) and a 2-D fl.Tensor from its fields; `Kernel[grid, block]`
reuses the `_Configured` of an equal pair, and `Kernel._launcher` skips `current_target()` while
what it depends on is unchanged. These tests drive them with the recording driver of
tests/support/fake_driver.py and CPU torch tensors that say they live on cuda:0 (their pointers are
only packed, never dereferenced).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config, simt
from fearless.abi import ParamSpec, Requirement
from fearless.runtime import arrays, device_errors, target
from fearless.runtime.params import ParamPacker
from fearless.runtime.tensor import Tensor
from support.fake_driver import FakeDriver, HostErrorPool, _kernel, _plan, fake_gpu  # noqa: F401
from support.torch_on_gpu0 import report_cuda, report_cuda0

torch = pytest.importorskip("torch")


@pytest.fixture
def cuda_torch(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Plain CPU torch tensors report cuda:0 (`_not_cuda = True` on one makes it MPS-like:
    get_device() still 0, is_cuda False)."""
    report_cuda0(monkeypatch)
    yield


def _dev(ptr: int, shape: tuple[int, ...], dtype: Any = fl.f32) -> Tensor:
    return Tensor._make(ptr, shape, dtype, on_device=True, owner=None)


def _old_bytes(plan: Any, values: list[int]) -> bytes:
    """What ParamPacker.set (the packing before the generated launcher) writes."""
    packer = ParamPacker(plan.params)
    packer.set_error_record(plan.pool._record_address(plan.slot))
    packer.set(*values)
    return packer.to_bytes()


# ------------------------------------------------------------------------ the torch readers


def test_extractors_require_is_cuda_not_just_device_index_0() -> None:
    class Mps(torch.Tensor):
        """get_device() is 0 on MPS too; only is_cuda tells them apart."""

        def get_device(self) -> int:
            return 0

    one = torch.zeros(8).as_subclass(Mps)
    two = torch.zeros(2, 4).as_subclass(Mps)
    assert not one.is_cuda and one.get_device() == 0
    assert arrays._extract_torch(one) is None
    assert arrays._extract_torch_2d(two) is None
    assert arrays.launch_extractor(Mps) is arrays._extract_torch_subclass  # data_ptr: torch's own


def test_extractors_read_cuda_tensors_and_refuse_strided_ones(cuda_torch: None) -> None:
    a = torch.zeros(16)
    assert arrays._extract_torch(a) == (a.data_ptr(), 16, fl.f32)
    assert arrays._extract_torch(torch.zeros(32)[::2]) is None
    assert arrays._extract_torch(torch.zeros(32)[::2][:1]) is not None  # extent 1: contiguous
    assert arrays._extract_torch(torch.zeros(0)) is not None
    m = torch.zeros(4, 6, dtype=torch.float16)
    assert arrays._extract_torch_2d(m) == (m.data_ptr(), 4, 6, fl.f16)
    assert arrays._extract_torch_2d(m.t()) is None
    assert arrays._extract_torch_2d(torch.zeros(4, 12)[:, ::2]) is None
    assert arrays._extract_torch_2d(torch.zeros(4, 12)[:1, :6]) is not None  # one row
    assert arrays._extract_torch_2d(torch.zeros(4, 12)[:, :1]) is None
    assert arrays._extract_torch_2d(torch.zeros(0, 3)) is not None


def test_torch_dtype_of_inverts_torch_dtype() -> None:
    for tdt in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool):
        d = arrays.torch_dtype(tdt)
        assert d is not None and arrays.torch_dtype_of(d) is tdt


# ------------------------------------------------------------------- the generated launcher


def test_torch_launch_packs_what_the_old_packing_did(
    fake_gpu: FakeDriver,  # noqa: F811
    cuda_torch: None,
) -> None:
    plan, pool = _plan(fake_gpu)
    assert "elif tp is TorchTensor:" in plan.launcher_source
    a, b, c = torch.zeros(1000), torch.ones(1000), torch.zeros(1000)
    for _ in range(2):  # cold and warm
        plan.launch(4, 256, (a, b, c))
        values = [a.data_ptr(), 1000, b.data_ptr(), 1000, c.data_ptr(), 1000, 1024]
        assert fake_gpu.calls[-1]["bytes"] == _old_bytes(plan, values)
        record = pool._record_address(plan.slot)
        assert fake_gpu.calls[-1]["bytes"] == struct.pack("<QqQqQqqQ", *values, record)
    # fl.Tensor and torch arguments mixed pack the same way
    x = _dev(0x10000, (1000,))
    plan.launch(4, 256, (x, b, c))
    values = [0x10000, 1000, b.data_ptr(), 1000, c.data_ptr(), 1000, 1024]
    assert fake_gpu.calls[-1]["bytes"] == _old_bytes(plan, values)
    assert pool.launches == 3


def test_warm_torch_launch_still_refuses_bad_arguments(
    fake_gpu: FakeDriver,  # noqa: F811
    cuda_torch: None,
) -> None:
    plan, pool = _plan(fake_gpu)
    a, b, c = torch.zeros(64), torch.zeros(64), torch.zeros(64)
    plan.launch(1, 64, (a, b, c))  # warm from here on
    with pytest.raises(fl.KernelTypeError, match="`b` is not contiguous"):
        plan.launch(1, 64, (a, torch.zeros(128)[::2], c))
    with pytest.raises(fl.KernelTypeError, match="`b` has element type f64, but `vecadd` expects"):
        plan.launch(1, 64, (a, torch.zeros(64, dtype=torch.float64), c))
    with pytest.raises(fl.KernelTypeError, match=r"`c` has element type torch\.complex64"):
        plan.launch(1, 64, (a, b, torch.zeros(64, dtype=torch.complex64)))
    with pytest.raises(fl.KernelTypeError, match="`a` has 2 dimensions"):
        plan.launch(1, 64, (torch.zeros(8, 8), b, c))
    mps = torch.zeros(64)
    mps._not_cuda = True  # get_device() == 0 but not CUDA
    with pytest.raises(fl.KernelTypeError, match="`a`"):
        plan.launch(1, 64, (mps, b, c))
    with pytest.raises(fl.BorrowError):
        plan.launch(1, 64, (a, b, a))
    base = torch.zeros(128)
    with pytest.raises(fl.BorrowError):  # a view overlapping the output
        plan.launch(1, 64, (base[32:96], b, base[:64]))
    assert len(fake_gpu.calls) == 1 and pool.launches == 1  # nothing else ran


def test_torch_subclasses_and_requires_go_through_the_checks(
    fake_gpu: FakeDriver,  # noqa: F811
    cuda_torch: None,
) -> None:
    ck = _kernel(requires=(Requirement("len(a) == len(c)", "__len_0 == __len_2"),))
    plan, _ = _plan(fake_gpu, ck)
    a, b, c = torch.nn.Parameter(torch.zeros(32)), torch.zeros(32), torch.zeros(32)
    plan.launch(1, 32, (a, b, c))  # a subclass: the extractor branch
    assert fake_gpu.calls[-1]["bytes"][:16] == struct.pack("<Qq", a.data_ptr(), 32)
    with pytest.raises(fl.LaunchContractError):
        plan.launch(1, 32, (torch.zeros(31), b, c))


def test_two_d_torch_and_tensor_arguments(
    fake_gpu: FakeDriver,  # noqa: F811
    cuda_torch: None,
) -> None:
    params = (
        ParamSpec("a", "slice", fl.f32, 2),
        ParamSpec("b", "disjoint", fl.f32, 2),
    )
    plan, pool = _plan(fake_gpu, _kernel("mat", params))
    a, b = torch.zeros(8, 16), torch.zeros(8, 16)
    for _ in range(2):
        plan.launch(1, 128, (a, b))
        values = [a.data_ptr(), 8, 16, b.data_ptr(), 8, 16, 128]
        assert fake_gpu.calls[-1]["bytes"] == _old_bytes(plan, values)
    x = _dev(0x10000, (8, 16))
    plan.launch(1, 128, (x, b))
    assert fake_gpu.calls[-1]["bytes"] == _old_bytes(
        plan, [0x10000, 8, 16, b.data_ptr(), 8, 16, 128]
    )
    with pytest.raises(fl.KernelTypeError, match="`a` is not contiguous"):
        plan.launch(1, 128, (torch.zeros(16, 8).t(), b))
    with pytest.raises(fl.KernelTypeError, match="`a` has element type f16"):
        plan.launch(1, 128, (torch.zeros(8, 16, dtype=torch.float16), b))
    with pytest.raises(fl.KernelTypeError, match="`a` has element type f64"):
        plan.launch(1, 128, (_dev(0x10000, (8, 16), fl.f64), b))
    with pytest.raises(fl.KernelTypeError, match="`a` has 1 dimension"):
        plan.launch(1, 128, (_dev(0x10000, (128,)), b))
    with pytest.raises(fl.KernelTypeError, match="`b` is in host memory"):
        plan.launch(1, 128, (a, fl.from_numpy(np.zeros((8, 16), np.float32))))
    with pytest.raises(fl.BorrowError):
        plan.launch(1, 128, (a, a))
    assert pool.launches == 3


# ------------------------------------------------------------------------- Kernel launch path


@simt.kernel
def _copy(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i]


def test_configured_pairs_are_reused_and_the_target_is_followed(
    fake_gpu: FakeDriver,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(target, "_probe", (True, "Fake H200 (sm_90)", "sm_90"))
    monkeypatch.setattr(device_errors, "_pool", HostErrorPool())
    monkeypatch.delenv("FEARLESS_TARGET", raising=False)
    monkeypatch.setattr(config, "_target_override", None)
    monkeypatch.setattr(_copy, "_launchers", {})
    monkeypatch.setattr(_copy, "_last_launcher", None)
    monkeypatch.setattr(_copy, "_configured", {})
    assert _copy[4, 32] is _copy[4, 32]
    assert _copy[[4], 32] is not _copy[[4], 32]  # unhashable: built each time, still works
    assert _copy[4, 32, None] is not _copy[4, 32, None]  # a stream is never kept
    cuda = _copy._launcher()
    fake_gpu.plan = cuda.plan  # type: ignore[attr-defined]
    assert type(cuda).__name__ == "CudaLauncher" and _copy._launcher() is cuda
    a, c = _dev(0x10000, (128,)), _dev(0x20000, (128,))
    _copy[4, 32](a, c)
    assert len(fake_gpu.calls) == 1
    with pytest.raises(fl.BorrowError):
        _copy[4, 32](a, a)
    monkeypatch.setenv("FEARLESS_TARGET", "sim")
    assert type(_copy._launcher()).__name__ == "SimLauncher"
    monkeypatch.setenv("FEARLESS_TARGET", "cuda")
    assert _copy._launcher() is cuda
    monkeypatch.setattr(config, "_target_override", "sim")
    assert type(_copy._launcher()).__name__ == "SimLauncher"
    monkeypatch.setattr(config, "_target_override", None)
    monkeypatch.delenv("FEARLESS_TARGET")
    assert _copy._launcher() is cuda
    monkeypatch.setattr(target, "_probe", (False, "no GPU", None))
    assert type(_copy._launcher()).__name__ == "SimLauncher"
    monkeypatch.setenv("FEARLESS_TARGET", "cuda")
    with pytest.raises(fl.ToolchainError, match="cuda target is not usable"):
        _copy._launcher()
    with pytest.raises(fl.ToolchainError, match="cuda target is not usable"):
        _copy._launcher()  # a refusal is never remembered


def test_the_generated_launcher_reads_torch_tensors_on_the_process_gpu_only(
    fake_gpu: FakeDriver,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process on GPU 1 (runtime/process_gpu.py, fixed before the plan is made, as the first
    GPU call fixes it): its launcher takes cuda:1 tensors inline and refuses a cuda:0 one by
    name, before anything launches."""
    from fearless.runtime import process_gpu

    monkeypatch.setattr(process_gpu, "GPU", 1)
    monkeypatch.setattr(process_gpu, "_fixed", True)
    report_cuda(monkeypatch, 1)
    plan, pool = _plan(fake_gpu)
    assert "get_device() != 1" in plan.launcher_source
    a, b, c = torch.zeros(64), torch.ones(64), torch.zeros(64)
    plan.launch(1, 64, (a, b, c))
    plan.launch(1, 64, (a, b, c))
    assert len(fake_gpu.calls) == 2
    report_cuda(monkeypatch, 0)
    with pytest.raises(
        fl.DeviceError, match="argument `a` is on GPU 0, but fearless runs on GPU 1"
    ):
        plan.launch(1, 64, (torch.zeros(64), b, c))
    assert len(fake_gpu.calls) == 2 and pool.launches == 2
