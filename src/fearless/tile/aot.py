"""Ahead-of-time Tile specialisations: describe a launch without data, compile it with no GPU.

A Tile kernel specialises on each argument's kind and dtype, a Part's tile shape, each Const's
value and each array's divisibility facts (`compiler.array_align`), never on the extents
themselves. `Spec(shape, dtype)` stands for an array of that shape (a device allocation,
16-byte aligned), `Spec(...).partition(tile)` for a partitioned output, and a number or a dtype
for a scalar; Consts take their value. So one declared specialisation serves every launch whose
extents divide the same way:

    n = 1 << 20
    vecadd.specialise(tile.Spec((n,), fl.f32).partition((1024,)), tile.Spec((n,), fl.f32),
                      tile.Spec((n,), fl.f32))

`fearless compile FILE --arch sm_90` compiles every declared specialisation into the cache
(tileiras runs on the CPU), which is how Tile kernels reach a GPU machine without tileiras.
The specialisation specs describe is tile/signature.py's `signature_from_specs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..abi import ALIGN_BYTES, array_align
from ..dtypes import DType
from ..errors import KernelTypeError
from ..ir.tile.types import is_pow2
from ..runtime.location import argument_error, user_location


@dataclass(frozen=True, init=False)
class Spec:
    """An array argument without data: its shape, dtype and the byte alignment of its start."""

    shape: tuple[int, ...]
    dtype: DType
    align: int = ALIGN_BYTES

    # written out, not generated: a generated __init__'s frame is "<string>", which the errors
    # below would take for the user's line
    def __init__(self, shape: Any, dtype: DType, align: int = ALIGN_BYTES) -> None:
        object.__setattr__(self, "shape", _extents(shape, "a shape", "(1024, 512)"))
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "align", align)
        if not isinstance(self.dtype, DType):
            raise KernelTypeError(
                f"`tile.Spec` needs a fearless dtype such as fl.f32, got {self.dtype!r:.40}",
                user_location(),
            )
        if any(d < 0 for d in self.shape) or not self.shape:
            raise KernelTypeError(
                f"`tile.Spec` needs a non-empty shape of extents >= 0, got {self.shape}",
                user_location(),
            )
        if isinstance(align, bool) or not isinstance(align, int) or align <= 0:
            raise KernelTypeError(
                f"`align` of `tile.Spec` is a positive number of bytes, got {align!r:.40}",
                user_location(),
                help=f"leave it out for a device allocation's ({ALIGN_BYTES} bytes)",
            )

    def partition(self, tile: Sequence[int]) -> PartSpec:
        """The spec of this array partitioned into `tile`-shaped tiles (a `tile.Part` argument)."""
        t = _extents(tile, "a tile shape", "(128, 64)")
        if len(t) != len(self.shape) or not all(is_pow2(d) for d in t):
            raise KernelTypeError(
                f"a {len(self.shape)}-d Spec partitions into {len(self.shape)} power-of-two tile "
                f"extents, got {t}",
                user_location(),
            )
        return PartSpec(self, t)

    def align_facts(self) -> tuple[int, ...]:
        return array_align(self.align, self.shape, self.dtype.itemsize)


@dataclass(frozen=True)
class PartSpec:
    """`Spec(...).partition(tile)`: a partitioned output without data."""

    array: Spec
    tile: tuple[int, ...]


def _extents(value: Any, what: str, example: str) -> tuple[int, ...]:
    """A shape given to `tile.Spec` as a tuple of ints (a Python or NumPy int alone is one
    extent); anything else is E0701 at the caller's line."""
    items = (value,) if isinstance(value, int | np.integer) else value
    try:
        extents = tuple(items)
    except TypeError:
        extents = (None,)
    if not all(isinstance(d, int | np.integer) and not isinstance(d, bool) for d in extents):
        raise argument_error(
            f"`tile.Spec` takes {what} of ints, got {value!r:.40}",
            help=f"e.g. {example}",
        )
    return tuple(int(d) for d in extents)
