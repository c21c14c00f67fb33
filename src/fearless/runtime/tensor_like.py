"""The `*_like` constructors: `fl.empty_like`, `fl.zeros_like`, `fl.ones_like`, `fl.full_like`,
a tensor of another array's shape and dtype (made by tensor.py's), on an fl.Tensor model's
device unless `device=` says otherwise."""

from __future__ import annotations

from typing import Any

from ..dtypes import DType
from ..errors import KernelTypeError
from . import devices
from .arrays import describe
from .location import user_location
from .target import Target
from .tensor import Tensor, _is_array_like, _on_gpu, empty, full, ones, zeros


def empty_like(like: Any, dtype: Any = None, device: int | None = None) -> Tensor:
    """An uninitialised tensor of `like`'s shape and dtype (or `dtype`) on the current target,
    on like's device (an fl.Tensor's; else `device`).

    `like` is an fl.Tensor or any array fearless takes (NumPy, torch, DLPack); only its shape
    and element type are read."""
    dims, dt, dev = _shape_and_dtype(like, device, "fl.empty_like")
    return empty(dims, dt if dtype is None else dtype, dev)


def zeros_like(like: Any, dtype: Any = None, device: int | None = None) -> Tensor:
    """A tensor of zeros of `like`'s shape and dtype (or `dtype`); see `empty_like`."""
    dims, dt, dev = _shape_and_dtype(like, device, "fl.zeros_like")
    return zeros(dims, dt if dtype is None else dtype, dev)


def ones_like(like: Any, dtype: Any = None, device: int | None = None) -> Tensor:
    """A tensor of ones of `like`'s shape and dtype (or `dtype`); see `empty_like`."""
    dims, dt, dev = _shape_and_dtype(like, device, "fl.ones_like")
    return ones(dims, dt if dtype is None else dtype, dev)


def full_like(
    like: Any, value: bool | int | float, dtype: Any = None, device: int | None = None
) -> Tensor:
    """A tensor of `like`'s shape and dtype (or `dtype`) filled with `value`."""
    dims, dt, dev = _shape_and_dtype(like, device, "fl.full_like")
    return full(dims, value, dt if dtype is None else dtype, dev)


def _shape_and_dtype(
    like: Any, device: int | None, what: str
) -> tuple[tuple[int, ...], DType, int]:
    """The shape and dtype of `like` (a `*_like` constructor's model, `what`), without copying
    it, and the device of the copy: `device`, else an fl.Tensor model's own."""
    if isinstance(like, Tensor):
        like._check_live()
        dev = like._device if device is None else devices.resolve(device, what)
        return like._shape, like._dtype, dev
    if not _is_array_like(like):
        raise KernelTypeError(
            f"`{type(like).__name__}` is not an array: the `*_like` constructors copy the "
            "shape and dtype of an array",
            user_location(),
            help="pass an fl.Tensor, a NumPy array or a torch tensor, or give the shape: "
            "`fl.zeros(shape, dtype)`",
        )
    info = describe(like, Target.CUDA if _on_gpu(like) else Target.SIM, name="like", ndim=None)
    return info.shape, info.dtype, devices.resolve(device, what)
