"""The warm key of a launch's arguments: per declared parameter kind, a reader of the few facts
a prepared launch depends on (runtime/dispatch.py keeps the launches by this key).

A reader is called on every launch, in parameter order, with the argument, whether the target
is a GPU, and three lists to append to: the key part, the pointer if it is an array, and what
the launch passes for it (on "cuda" the pointer or scalar value in ABI order; on "sim" what the
track's slow path makes of the argument). It returns False for anything it does not
recognise, or for a failed check: the slow path then runs and explains it. What each kind reads:

    part    a live `Partition` (exactly) of an fl.Tensor of the declared dtype, on the target's
            side of the bus; key: pointer mod 16, shape, tile, grid, order, device (so that
            arrays on two devices meet the slow path's refusal, runtime/devices.py); on
            "sim" its host array must be writable (a read-only one meets the slow path's
            E0701; so does a read-only host array for an atomic)
    tensor  an fl.Tensor (live, of the declared dtype, on the target's side), or on "cuda" a
    atomic  torch tensor on the process's GPU of the declared dtype, or anything `describe`
            accepts with the declared dtype; key: pointer mod 16, shape. A plain torch.Tensor is read inline
            and its contiguity checked on every call (`is_contiguous()`, torch's flag for
            `is_c_contiguous`); a subclass's accessors may be overridden, so it is read as
            `describe` reads it and its strides, whose contiguity the slow path checked, go
            in the key; an fl.Tensor's device goes in it too
    optional  a Part, Tensor or Atomic declared `| None` (`Declared.optional`): None has key part
            None, pointer 0 (a zero-size range, which overlaps nothing: the borrow check's
            indices stay those of the declared arrays, and the slow path's byte extent for it
            is 0) and no payload on "cuda" (None on "sim", what `signature_of` gives an absent
            array); anything else is read as the array it declares
    const   key: its type and value
    scalar  a bool, int or float; key: its type. The slow path's range check depends on the
            type alone except for an int passed to an integer parameter: that one is checked
            on every call.
"""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Callable
from typing import Any

from .. import dtypes
from ..abi import ALIGN_BYTES, Declared
from ..dtypes import DType
from . import process_gpu
from .arrays import ArrayInfo, describe, torch_data_ptr, torch_dtype, torch_dtype_of
from .binder import scalar_fits
from .partition import Partition
from .target import Target
from .tensor import Tensor

# `array_align` caps a pointer's divisor at ALIGN_BYTES, a power of two: ptr & this decides it.
_ALIGN_MASK = ALIGN_BYTES - 1

# read(argument, on_device, key, starts, payload) -> recognised? It appends the argument's key
# part, its pointer if it is an array, and what the launch passes for it.
Reader = Callable[[Any, bool, list[Any], list[int], list[Any]], bool]


def reader_for(param: Declared) -> Reader:
    """The reader of a parameter of `param.kind`."""
    kind, want = param.kind, param.dtype
    if kind == "const":
        return _read_const
    assert want is not None
    if kind == "part":
        read = _part_reader(want)
    elif kind in ("tensor", "atomic"):
        read = _tensor_reader(param.name, want, kind == "atomic")
    else:
        return _scalar_reader(want)
    return _optional(read) if param.optional else read


def _optional(read: Reader) -> Reader:
    """The reader of an optional array: None is absent (see the module's docstring), anything
    else goes to `read`."""

    def read_optional(
        arg: Any, on_device: bool, key: list[Any], starts: list[int], payload: list[Any]
    ) -> bool:
        if arg is None:
            key.append(None)
            starts.append(0)
            if not on_device:
                payload.append(None)  # a Const's value in `signature_of`'s values
            return True
        return read(arg, on_device, key, starts, payload)

    return read_optional


def _part_reader(want: DType) -> Reader:
    def read(
        arg: Any, on_device: bool, key: list[Any], starts: list[int], payload: list[Any]
    ) -> bool:
        if type(arg) is not Partition or arg._given_back is not None:
            return False
        t = arg.tensor
        if t._dtype is not want or t._on_device != on_device:
            return False
        ptr = t._ptr
        starts.append(ptr)
        if on_device:  # every array on the process's GPU: the key claunch_tile.c builds too
            key.append((ptr & _ALIGN_MASK, t._shape, arg.tile, arg.grid, arg.group))
            payload.append(ptr)
        else:  # exactly what `signature_of` makes
            host = t._host
            if host is not None and not host.flags.writeable:
                return False  # a read-only array: the slow path refuses it
            key.append((ptr & _ALIGN_MASK, t._shape, arg.tile, arg.grid, arg.group, t._device))
            info = ArrayInfo(ptr, t._nbytes, t._shape, (), want, on_device, t, t._host, t._device)
            payload.append((arg, info))
        return True

    return read


def _tensor_reader(name: str, want: DType, output: bool) -> Reader:
    """A Tensor's reader, or an Atomic's (`output`: a read-only host array is refused)."""
    # torch.Tensor itself and the torch dtype of `want`, once torch is loaded (see `_torch_plain`)
    torch_types: list[Any] = []

    def read(
        arg: Any, on_device: bool, key: list[Any], starts: list[int], payload: list[Any]
    ) -> bool:
        tp = type(arg)
        if tp is Tensor:
            if arg._moved is not None or arg._dtype is not want or arg._on_device != on_device:
                return False
            ptr = arg._ptr
            # the device on sim only: on "cuda" every array is on the process's GPU
            # (claunch_tile.c's key)
            key.append(
                (ptr & _ALIGN_MASK, arg._shape)
                if on_device
                else (ptr & _ALIGN_MASK, arg._shape, arg._device)
            )
            if on_device:
                payload.append(ptr)
            else:
                info = arg._array_info()
                if output and info.host is not None and not info.host.flags.writeable:
                    return False  # a read-only array: the slow path refuses it
                payload.append(info)
            starts.append(ptr)
            return True
        if on_device:
            plain = torch_types or _torch_plain(want, torch_types)
            if tp is plain[0]:
                # A plain torch.Tensor, inline: `describe`'s checks, its contiguity check as
                # torch's own flag (is_contiguous() is `is_c_contiguous`, extent-1 axes and
                # empty tensors included), so the key needs no strides.
                if (
                    not arg.is_cuda
                    or arg.get_device() != process_gpu.GPU
                    or arg.dtype is not plain[1]
                    or not arg.is_contiguous()
                ):
                    return False
                ptr = arg.data_ptr()
                key.append((ptr & _ALIGN_MASK, arg.shape))
                starts.append(ptr)
                payload.append(ptr)
                return True
            if _is_torch(tp):
                return _read_torch(arg, want, key, starts, payload)
        return _read_described(arg, name, want, output, on_device, key, starts, payload)

    return read


class NoTorch:
    """Stands for torch.Tensor while torch is not loaded: no argument has this type."""


def _torch_plain(want: DType, found: list[Any]) -> list[Any]:
    """[torch.Tensor, the torch dtype of `want`] into `found` once torch is loaded (until
    then a list whose type matches nothing, not kept: torch may be imported later)."""
    torch = sys.modules.get("torch")  # never imported here: a torch tensor means it is loaded
    if torch is None:
        return [NoTorch, None]
    found += [torch.Tensor, torch_dtype_of(want)]
    return found


_torch_types: dict[type, bool] = {}


def _is_torch(tp: type) -> bool:
    """A torch.Tensor subclass (their accessors may be overridden: read as `_read_torch` does)."""
    found = _torch_types.get(tp)
    if found is None:
        torch = sys.modules.get("torch")  # never imported here: a torch tensor means it is loaded
        found = _torch_types[tp] = torch is not None and issubclass(tp, torch.Tensor)
    return found


def _read_torch(t: Any, want: DType, key: list[Any], starts: list[int], payload: list[Any]) -> bool:
    """A torch tensor subclass on the GPU, through its accessors (what `describe` reads, minus
    the contiguity check: the strides are in the key instead)."""
    if not t.is_cuda or t.get_device() != process_gpu.GPU or torch_dtype(t.dtype) is not want:
        return False
    ptr = torch_data_ptr(t)  # not an override's answer
    key.append((ptr & _ALIGN_MASK, t.shape, t.stride()))
    starts.append(ptr)
    payload.append(ptr)
    return True


def _read_described(
    arg: Any,
    name: str,
    want: DType,
    output: bool,
    on_device: bool,
    key: list[Any],
    starts: list[int],
    payload: list[Any],
) -> bool:
    """NumPy arrays, CPU torch tensors on "sim", CuPy and DLPack arrays: `describe` itself
    (an `output`'s read-only host array is left to the slow path, which refuses it)."""
    try:
        info = describe(arg, Target.CUDA if on_device else Target.SIM, name=name, ndim=None)
    except Exception:  # the slow path raises it again, after any earlier argument's error
        return False
    if info.dtype is not want:
        return False
    if output and info.host is not None and not info.host.flags.writeable:
        return False
    key.append((info.ptr & _ALIGN_MASK, info.shape))
    starts.append(info.ptr)
    payload.append(info.ptr if on_device else info)
    return True


class SignedZero:
    """The key type of a Const float zero, ±0.0 told apart by the sign (`(SignedZero, -1.0)`):
    `(float, 0.0) == (float, -0.0)`, so plain keys would launch one's compile for the other.
    claunch_tile.c's warm path keys a Const as `(type, value)`, which never equals this, so
    a zero goes to the Python path, which finds its own entry."""


class NaNBits:
    """The key type of a Const float NaN, by its bits (`(NaNBits, 0x7FF8000000000000)`): a NaN
    equals no other float, itself included, so `(float, nan)` would find no entry unless the
    call passed the very NaN object of an earlier one: every launch would take the slow path
    and store a key of its own. claunch_tile.c's warm path never matches this part either, so a
    NaN goes to the Python path, which finds its entry."""


def const_part(arg: Any) -> tuple[Any, Any]:
    """A Const argument's part of the key: (its type, its value), a float zero by its sign, a
    NaN by its bits and a tuple holding either item by item."""
    if type(arg) is float and (arg == 0.0 or arg != arg):
        if arg != arg:
            return (NaNBits, struct.unpack("<Q", struct.pack("<d", arg))[0])
        return (SignedZero, math.copysign(1.0, arg))
    if type(arg) is tuple and any(type(x) is float and (x == 0.0 or x != x) for x in arg):
        return (tuple, tuple(const_part(x) for x in arg))
    return (type(arg), arg)


def _read_const(
    arg: Any, on_device: bool, key: list[Any], starts: list[int], payload: list[Any]
) -> bool:
    key.append(const_part(arg))
    if not on_device:
        payload.append(None)  # a Const has no kernel parameter; `signature_of` gives None
    return True


_FLOAT_MAX = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38}


def _scalar_reader(dt: DType) -> Reader:
    """A scalar that `binder.scalar_fits` accepts; the key holds its type, so a kind the slow
    path refused (a bool for an int, a float for an int) never reaches a cached launch."""
    ranged = dt.is_int
    limit = _FLOAT_MAX.get(dt.name, float("inf"))

    def read(
        arg: Any, on_device: bool, key: list[Any], starts: list[int], payload: list[Any]
    ) -> bool:
        tp = type(arg)
        exact = tp is float or tp is int or tp is bool  # isinstance below is for subclasses
        if not exact and not isinstance(arg, bool | int | float):
            return False
        if ranged and isinstance(arg, int) and not dtypes.literal_fits(arg, dt):
            return False
        if not ranged and not -limit <= arg <= limit and not scalar_fits(arg, dt):
            return False  # a finite value past the format's largest (NaN and inf fit)
        key.append(tp)
        payload.append(arg)
        return True

    return read
