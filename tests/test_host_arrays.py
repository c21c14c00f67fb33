"""NumPy arrays on the cuda target (runtime/host_arrays.py), `Tensor.astype` on the GPU, and
the generated launcher's `requires=` check with fl.Tensor arguments, on a fake GPU whose
"device memory" is host memory (tests/support/fake_memory.py): the recording drivers of
tests/support/fake_driver.py and fake_tile_driver.py plus cuMemAlloc/cuMemcpy/cuMemset/
cuCtxSynchronize. A "kernel" runs
inside cuLaunchKernel as a NumPy function of the packed pointers, so the copies in and out
are checked end to end."""

from __future__ import annotations

import ctypes
import gc
import struct
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config, simt, tile
from fearless.abi import ParamSpec, Requirement
from fearless.runtime import device_errors, driver, host_arrays, launch, target
from support.fake_driver import FAKE_H200, HostErrorPool, _kernel, _write_record
from support.fake_memory import SimtGpu, install_tile_gpu


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimtGpu]:
    fake = SimtGpu()
    monkeypatch.setattr(driver, "_info", FAKE_H200)
    monkeypatch.setattr(driver, "_cu", fake)
    monkeypatch.setattr(device_errors, "_pool", HostErrorPool())
    monkeypatch.setattr(config, "_target_override", "cuda")
    monkeypatch.setattr(target, "_probe", (True, "Fake H200 (sm_90)", "sm_90"))
    monkeypatch.delenv("FEARLESS_SYNC", raising=False)
    monkeypatch.setattr(host_arrays, "_warned", type(host_arrays._warned)())
    monkeypatch.setattr(driver, "load_kernel", lambda ck: driver.LoadedKernel(
        ck.name, ck.entry, "CUfunction", 1, None, 512, 64, "ptx"))  # fmt: skip
    yield fake
    gc.collect()  # device allocations are freed while the fake is still the driver


def _plan(fake: SimtGpu, **contract: Any) -> launch.GpuLaunchPlan:
    plan = launch.GpuLaunchPlan(_kernel(**contract), pool=HostErrorPool())
    fake.plan = plan
    return plan


def _vecadd(packed: bytes) -> None:
    """c = a + b over the packed (pointer, length) of a, b, c."""
    pa, na, pb, nb, pc, nc = struct.unpack_from("<QqQqQq", packed)
    a, b, c = (
        np.ctypeslib.as_array((ctypes.c_float * n).from_address(p))
        for p, n in ((pa, na), (pb, nb), (pc, nc))
    )
    c[:] = a[:nc] + b[:nc]


# ------------------------------------------------------------------ SIMT: NumPy on "cuda"


def test_numpy_arrays_are_copied_in_and_outputs_back(gpu: SimtGpu) -> None:
    plan = _plan(gpu)
    gpu.run = _vecadd
    a = np.arange(100, dtype=np.float32)
    b = np.full(100, 0.5, np.float32)
    c = np.zeros(100, np.float32)
    with pytest.warns(fl.HostCopyWarning) as caught:
        plan.launch(1, 128, (a, b, c))
    np.testing.assert_array_equal(c, a + 0.5)
    message = str(caught[0].message)
    assert "`vecadd` was given NumPy arrays" in message
    assert "1,200 bytes (1.2 KiB) to the GPU and 400 bytes back" in message
    assert caught[0].filename == __file__  # at the user's line
    assert gpu.copies == [("in", 400), ("in", 400), ("in", 400), ("out", 400)]
    assert gpu.syncs == 1  # the copy back waits for the kernel (and its device errors)
    b[:] = 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one warning per kernel
        plan.launch(1, 128, (a, b, c))
    np.testing.assert_array_equal(c, a + 2.0)


def test_a_numpy_view_of_a_torch_tensor_copied_back_has_its_version_bumped(
    gpu: SimtGpu,
) -> None:
    """The copy back writes torch's memory behind autograd's back, as the kernel would."""
    torch = pytest.importorskip("torch")
    plan = _plan(gpu)
    gpu.run = _vecadd
    c = torch.zeros(64)
    with pytest.warns(fl.HostCopyWarning):
        plan.launch(1, 64, (np.ones(64, np.float32), np.ones(64, np.float32), c.numpy()))
    assert c.tolist() == [2.0] * 64 and c._version == 1


def test_numpy_mixed_with_device_arrays_and_inputs_are_not_copied_back(gpu: SimtGpu) -> None:
    plan = _plan(gpu)
    gpu.run = _vecadd
    a = fl.arange(0, 64, dtype=fl.f32)  # a GPU tensor on the fake: its memory is host memory
    b = np.ones(64, np.float32)
    c = fl.zeros(64)
    gpu.copies.clear()
    with pytest.warns(fl.HostCopyWarning, match="no output to copy back"):
        plan.launch(1, 64, (a, b, c))
    assert gpu.copies == [("in", 256)]  # only `b`
    np.testing.assert_array_equal(c.numpy(), np.arange(64) + 1)


def test_numpy_arrays_the_simulator_refuses_are_refused_before_any_copy(gpu: SimtGpu) -> None:
    plan = _plan(gpu)
    ok = np.zeros(8, np.float32)
    cases = [
        ((ok, np.zeros(8), ok), "`b` has element type f64, but `vecadd` expects f32"),
        ((ok, np.zeros(16, np.float32)[::2], ok), "`b` is not contiguous"),
        ((ok, ok.copy(), np.zeros((2, 4), np.float32)), "`c` has 2 dimensions"),
    ]
    readonly = np.zeros(8, np.float32)
    readonly.flags.writeable = False
    cases.append(((ok, ok.copy(), readonly), "`c` is a read-only array but the kernel writes"))
    for args, message in cases:
        with pytest.raises(fl.KernelTypeError, match=message) as err:
            plan.launch(1, 8, args)
        assert err.value.loc is not None and err.value.loc.file == __file__
    with pytest.raises(fl.KernelTypeError, match="`a` of type `list` is not an array"):
        plan.launch(1, 8, ([1.0] * 8, ok, ok.copy()))
    assert not gpu.copies and not gpu.calls


def test_a_failed_kernel_raises_and_its_output_is_not_copied_back(gpu: SimtGpu) -> None:
    pool = device_errors._pool
    assert pool is not None
    plan = launch.GpuLaunchPlan(_kernel(), pool=pool)  # the pool fl.synchronize() checks
    gpu.plan = plan

    def out_of_bounds(packed: bytes) -> None:
        _vecadd(packed)
        _write_record(pool._record_address(plan.slot), [1, 0, 0, 0, 0, 0, 0, 0, 9, 8])

    gpu.run = out_of_bounds
    c = np.full(8, -1.0, np.float32)
    with pytest.warns(fl.HostCopyWarning), pytest.raises(fl.KernelIndexError):
        plan.launch(1, 8, (np.ones(8, np.float32), np.ones(8, np.float32), c))
    assert (c == -1.0).all() and not [d for d, _ in gpu.copies if d == "out"]


def test_numpy_outputs_still_get_the_borrow_check(gpu: SimtGpu) -> None:
    plan = _plan(gpu)
    a = np.zeros(8, np.float32)
    with pytest.raises(fl.BorrowError):
        plan.launch(1, 8, (a, np.zeros(8, np.float32), a))
    assert not gpu.calls


def test_numpy_on_cuda_through_a_simt_kernel(gpu: SimtGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    @simt.kernel
    def scale(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = x[i] * 2.0

    def run(packed: bytes) -> None:
        px, nx, po, no = struct.unpack_from("<QqQq", packed)
        x = np.ctypeslib.as_array((ctypes.c_float * nx).from_address(px))
        np.ctypeslib.as_array((ctypes.c_float * no).from_address(po))[:] = x * 2

    gpu.run = run
    real_init = launch.GpuLaunchPlan.__init__

    def init(plan: launch.GpuLaunchPlan, *args: Any, **kwargs: Any) -> None:
        real_init(plan, *args, **kwargs)
        gpu.plan = plan  # the recording driver reads this plan's parameter buffer

    monkeypatch.setattr(launch.GpuLaunchPlan, "__init__", init)
    x, out = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    with pytest.warns(fl.HostCopyWarning):
        scale[1, 32](x, out)
    np.testing.assert_array_equal(out, x * 2)


# ------------------------------------------------------------------ requires= with fl.Tensor


def test_requires_is_checked_for_fl_tensor_arguments(gpu: SimtGpu) -> None:
    req = Requirement("len(a) == len(c)", "(__len_0) == (__len_2)", ("a", "==", "c"))
    plan = _plan(gpu, requires=(req,))
    a, b = fl.zeros(32), fl.zeros(32)
    plan.launch(1, 32, (a, b, fl.zeros(32)))
    assert len(gpu.calls) == 1
    with pytest.raises(fl.LaunchContractError, match=r"len\(a\) == len\(c\)") as err:
        plan.launch(1, 32, (a, b, fl.zeros(31)))
    assert err.value.loc is not None and err.value.loc.file == __file__
    with pytest.raises(fl.LaunchContractError):
        plan.launch(1, 32, (fl.zeros(33), b, fl.zeros(32)))
    assert len(gpu.calls) == 1  # neither refused launch ran


def test_requires_on_scalars_with_fl_tensor_arguments(gpu: SimtGpu) -> None:
    params = (ParamSpec("c", "disjoint", fl.f32), ParamSpec("n", "scalar", fl.i32))
    req = Requirement("n <= len(c)", "(int(__arg_1)) <= (__len_0)", ("n", "<=", "c"))
    plan = launch.GpuLaunchPlan(_kernel("fill", params, requires=(req,)), pool=HostErrorPool())
    gpu.plan = plan
    c = fl.zeros(16)
    plan.launch(1, 16, (c, 16))
    with pytest.raises(fl.LaunchContractError, match=r"n <= len\(c\)"):
        plan.launch(1, 16, (c, 17))
    assert len(gpu.calls) == 1


# ------------------------------------------------------------------ astype and friends on "cuda"


def test_astype_and_constructors_on_the_gpu(gpu: SimtGpu) -> None:
    t = fl.asarray(np.array([1.5, -2.5, 3.0], np.float32))
    assert t.target == "cuda"
    i = t.astype(fl.i32)
    assert i.target == "cuda" and i.dtype is fl.i32 and i.data_ptr != t.data_ptr
    np.testing.assert_array_equal(i.numpy(), [1, -2, 3])
    h = t.astype("bf16").astype(fl.f32)
    np.testing.assert_array_equal(h.numpy(), [1.5, -2.5, 3.0])
    same = t.astype(fl.f32)
    assert same.data_ptr != t.data_ptr  # always a copy, as NumPy's astype
    np.testing.assert_array_equal(fl.ones(4).numpy(), np.ones(4, np.float32))
    z = fl.zeros_like(t)
    assert z.target == "cuda" and z.shape == (3,) and not z.numpy().any()


# ------------------------------------------------------------------ Tile: NumPy inputs on "cuda"


@tile.kernel
def _tile_copy(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out))


def test_numpy_inputs_of_a_tile_kernel_are_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install_tile_gpu(monkeypatch.setattr)
    monkeypatch.setattr(host_arrays, "_warned", type(host_arrays._warned)())
    fake.sizes = [8, 4, 8, 4]  # out: ptr, extent; x: ptr, extent
    x = np.arange(8, dtype=np.float32)
    out = fl.zeros(8)
    part = out.partition((8,))
    with pytest.warns(fl.HostCopyWarning, match="32 bytes to the GPU"):
        _tile_copy(part, x)
    np.testing.assert_array_equal(fake.seen[-1], x)
    assert fake.syncs == 1 and fake.copies[-1] == ("in", 32)
    x[:] = 7.0  # not cached: every launch copies the array as it is now
    _tile_copy(part, x)
    np.testing.assert_array_equal(fake.seen[-1], x)
    with pytest.raises(fl.KernelTypeError, match="`x` has element type f64"):
        _tile_copy(part, np.zeros(8))
    assert len(fake.calls) == 2
    del out, part
    gc.collect()


def test_a_block_goes_back_through_the_driver_that_allocated_it(
    gpu: SimtGpu, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block collected after the driver was swapped (each test's fake GPU) is freed by the
    fake that allocated it: freed through the next one, it would pop whatever block of that
    one has the same address (a worker's heap corrupted, 2026-12-07)."""
    block = driver.DeviceAllocation(64)
    ptr = block.ptr
    other = SimtGpu()
    monkeypatch.setattr(driver, "_cu", other)
    other.blocks[ptr] = "another test's live block at the same address"
    del block
    gc.collect()
    assert ptr not in gpu.blocks and ptr in other.blocks
