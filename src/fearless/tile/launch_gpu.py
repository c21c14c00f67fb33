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


def _cluster_dims(function: Any) -> tuple[int, int, int]:
    """The cluster shape tileiras compiled in (num_ctas), (0, 0, 0) when there is none."""
    cu = driver.cu()
    attr = cu.CUfunction_attribute
    return tuple(  # type: ignore[return-value]
        int(driver.call("cuFuncGetAttribute", cu.cuFuncGetAttribute, a, function))
        for a in (
            attr.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
            attr.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
            attr.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
        )
    )


def launch(
    kernel: Kernel, signature: Signature, grid: tuple[int, int, int], values: list[Any], stream: Any
) -> None:
    ct = kernel.compile(signature)
    key = (signature, ct.arch)
    entry = kernel._gpu.get(key)
    if entry is None:
        ck = CompiledKernel(ct.name, ct.name, (), (), LaunchContract(), ct.arch, cubin=ct.cubin)
        loaded = driver.load_kernel(ck)
        entry = kernel._gpu[key] = (loaded, _cluster_dims(loaded.function))
    loaded, cluster = entry
    if any(c > 1 and g % c for g, c in zip(grid, cluster, strict=True)):
        raise LaunchContractError(
            f"`{kernel.name}` runs in clusters of {cluster[0]}x{cluster[1]}x{cluster[2]} blocks "
            f"(num_ctas={kernel.hints.num_ctas}), which do not divide its grid "
            f"{grid[0]}x{grid[1]}x{grid[2]}",
            user_location(),
            help="choose tile shapes that give a grid divisible by the cluster, or a smaller "
            "`num_ctas` (`kernel.options(num_ctas=1)`)",
        )
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
