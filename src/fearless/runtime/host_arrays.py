"""NumPy arrays on the cuda target: copied to the GPU for one launch, outputs copied back.

numba's behaviour, so that one script runs on the simulator and on the GPU: a launch on
"cuda" given NumPy arrays copies each one into fresh device memory, launches, waits for the
kernel, and copies every output (a DisjointSlice or AtomicSlice, `ParamSpec.is_output`) back
into the caller's array. Inputs are not copied back. Each kernel warns once, with a
`HostCopyWarning` at the user's line that names the bytes copied: fl.Tensor arguments stay
on the GPU and cost nothing.

This is the slow path only: the warm launchers (runtime/launch.py, tile/kernel.py) reach it
when an argument is not device memory, so a launch with device arrays pays nothing for it.
An array the simulator would refuse (not contiguous, of another rank or element type, a
read-only output), any other argument the GPU launch would refuse, and an output sharing memory
with another argument (the borrow check, on the caller's arrays) are refused here with the
usual message, before anything is copied.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..abi import ParamSpec
from ..errors import HostCopyWarning
from . import device_errors, driver
from .arrays import ArrayInfo, bump_versions, describe, nbytes_text, torch_written
from .binder import dtype_error, readonly_error
from .borrow import check_borrows
from .location import warn_at_user
from .target import Target
from .tensor import Tensor

# The kernels (launch plans, Tile kernels) that warned already: once each.
_warned: weakref.WeakSet[Any] = weakref.WeakSet()


@dataclass(frozen=True, slots=True)
class Staging:
    """One launch's NumPy arguments, copied to the GPU: `args` is what the launch takes, and
    `back` the (caller's array, device tensor) pairs to copy back after it."""

    args: tuple[Any, ...]
    back: tuple[tuple[np.ndarray, Tensor], ...]
    bytes_in: int
    bytes_out: int


def stage(
    kernel: str, params: Sequence[ParamSpec | None], args: Sequence[Any], owner: Any
) -> Staging | None:
    """Copy the NumPy arrays among `args` to the GPU (None: there are none).

    `params` holds, per argument, the array parameter it binds (None: not an array; a spec
    of ndim 0 takes an array of any rank, as a Tile `tile.Tensor` does). `owner` is the
    object whose one warning this launch may give (a launch plan, a Tile kernel).
    """
    if len(params) != len(args):
        return None
    hosts = [
        i for i, (p, a) in enumerate(zip(params, args, strict=True))
        if p is not None and isinstance(a, np.ndarray)
    ]  # fmt: skip
    if not hosts:
        return None
    _check_all(kernel, params, args)  # every refusal before any copy
    staged = list(args)
    back: list[tuple[np.ndarray, Tensor]] = []
    bytes_in = 0
    for i in hosts:
        host: np.ndarray = args[i]
        spec = params[i]
        assert spec is not None
        t = _to_device(host, spec)
        staged[i] = t
        bytes_in += host.nbytes
        if spec.is_output:
            back.append((host, t))
    staging = Staging(tuple(staged), tuple(back), bytes_in, sum(h.nbytes for h, _ in back))
    if owner not in _warned:
        _warned.add(owner)
        _warn(kernel, staging)
    return staging


def finish(staging: Staging) -> None:
    """After the launch: wait for it (raising its device errors) and copy the outputs back
    (a NumPy view of a torch tensor, `t.numpy()`: its version bumped, as the launch's own
    writes to torch's memory are)."""
    device_errors.synchronize()
    for host, t in staging.back:
        driver.copy_device_to_host(host, t._ptr)
    written = [w for host, _ in staging.back if (w := torch_written(host)) is not None]
    if written:
        bump_versions(written)


def _check_all(kernel: str, params: Sequence[ParamSpec | None], args: Sequence[Any]) -> None:
    """Refuse, in parameter order, what the launch would refuse: a host array as the simulator
    does, any other array as the GPU launch does; then the borrow check on the caller's own
    arrays (two copies of one NumPy array would not overlap on the GPU)."""
    specs: list[ParamSpec] = []
    infos: list[ArrayInfo] = []
    for spec, arg in zip(params, args, strict=True):
        if spec is None or arg is None:  # None: an absent optional array, or the track's error
            continue
        on_host = isinstance(arg, np.ndarray)
        info = describe(arg, Target.SIM if on_host else Target.CUDA, name=spec.name,
                        ndim=spec.ndim or None)  # fmt: skip
        if info.dtype != spec.dtype:
            raise dtype_error(kernel, spec.name, info.dtype.name, spec.dtype)
        if on_host and spec.is_output and not arg.flags.writeable:
            raise readonly_error(spec.name)
        specs.append(spec)
        infos.append(info)
    check_borrows(specs, infos)


def _to_device(host: np.ndarray, spec: ParamSpec) -> Tensor:
    alloc = driver.DeviceAllocation(host.nbytes)
    t = Tensor._make(alloc.ptr, tuple(host.shape), spec.dtype, on_device=True, owner=alloc)
    driver.copy_host_to_device(t._ptr, host)
    return t


def _warn(kernel: str, staging: Staging) -> None:
    back = (
        f" and {nbytes_text(staging.bytes_out)} back"
        if staging.bytes_out
        else " (no output to copy back)"
    )
    message = (
        f"`{kernel}` was given NumPy arrays on the cuda target: each such launch copies "
        f"{nbytes_text(staging.bytes_in)} to the GPU{back}, and waits for the kernel; "
        "keep the data on the GPU with `x = fl.asarray(array)` (read it with `x.numpy()`)"
    )
    warn_at_user(message, HostCopyWarning)
