"""Devices (runtime/devices.py) on the simulator, which pretends to have FEARLESS_SIM_DEVICES of
them: every tensor records its device, the constructors take `device=`, a launch runs on the
one device of its arrays and refuses arrays on two (E0702, naming both, at the user's line),
and the operators of fearless.ops give their results on their operands' device. The cuda
branch of the checks runs here with the GPU count stood in: the first GPU asked for (by
`fl.set_device`, a `device=`, a launch's arrays, else torch's current device) becomes the
process's one GPU (runtime/process_gpu.py), and another is refused once it is in use.
tests/gpu/test_devices_gpu.py selects devices on the GPU machine."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops, simt, tile
from fearless.runtime import arrays, devices, process_gpu
from fearless.runtime.target import Target
from support.torch_on_gpu0 import report_cuda


@pytest.fixture(autouse=True)
def two_sim_devices(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("FEARLESS_SIM_DEVICES", "2")
    fl.set_target("sim")
    yield
    devices._current.device = 0
    fl.set_target(None)


@simt.kernel
def axpy(a: fl.f32, x: simt.Slice[fl.f32], y: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = a * x[i] + y[i]


@tile.kernel
def tile_add(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out) + tile.load_like(y, out))


def _refused(call: Callable[[], Any]) -> fl.DeviceError:
    """The E0702 `call` raises, checked to point at the line the lambda is on."""
    with pytest.raises(fl.DeviceError) as info:
        call()
    err = info.value
    assert err.code == "E0702"
    assert err.loc is not None and err.loc.file == __file__, str(err)
    assert err.loc.line == call.__code__.co_firstlineno, str(err)
    return err


def test_the_simulator_pretends_to_have_the_devices_it_is_told() -> None:
    assert fl.device_count() == 2


def test_sim_devices_must_be_a_positive_whole_number(monkeypatch: pytest.MonkeyPatch) -> None:
    """A malformed FEARLESS_SIM_DEVICES is a DeviceError at the user's line naming the
    variable (issue 33: it was a ValueError from inside fearless), wherever it is read."""
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("FEARLESS_SIM_DEVICES", bad)
        for call in (fl.device_count, lambda: fl.empty(4, device=1), lambda: fl.set_device(1)):
            with pytest.raises(
                fl.DeviceError,
                match=f"FEARLESS_SIM_DEVICES must be a positive whole number, not '{bad}'",
            ) as e:
                call()
            assert e.value.loc is not None and e.value.loc.file == __file__
            assert "FEARLESS_SIM_DEVICES=2" in (e.value.help or "")


def test_every_constructor_puts_its_tensor_on_the_device_asked() -> None:
    made = [
        fl.empty(4, device=1),
        fl.zeros((2, 3), device=1),
        fl.ones(4, fl.i32, device=1),
        fl.full(4, 2.5, device=1),
        fl.arange(8, device=1),
        fl.asarray(np.ones(4, np.float32), device=1),
        fl.asarray([1.0, 2.0], device=1),
    ]
    assert [t.device for t in made] == [1] * len(made)
    assert fl.empty(4).device == 0
    assert "device=1" in repr(made[3]) and "device" not in repr(fl.full(4, 2.5))


def test_like_constructors_keep_their_models_device() -> None:
    x = fl.full((2, 2), 3.0, device=1)
    for made in (fl.empty_like(x), fl.zeros_like(x), fl.ones_like(x), fl.full_like(x, 1.0)):
        assert made.device == 1 and made.shape == (2, 2)
    assert fl.zeros_like(x, device=0).device == 0
    assert fl.zeros_like(np.ones(3), device=1).device == 1
    assert x.astype(fl.f64).device == 1


def test_asarray_copies_an_fl_tensor_to_another_device() -> None:
    x = fl.asarray(np.arange(4, dtype=np.float32), device=1)
    assert fl.asarray(x) is x
    y = fl.asarray(x, device=0)
    assert y is not x and y.device == 0
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    y.numpy()[0] = 9.0  # a copy: the device-1 tensor keeps its value
    assert x.numpy()[0] == 0.0


def test_set_device_is_the_default_of_new_tensors() -> None:
    fl.set_device(1)
    assert fl.current_device() == 1
    assert fl.empty(3).device == 1 and fl.asarray(np.ones(2)).device == 1
    fl.set_device(0)
    assert fl.empty(3).device == 0


def test_a_device_that_does_not_exist_is_refused_at_the_callers_line() -> None:
    err = _refused(lambda: fl.empty(4, device=2))
    assert "fl.empty was given device 2, but the simulator pretends to have 2 devices" in str(err)
    assert "FEARLESS_SIM_DEVICES" in (err.help or "")
    err = _refused(lambda: fl.zeros(4, device="1"))  # type: ignore[arg-type]
    assert "`device=` of fl.zeros is a device index (an int), not '1'" in str(err)
    _refused(lambda: fl.set_device(True))  # type: ignore[arg-type]
    _refused(lambda: fl.set_device(-1))


def test_a_simt_launch_runs_on_the_device_of_its_arrays() -> None:
    x = fl.asarray(np.arange(64, dtype=np.float32), device=1)
    y, out = fl.ones(64, device=1), fl.empty(64, device=1)
    axpy[1, 64](2.0, x, y, out)
    np.testing.assert_array_equal(out.numpy(), 2.0 * np.arange(64) + 1.0)
    host = np.ones(64, np.float32)  # host memory has no device: it follows the launch
    axpy[1, 64](2.0, x, host, out)
    np.testing.assert_array_equal(out.numpy(), 2.0 * np.arange(64) + 1.0)


def test_a_simt_launch_refuses_arrays_on_two_devices() -> None:
    x, y = fl.ones(64, device=1), fl.ones(64, device=0)
    out = fl.zeros(64, device=1)
    err = _refused(lambda: axpy[1, 64](2.0, x, y, out))
    assert "the arrays of one launch are on two devices: `x` is on device 1, `y` on device 0" in (
        str(err)
    )
    assert "fl.asarray(y, device=1)" in (err.help or "")
    np.testing.assert_array_equal(out.numpy(), 0.0)  # nothing ran


def test_a_tile_launch_refuses_arrays_on_two_devices() -> None:
    x, y = fl.ones(256, device=0), fl.ones(256, device=0)
    out = fl.zeros(256, device=1)
    part = out.partition((128,))
    err = _refused(lambda: tile_add(part, x, y))
    assert "`out` is on device 1, `x` on device 0" in str(err)
    assert part.unpartition() is out
    np.testing.assert_array_equal(out.numpy(), 0.0)
    y1, x1 = fl.ones(256, device=1), fl.full(256, 2.0, device=1)
    part = out.partition((128,))
    tile_add(part, x1, y1)
    np.testing.assert_array_equal(part.unpartition().numpy(), 3.0)


def test_operators_give_results_on_their_operands_device() -> None:
    x = fl.asarray(np.linspace(-2, 2, 300, dtype=np.float32), device=1)
    y = ops.relu(x)
    assert isinstance(y, fl.Tensor) and y.device == 1
    np.testing.assert_array_equal(y.numpy(), np.maximum(x.numpy(), 0))
    rows = fl.asarray(np.random.default_rng(0).standard_normal((8, 64), np.float32), device=1)
    s = ops.softmax(rows)
    assert s.device == 1
    np.testing.assert_allclose(s.numpy().sum(axis=1), 1.0, rtol=1e-5)


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cuda branch of `devices.resolve` and `describe`, with the target and the GPU count
    stood in, and the process's GPU (runtime/process_gpu.py) not yet chosen."""
    monkeypatch.setattr(devices, "current_target", lambda: Target.CUDA)
    monkeypatch.setattr(devices, "_gpu_count", lambda: 2)
    monkeypatch.setattr(process_gpu, "GPU", 0)
    monkeypatch.setattr(process_gpu, "_chosen", False)
    monkeypatch.setattr(process_gpu, "_fixed", False)
    monkeypatch.setattr(process_gpu, "_on_choice", [])
    monkeypatch.setattr(process_gpu, "_torch_current_device", lambda: 0)


@pytest.mark.usefixtures("two_gpus")
def test_on_cuda_the_first_gpu_asked_for_becomes_the_process_gpu() -> None:
    told: list[int] = []
    process_gpu.on_choice(told.append)  # as claunch.py's default-stream lookup is
    assert devices.current_device() == 0 and told == [0]
    assert devices.resolve(1, "fl.empty") == 1
    assert process_gpu.GPU == devices.current_device() == 1 and told == [0, 1]
    assert process_gpu.fix() == 1  # the first GPU call: from now on the only one
    assert devices.resolve(1, "fl.zeros") == 1 and devices.resolve(None, "fl.zeros") == 1
    err = _refused(lambda: devices.resolve(0, "fl.empty"))
    assert "fl.empty was given GPU 0, but fearless runs on GPU 1 in this process" in str(err)
    assert "fl.set_device(0)" in (err.help or "") and "torch.cuda.set_device(0)" in (err.help or "")
    err = _refused(lambda: devices.resolve(2, "fl.empty"))
    assert "but this process sees 2 devices" in str(err)
    assert devices.device_count() == 2 and told == [0, 1]


@pytest.mark.usefixtures("two_gpus")
def test_set_device_chooses_the_gpu_until_the_first_gpu_call() -> None:
    fl.set_device(1)
    fl.set_device(0)  # nothing has used the GPU yet: the last choice holds
    assert process_gpu.fix() == 0
    fl.set_device(0)
    err = _refused(lambda: fl.set_device(1))
    assert "fl.set_device was given GPU 1, but fearless runs on GPU 0" in str(err)


def test_with_no_choice_the_first_gpu_call_takes_torchs_current_device(
    two_gpus: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A torchrun rank calls torch.cuda.set_device(local_rank) and nothing of fearless's."""
    monkeypatch.setattr(process_gpu, "_torch_current_device", lambda: 1)
    assert devices.current_device() == 1  # what the first GPU call will take
    assert process_gpu.GPU == 0  # not chosen yet
    assert process_gpu.fix() == 1 and process_gpu.GPU == devices.current_device() == 1


def test_a_launchs_arrays_choose_the_gpu_and_then_must_be_on_it(
    two_gpus: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first launch's torch tensors on cuda:1 make GPU 1 the process's GPU at once (so a
    script that puts its data on cuda:1 runs there, and a second array of that launch on
    cuda:0 is refused, never launched beside it): cuda:0 is then refused by name."""
    torch = pytest.importorskip("torch")
    report_cuda(monkeypatch, 1)
    x = torch.ones(8)
    info = arrays.describe(x, Target.CUDA, name="x")
    assert info.on_device and process_gpu.GPU == 1 and process_gpu.is_fixed()
    assert process_gpu.fix() == 1  # the first GPU call keeps what the array fixed
    arrays.describe(x, Target.CUDA, name="x")
    report_cuda(monkeypatch, 0)
    with pytest.raises(fl.DeviceError, match="argument `y` is on GPU 0, but fearless runs on "
                       "GPU 1 in this process") as caught:  # fmt: skip
        arrays.describe(torch.ones(8), Target.CUDA, name="y")
    assert caught.value.code == "E0702"
    assert "move the data to cuda:1" in (caught.value.help or "")


def test_a_warm_launch_with_arrays_on_two_devices_is_refused_too() -> None:
    """A Tile launch with the same shapes and dtypes as an earlier one takes the warm path
    (tile/dispatch.py), whose key holds each fl.Tensor's device: a mix meets the slow path."""
    for _ in range(2):  # the second launch is warm
        out = fl.zeros(256, device=1)
        part = out.partition((128,))
        tile_add(part, fl.ones(256, device=1), fl.ones(256, device=1))
        np.testing.assert_array_equal(part.unpartition().numpy(), 2.0)
    x0, y1, out = fl.ones(256, device=0), fl.ones(256, device=1), fl.zeros(256, device=1)
    part = out.partition((128,))
    err = _refused(lambda: tile_add(part, x0, y1))
    assert "`out` is on device 1, `x` on device 0" in str(err)
    part.unpartition()
    prep = axpy.prepare(1, 64)
    axpy(prep, 1.0, fl.ones(64, device=1), fl.ones(64, device=1), fl.empty(64, device=1))
    _refused(lambda: axpy(prep, 1.0, fl.ones(64, device=1), x0, fl.empty(64, device=1)))


def test_a_stream_belongs_to_a_device_and_launches_on_its_arrays_device_only() -> None:
    s1 = fl.Stream(device=1)
    assert s1.device == 1 and fl.Stream().device == 0 and "device=1" in repr(s1)
    x, out = fl.ones(64, device=1), fl.empty(64, device=1)
    axpy[1, 64, s1](3.0, x, x, out)
    np.testing.assert_array_equal(out.numpy(), 4.0)
    s0 = fl.Stream()
    err = _refused(lambda: axpy[1, 64, s0](3.0, x, x, out))
    assert "the launch's arrays are on device 1, but its stream is device 0's" in str(err)
    assert "fl.Stream(device=1)" in (err.help or "")
    part = fl.zeros(256, device=1).partition((128,))
    y = fl.ones(256, device=1)
    _refused(lambda: tile_add(part, y, y, stream=s0))
    tile_add(part, y, y, stream=s1)
    np.testing.assert_array_equal(part.unpartition().numpy(), 2.0)
    _refused(lambda: fl.Stream(device=2))
