"""The argument binder: one launch's arguments checked against the kernel's parameters.

`bind_args` raises every error of a launch's arguments (count, array type and dtype, scalar
range) and returns what each parameter receives. The simulator's SIMT launcher binds through it;
it lives in the runtime so that every launcher can share one wording.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..abi import ParamSpec
from ..errors import KernelTypeError
from .arrays import ArrayInfo, describe
from .location import user_location
from .params import scalar_fits


def bind_args(
    name: str, params: Sequence[ParamSpec], args: Sequence[Any], target: str
) -> list[ArrayInfo | Any]:
    """Check the arguments of one launch against the kernel's parameters."""
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise KernelTypeError(
            f"`{name}` takes {len(params)} argument{'s' if len(params) != 1 else ''} "
            f"({names}) but {len(args)} were given",
            user_location(),
            code="E0061",
        )
    out: list[ArrayInfo | Any] = []
    for p, a in zip(params, args, strict=True):
        if p.is_array:
            info = describe(a, target, name=p.name, ndim=p.ndim)
            if info.dtype != p.dtype:
                raise KernelTypeError(
                    f"argument `{p.name}` has elements of {info.dtype.name}, but the kernel "
                    f"takes {p.dtype.name}",
                    user_location(),
                    code="E0701",
                    help=f"pass {p.dtype.name} data: convert a NumPy array with "
                    f"`x.astype(np.{p.dtype.np.name})`, or build it as `fl.asarray(x, dtype=fl.{p.dtype.name})`",
                )
            out.append(info)
        else:
            if not scalar_fits(a, p.dtype):
                raise KernelTypeError(
                    f"argument `{p.name}` is {a!r}, which is not a {p.dtype.name}",
                    user_location(),
                    code="E0701",
                    help=f"pass a value that fits {p.dtype.name}",
                )
            if p.dtype.name == "bf16":
                out.append(float(a))  # the simulator reads bf16 scalars by value
            else:
                out.append(np.asarray(a).astype(p.dtype.np)[()])
    return out
