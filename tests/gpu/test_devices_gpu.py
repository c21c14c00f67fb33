"""Device selection on the GPU (runtime/devices.py, runtime/process_gpu.py): tensors and
launches on the process's GPU, an index the process does not have refused where it is given,
a fresh process choosing its GPU by `fl.set_device` or by torch's current device (as a torchrun
rank does), and a second GPU refused once the first is in use, where the machine has two."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def test_a_second_gpu_is_refused_once_the_first_is_in_use() -> None:
    if fl.device_count() < 2:
        pytest.skip("one GPU visible")
    fl.zeros(16)  # the GPU is in use
    with pytest.raises(fl.DeviceError, match="runs on GPU 0 in this process") as info:
        fl.zeros(16, device=1)
    assert "fl.set_device(1)" in (info.value.help or "")


_CHOOSE = """
import sys
import numpy as np
import fearless as fl
from fearless import simt
from fearless.runtime import process_gpu

@simt.kernel
def double(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = 2.0 * x[i]

how, index = sys.argv[1], int(sys.argv[2])
if how == "fearless":
    fl.set_device(index)
elif how == "torch":
    import torch
    torch.cuda.set_device(index)  # a torchrun rank's first line
    torch.ones(1, device="cuda")  # torch has initialised CUDA
x = fl.asarray(np.arange(256, dtype=np.float32))
out = fl.empty_like(x)
double[1, 256](x, out)
assert np.array_equal(out.numpy(), 2.0 * np.arange(256)), "wrong result"
print(process_gpu.GPU, x.device, out.device, fl.current_device())
"""


@pytest.mark.parametrize("how", ["fearless", "torch"])
def test_a_fresh_process_runs_on_the_gpu_it_chose(how: str, tmp_path: Path) -> None:
    """On every visible GPU: `fl.set_device(i)`, or torch's current device, before the first
    GPU call makes GPU i the process's, and a launch there gives the right result. (The
    script is a file: a kernel compiles from its source, which `python -c` does not keep.)"""
    if how == "torch":
        pytest.importorskip("torch")
    script = tmp_path / "choose.py"
    script.write_text(_CHOOSE)
    for index in range(min(fl.device_count(), 2)):
        done = subprocess.run(
            [sys.executable, str(script), how, str(index)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "FEARLESS_TARGET": "cuda"},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.split() == [str(index)] * 4


def test_torch_tensors_on_gpu_0_are_device_0() -> None:
    torch = pytest.importorskip("torch")
    t = fl.asarray(torch.ones(8, device="cuda:0"))
    assert t.device == 0


def test_a_torch_tensor_on_a_second_gpu_is_refused_once_the_first_is_in_use() -> None:
    torch = pytest.importorskip("torch")
    if fl.device_count() < 2:
        pytest.skip("one GPU visible")
    fl.zeros(16)  # the GPU is in use
    with pytest.raises(fl.DeviceError, match="argument `obj` is on GPU 1") as info:
        fl.asarray(torch.ones(8, device="cuda:1"))
    assert "move the data to cuda:0" in (info.value.help or "")
