"""Launching a compiled Tile kernel on the GPU: load its cubin once, pack the ABI, cuLaunchKernel.

Tile kernels are launched with a block of (1, 1, 1): tileiras fixes the threads of a tile
block inside the cubin, and the grid is the partition's tile grid. Parameters follow
`TileParam`'s ABI (compiler.py); there is no error record, since loads are padded and stores
masked by the partition views (nothing to check on the device).
"""

from __future__ import annotations

import ctypes
import struct
from typing import TYPE_CHECKING, Any

from ..abi import CompiledKernel, LaunchContract
from ..errors import LaunchContractError
from ..runtime import driver
from ..runtime.location import user_location
from ..runtime.params import STRUCT_CODES, bf16_bits
from ..runtime.streams import stream_handle
from .compiler import Signature

if TYPE_CHECKING:
    from .kernel import Kernel

_I32_MAX = 2**31 - 1


def launch(
    kernel: Kernel, signature: Signature, grid: tuple[int, int, int], values: list[Any], stream: Any
) -> None:
    ct = kernel.compile(signature)
    key = (signature, ct.arch)
    loaded = kernel._gpu.get(key)
    if loaded is None:
        ck = CompiledKernel(ct.name, ct.name, (), (), LaunchContract(), ct.arch, cubin=ct.cubin)
        loaded = driver.load_kernel(ck)
        kernel._gpu[key] = loaded
    codes: list[str] = []
    flat: list[Any] = []
    for p, v in zip(signature, values, strict=True):
        if p.kind == "const":
            continue
        if p.is_array:
            info = v[1] if p.kind == "part" else v
            shape = info.shape
            strides = [1] * len(shape)
            for i in range(len(shape) - 2, -1, -1):
                strides[i] = strides[i + 1] * shape[i + 1]
            if any(d > _I32_MAX for d in (*shape, *strides)):
                raise LaunchContractError(
                    f"`{p.name}` has an extent or stride above 2**31 - 1, which Tile kernels index with i32",
                    user_location(),
                )
            codes += ["Q"] + ["i"] * len(shape) + ["i"] * (len(shape) - 1)
            flat += [info.ptr, *shape, *strides[:-1]]
        else:
            assert p.dtype is not None
            codes.append(STRUCT_CODES[p.dtype.name])
            flat.append(bf16_bits(v) if p.dtype.name == "bf16" else v)
    buffers = [
        ctypes.create_string_buffer(struct.pack("<" + c, x), max(8, struct.calcsize(c)))
        for c, x in zip(codes, flat, strict=True)
    ]
    pointers = (ctypes.c_void_p * max(1, len(buffers)))(*[ctypes.addressof(b) for b in buffers])
    cu = driver.cu()
    handle = stream_handle(stream)
    driver.call(
        f"launching `{kernel.name}`",
        cu.cuLaunchKernel,
        loaded.function,
        grid[0], grid[1], grid[2],
        1, 1, 1,
        0,
        cu.CUstream(handle),
        ctypes.addressof(pointers),
        0,
    )  # fmt: skip
