"""The SIMT IR's constant arrays: `const.array`, a read-only array whose values are part of
the kernel (a module-level NumPy array the kernel reads, frozen when it compiles).

    %t = const.array {name='LUT', data='0000803f00000040'} : Const[f32, 2]

`data` is the array's bytes, C order, little-endian, as hex: the text form round-trips, and
the simulator and the LLVM backend read the same bytes. It is re-exported by `ops.py`.
"""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import DType
from ...errors import Location
from ..core import ArrayType, Attr, Op


class ConstArray(Op):
    """A constant array of the result's `ArrayType.const` shape; loads index it as they index
    a parameter (bounds-checked), and nothing stores to it (the verifier refuses a store)."""

    opname = "const.array"
    data = Attr[str]()

    def __init__(
        self, dtype: DType, shape: tuple[int, ...], data: str, loc: Location, name: str = ""
    ) -> None:
        t = ArrayType(dtype, False, len(shape), const=tuple(shape))
        super().__init__([], [t], loc, name=name, data=data)
        self.result.name = name

    @property
    def name(self) -> str:
        """The user's name of the array (`LUT`, `tables.LUT`), for messages and symbols."""
        return str(self.attrs["name"])

    @property
    def shape(self) -> tuple[int, ...]:
        t = self.result.type
        assert isinstance(t, ArrayType) and t.const is not None
        return t.const

    @property
    def nbytes(self) -> int:
        t = self.result.type
        assert isinstance(t, ArrayType)
        return math.prod(self.shape) * t.dtype.itemsize

    def raw(self) -> bytes:
        """The array's bytes (C order, little-endian)."""
        return bytes.fromhex(self.data)

    def values(
        self, storage: np.dtype[np.generic]
    ) -> np.ndarray[tuple[int, ...], np.dtype[np.generic]]:
        """The array as NumPy holds it in `storage` (read-only: a view of the bytes)."""
        return np.frombuffer(self.raw(), dtype=storage.newbyteorder("<")).reshape(self.shape)
