"""Kernel parameter packing for cuLaunchKernel, laid out once per kernel signature.

cuLaunchKernel takes `void **kernelParams`: one pointer per kernel parameter, each pointing at
that parameter's bytes. A `ParamPacker` owns one host buffer holding every parameter at its
natural alignment plus the pointer array into it, both built once from the ABI (see abi.py):

    slice/disjoint/atomic `a`  ->  u64 pointer to element 0, i64 length in elements
    2-D `a`                    ->  u64 pointer to element 0, i64 shape[0], i64 shape[1]
    scalar `x: T`              ->  T (bool as u8, f16 as IEEE half, bf16 as its 16 raw bits)
    then                       ->  i64 logical thread count of the launch
    then                       ->  u64 pointer to the kernel's device error record
    last, cooperative only     ->  u64 pointer to the grid barrier's counter (cooperative.py)

A launch then costs one `struct.pack_into` of the changing values into that buffer (the error
record pointer is written once), and the pointer array's address is a constant.

One policy for every packed buffer of both tracks (`ParamPacker` here, the Tile track's
`ParamBlock`): a buffer belongs to one prepared launch and is shared by the threads that launch
it, so the pack and the cuLaunchKernel that copies the parameters happen under its `lock`.
`natural_layout` is the one layout both use: each value at its natural alignment, as the
kernel's .param space has it.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Sequence
from typing import Any

from ..abi import ParamSpec

# struct codes of each scalar type, little-endian, standard sizes.
STRUCT_CODES: dict[str, str] = {
    "bool": "?",
    "i8": "b",
    "i16": "h",
    "i32": "i",
    "i64": "q",
    "u8": "B",
    "u16": "H",
    "u32": "I",
    "u64": "Q",
    "f16": "e",
    "bf16": "H",  # the caller converts the value to its raw bits (see `bf16_bits`)
    "f32": "f",
    "f64": "d",
}


class ParamPacker:
    """The argument buffer of one kernel signature; `set` writes one launch's values into it.

    `set` takes the flat values in ABI order without the error record: for each array its
    pointer and extents (length; or rows, cols), for each scalar its value, then the launch's logical thread count. `address` is the `void**` to pass to
    cuLaunchKernel; it stays valid (and its target stays put) as long as the packer lives.
    """

    def __init__(self, params: Sequence[ParamSpec], cooperative: bool = False) -> None:
        codes: list[str] = []
        for p in params:
            if p.is_array:
                codes += ["Q"] + ["q"] * p.ndim  # pointer, then the extent of each axis
            else:
                codes.append(STRUCT_CODES[p.dtype.name])
        codes.append("q")  # the logical thread count
        fmt, offsets, size = natural_layout(codes)
        self._values = struct.Struct(fmt)
        pad = -size % 8
        size += pad
        offsets.append(size)  # the error record pointer, written by `set_error_record`
        self._error_offset = size
        size += 8
        self._grid_offset = size  # a cooperative kernel's grid barrier, `set_grid_barrier`
        if cooperative:
            offsets.append(size)
            size += 8
        self.size = size
        self.offsets: tuple[int, ...] = tuple(offsets)
        self.count = len(offsets)
        self._buf = ctypes.create_string_buffer(size)
        base = ctypes.addressof(self._buf)
        self._ptrs = (ctypes.c_void_p * self.count)(*(base + off for off in offsets))
        self.address: int = ctypes.addressof(self._ptrs)
        self.buffer_address: int = base
        self._pack_into = self._values.pack_into
        self.lock = threading.Lock()  # held from the pack to the launch that reads it

    def set(self, *values: object) -> None:
        """Write one launch's values (ABI order, error record excluded) into the buffer.

        Raises struct.error, OverflowError or TypeError for a value its slot cannot hold; the
        launcher turns that into a KernelTypeError naming the parameter.
        """
        self._pack_into(self._buf, 0, *values)

    def pack_target(self) -> tuple[Any, Any]:
        """(`struct.Struct.pack_into` bound, the buffer): what `set` calls, for a launcher that
        packs inline to save a call per launch."""
        return self._pack_into, self._buf

    def set_error_record(self, address: int) -> None:
        struct.pack_into("<Q", self._buf, self._error_offset, address)

    def set_grid_barrier(self, address: int) -> None:
        """A cooperative kernel's grid barrier counter (written per launch, under `lock`)."""
        assert self._grid_offset < self.size
        struct.pack_into("<Q", self._buf, self._grid_offset, address)

    def to_bytes(self) -> bytes:
        """The packed parameter bytes (for tests and debugging)."""
        return self._buf.raw

    def pointers(self) -> list[int]:
        """The `void*` entries of the pointer array (for tests and debugging)."""
        return [int(p or 0) for p in self._ptrs]


def natural_layout(codes: Sequence[str]) -> tuple[str, list[int], int]:
    """A little-endian struct format placing each code at its natural alignment, as the
    kernel's .param space has it: (format, offset of each code, size)."""
    fmt = ["<"]
    offsets: list[int] = []
    size = 0
    for code in codes:
        width = struct.calcsize("<" + code)
        pad = -size % width
        if pad:
            fmt.append(f"{pad}x")
        size += pad
        offsets.append(size)
        fmt.append(code)
        size += width
    return "".join(fmt), offsets, size


def bf16_bits(value: float) -> int:
    """The bfloat16 bit pattern of `value`, rounded to nearest even (NaN stays a quiet NaN)."""
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    if bits & 0x7FFFFFFF > 0x7F800000:
        return (bits >> 16) | 0x0040
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
