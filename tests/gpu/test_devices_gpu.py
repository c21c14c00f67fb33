"""Device selection on the GPU (runtime/devices.py): tensors and launches on GPU 0 of the
process, an index the process does not have refused where it is given, and a second GPU
refused with the way to select it (CUDA_VISIBLE_DEVICES) where the machine has one."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import simt

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


@simt.kernel
def double(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = 2.0 * x[i]


def test_tensors_and_launches_are_on_gpu_0() -> None:
    assert fl.device_count() >= 1 and fl.current_device() == 0
    x = fl.asarray(np.arange(256, dtype=np.float32), device=0)
    out = fl.empty_like(x)
    assert x.device == out.device == 0
    double[1, 256](x, out)
    np.testing.assert_array_equal(out.numpy(), 2.0 * np.arange(256))


def test_a_gpu_the_process_does_not_have_is_refused() -> None:
    n = fl.device_count()
    with pytest.raises(fl.DeviceError, match=f"fl.empty was given device {n}, but this process "):
        fl.empty(16, device=n)


def test_a_second_gpu_is_refused_with_the_way_to_select_it() -> None:
    if fl.device_count() < 2:
        pytest.skip("one GPU visible")
    with pytest.raises(fl.DeviceError, match="runs kernels on GPU 0 of the process") as info:
        fl.zeros(16, device=1)
    assert "CUDA_VISIBLE_DEVICES=1" in (info.value.help or "")


def test_torch_tensors_on_gpu_0_are_device_0() -> None:
    torch = pytest.importorskip("torch")
    t = fl.asarray(torch.ones(8, device="cuda:0"))
    assert t.device == 0


def test_a_torch_tensor_on_a_second_gpu_is_refused_with_the_way_to_select_it() -> None:
    torch = pytest.importorskip("torch")
    if fl.device_count() < 2:
        pytest.skip("one GPU visible")
    with pytest.raises(fl.DeviceError, match="argument `obj` is on GPU 1") as info:
        fl.asarray(torch.ones(8, device="cuda:1"))
    assert "CUDA_VISIBLE_DEVICES=1" in (info.value.help or "")
