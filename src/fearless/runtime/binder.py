"""The argument binder: a launch's arguments checked against the kernel's parameters.

Every launcher of both tracks explains a refused argument through the error constructors here,
so that a mistake reads the same on the simulator and the GPU, in the SIMT and the Tile track:

    arity_error    E0061  the number of arguments
    dtype_error    E0701  an array whose element type is not the parameter's
    scalar_error   E0701  a scalar its parameter's type cannot hold (`scalar_fits` is the rule)
    readonly_error E0701  a read-only host array passed as an output

`bind_args` is the slow path of a SIMT launch on the simulator: it raises every error and
returns what each parameter receives. The warm GPU launchers (runtime/launch.py, runtime/dispatch.py)
check the same facts inline and call these constructors only to explain a failure.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..abi import ParamSpec
from ..dtypes import DType
from ..errors import KernelTypeError
from .arrays import ArrayInfo, describe
from .location import argument_error, user_location
from .params import STRUCT_CODES, bf16_bits
from .target import Target

_TORCH_NAMES = {
    "bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
    "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16", "bf16": "bfloat16",
    "f32": "float32", "f64": "float64", "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}  # fmt: skip


def scalar_fits(value: object, dtype: DType) -> bool:
    """Whether `value` is a `dtype` scalar argument: the one rule of both tracks.

    A bool parameter takes only True/False (Python's or NumPy's); any other parameter refuses
    them. An integer parameter takes an integer in its range; a float parameter an integer or
    float its format holds without overflowing to infinity (`1e40` is no f32, `1e5` no f16).
    """
    is_bool = isinstance(value, bool | np.bool_)
    if dtype.is_bool or is_bool:
        return dtype.is_bool and is_bool
    try:
        packed = bf16_bits(value) if dtype.name == "bf16" else value  # type: ignore[arg-type]
        struct.pack("<" + STRUCT_CODES[dtype.name], packed)
    except (struct.error, OverflowError, TypeError, ValueError):
        return False
    if dtype.name == "bf16":  # bf16_bits rounds an overflow to infinity rather than raising
        finite = np.isfinite(float(value))  # type: ignore[arg-type]
        return not finite or bf16_bits(float(value)) & 0x7F80 != 0x7F80  # type: ignore[arg-type]
    return True


def arity_error(kernel: str, names: Sequence[str], given: int) -> KernelTypeError:
    """E0061: `kernel` was given `given` arguments for the parameters `names`."""
    listed = ", ".join(names)
    n = len(names)
    return KernelTypeError(
        f"`{kernel}` takes {n} argument{'s' if n != 1 else ''} ({listed}) but {given} "
        f"{'were' if given != 1 else 'was'} given",
        user_location(),
        code="E0061",
        help=f"pass one argument per parameter: {kernel}({listed})",
    )


def dtype_error(kernel: str, param: str, have: str, want: DType) -> KernelTypeError:
    """E0701: the array passed as `param` holds `have` elements, the parameter `want`."""
    return argument_error(
        f"argument `{param}` has element type {have}, but `{kernel}` expects {want.name}",
        help=f"convert it first (e.g. `x.to(torch.{_TORCH_NAMES.get(want.name, want.name)})`, "
        f"`x.astype(np.{want.np.name})` or `fl.asarray(x, dtype=fl.{want.name})`)",
    )


def readonly_error(param: str) -> KernelTypeError:
    """E0701: a read-only host array (a NumPy array with `writeable=False`) passed as an output."""
    return argument_error(
        f"argument `{param}` is a read-only array but the kernel writes it",
        help="pass a writable array (`x.copy()`, or set `x.flags.writeable = True` if you own "
        "its memory)",
    )


def scalar_error(param: str, value: object, dtype: DType) -> KernelTypeError:
    """E0701: `value` is not a `dtype` scalar (see `scalar_fits`). A bool for a number, or a
    number for a bool, says so: Python's `True == 1` makes that mistake easy to miss."""
    message = f"argument `{param}` = {value!r} does not fit the parameter's type {dtype.name}"
    if isinstance(value, bool | np.bool_) and not dtype.is_bool:
        kind = "an integer" if dtype.is_int else "a floating-point"
        return argument_error(
            f"{message}: a bool is not accepted for {kind} scalar",
            help=f"pass a number: `{'int' if dtype.is_int else 'float'}(x)` (or declare "
            f"`{param}: fl.bool_` if the kernel means a flag)",
        )
    if dtype.is_bool:
        return argument_error(
            f"{message}: a bool parameter takes only True or False",
            help="pass a bool: `bool(x)`, or a comparison such as `x != 0`",
        )
    return argument_error(
        message, help=f"pass a value {dtype.name} can hold (or convert it: `fl.{dtype.name}(x)`)"
    )


def bind_args(
    name: str, params: Sequence[ParamSpec], args: Sequence[Any], target: Target
) -> list[ArrayInfo | Any]:
    """Check the arguments of one launch against the kernel's parameters."""
    if len(args) != len(params):
        raise arity_error(name, [p.name for p in params], len(args))
    out: list[ArrayInfo | Any] = []
    for p, a in zip(params, args, strict=True):
        if p.is_array:
            info = describe(a, target, name=p.name, ndim=p.ndim)
            if info.dtype != p.dtype:
                raise dtype_error(name, p.name, info.dtype.name, p.dtype)
            if p.is_output and info.host is not None and not info.host.flags.writeable:
                raise readonly_error(p.name)
            out.append(info)
        else:
            if not scalar_fits(a, p.dtype):
                raise scalar_error(p.name, a, p.dtype)
            if p.dtype.name == "bf16":
                out.append(float(a))  # the simulator reads bf16 scalars by value
            else:
                out.append(np.asarray(a).astype(p.dtype.np)[()])
    return out
