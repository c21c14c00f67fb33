"""Which device a tensor lives on, and the one device a launch runs on.

Every fl.Tensor records its device index (`Tensor.device`): the GPU's on "cuda", a pretend
device on "sim", where `FEARLESS_SIM_DEVICES=N` gives N of them so that the CPU tests cover
multi-device dispatch. `fl.empty(..., device=i)` and the other constructors take the index
(default: `fl.current_device()`, which `fl.set_device(i)` sets for the calling thread, as
`torch.cuda.set_device` does: 0 on a thread that has not set it); the `*_like`
constructors keep their model's device. A launch runs on the device of its arrays, which must
agree: arrays on two devices in one launch are refused (E0702), naming both arguments. Host
arrays (NumPy) have no device: they follow the launch (its `fl.Stream`'s device where it has
only host arrays).

On "cuda" a process runs on one GPU (process_gpu.py): the one `fl.set_device(i)` or a
`device=i` chose before the first GPU call, or the GPU of the first launch's arrays, else
torch's current device (`torch.cuda.set_device(local_rank)` in a torchrun job), else 0. Once
fearless has used it, another index is refused (E0702) with what to do. So every rank of a
torchrun job runs on its own GPU, with nothing set for fearless; the compile cache is per arch,
shared by the devices, and the borrow check and error records are per process, hence per
device.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Sequence
from typing import Any

from .. import config
from ..errors import DeviceError
from . import process_gpu
from .location import read_setting, user_location
from .target import current_target


class _Current(threading.local):
    """The simulator's current device, per thread (`fl.set_device`, as `torch.cuda.set_device`
    is): a thread that has not set one has the process default, 0."""

    device = 0


_current = _Current()  # read only through `_thread_device`


def device_count() -> int:
    """The devices of the current target: the visible GPUs on "cuda", `FEARLESS_SIM_DEVICES`
    (default 1) on the simulator."""
    if current_target().simulated:
        return _sim_devices()
    return _gpu_count()


def current_device() -> int:
    """The device new tensors go to when no `device=` is given: on "cuda" the process's GPU
    (or the one its first GPU call will take), on the simulator `fl.set_device`'s (0 at start)."""
    if current_target().simulated:
        return _thread_device()
    return process_gpu.current()


def _thread_device() -> int:
    """The calling thread's `fl.set_device` (the process default, 0, where it has not called it)."""
    return _current.device


def set_device(device: int) -> None:
    """Make `device` the default of `fl.empty` and the other constructors on the calling
    thread, as `torch.cuda.set_device` does for torch's (another thread keeps its own, 0 until it
    sets one). On "cuda", before fearless's first GPU call, it chooses the process's GPU (one per
    process: runtime/process_gpu.py); after, only that GPU is accepted."""
    _current.device = resolve(device, "fl.set_device")


def resolve(device: Any, what: str) -> int:
    """`device` (an index, or None for the current device) checked against this target's
    devices, for `what` (the function that was given it)."""
    if device is None:
        return current_device()  # checked when it was set
    if type(device) is int and device == process_gpu.GPU and process_gpu.is_fixed():
        return device  # the GPU in use: no driver call
    if type(device) is not int:
        device = _index(device, what)
    sim = current_target().simulated
    # a usable target has a device 0: only another index needs the count
    count = 1 if device == 0 else _sim_devices() if sim else _gpu_count()
    if not 0 <= device < count:
        where = "the simulator pretends to have" if sim else "this process sees"
        raise DeviceError(
            f"{what} was given device {device}, but {where} {count} "
            f"device{'s' if count != 1 else ''}",
            user_location(),
            help=(
                "set FEARLESS_SIM_DEVICES=N for N pretend devices"
                if sim
                else "`fl.device_count()` says how many GPUs are visible (CUDA_VISIBLE_DEVICES)"
            ),
        )
    if not sim and not process_gpu.choose(device):
        raise gpu_taken_error(f"{what} was given GPU {device}", device)
    return device


def _index(device: Any, what: str) -> int:
    """`device` as a plain int: any integer (an int subclass, `np.int64(1)`, anything with
    `__index__`) but a bool; else E0702 naming `what`."""
    if not isinstance(device, bool):
        try:
            return int(operator.index(device))
        except TypeError:
            pass
    raise DeviceError(
        f"`device=` of {what} is a device index (an int), not {device!r}",
        user_location(),
        help="pass e.g. `device=0`; `fl.device_count()` says how many there are",
    )


def launch_device(names: Sequence[str], devices: Sequence[int | None]) -> int:
    """The one device of a launch whose array arguments `names` are on `devices` (None: host
    memory, which follows), or E0702 naming two arguments on different devices."""
    first: tuple[str, int] | None = None
    for name, dev in zip(names, devices, strict=True):
        if dev is None:
            continue
        if first is None:
            first = (name, dev)
        elif dev != first[1]:
            raise DeviceError(
                f"the arrays of one launch are on two devices: `{first[0]}` is on device "
                f"{first[1]}, `{name}` on device {dev}",
                user_location(),
                help="a launch runs on one device: make them there "
                f"(`fl.empty(..., device={first[1]})`) or copy one "
                f"(`fl.asarray({name}, device={first[1]})`)",
            )
    return current_device() if first is None else first[1]


def gpu_taken_error(what: str, device: int) -> DeviceError:
    """E0702 for GPU `device` asked for (`what`) after fearless started on another."""
    return DeviceError(
        f"{what}, but fearless runs on GPU {process_gpu.GPU} in this process: one GPU per process "
        "so far, and it was chosen by the first GPU call",
        user_location(),
        help=f"choose the GPU before fearless's first GPU call (`fl.set_device({device})`, or "
        f"`torch.cuda.set_device({device})` as a torchrun rank does with its LOCAL_RANK), or "
        f"move the data to cuda:{process_gpu.GPU}",
    )


def _sim_devices() -> int:
    """`config.sim_devices()`, with a malformed FEARLESS_SIM_DEVICES a DeviceError at the
    user's line (not a ValueError from inside fearless)."""
    return read_setting(
        config.sim_devices,
        DeviceError,
        "set FEARLESS_SIM_DEVICES to the number of devices the simulator should pretend to "
        "have (e.g. FEARLESS_SIM_DEVICES=2), or unset it for one",
    )


def _gpu_count() -> int:
    from cuda.bindings import driver

    err, count = driver.cuDeviceGetCount()
    return 0 if err else int(count)
