"""Launching a compiled Tile kernel on the GPU: load its cubin once, lay out the ABI, cuLaunchKernel.

Tile kernels are launched with a block of (1, 1, 1): tileiras fixes the threads of a tile
block inside the cubin, and the grid is the partition's tile grid. Parameters follow
`TileParam`'s ABI (abi.py); there is no error record, since loads are padded and stores
masked by the partition views (nothing to check on the device).

`prepare` does, once per argument key (runtime/dispatch.py), everything a launch needs besides its
pointers and scalar values: the compiled and loaded function, the cluster check, and a
`ParamBlock` holding the extents and strides. A `GpuLaunch` then costs one `struct.pack_into`
of the pointers and scalars and the cuLaunchKernel call.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Sequence
from typing import Any

from ..abi import CompiledKernel, CompiledTile, LaunchContract, Signature, element_strides
from ..errors import LaunchContractError
from . import claunch, driver
from .location import user_location
from .params import STRUCT_CODES, bf16_bits, natural_layout
from .streams import Stream, default_cu_stream, stream_handle

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


Loaded = dict[tuple[Signature, str], tuple[Any, tuple[int, int, int]]]


def prepare(
    ct: CompiledTile,
    loaded_kernels: Loaded,
    num_ctas: int | None,
    grid: tuple[int, int, int],
    shapes: Sequence[tuple[int, ...]],
) -> GpuLaunch:
    """Load `ct` (once per signature and arch: `loaded_kernels` is the kernel's), check its
    cluster shape against `grid` and lay out its parameters for arrays of `shapes` (one per
    array parameter, in order)."""
    signature = ct.signature
    key = (signature, ct.arch)
    entry = loaded_kernels.get(key)
    if entry is None:
        _refuse_hang(ct)
        ck = CompiledKernel(ct.name, ct.name, (), (), LaunchContract(), ct.arch, cubin=ct.cubin)
        loaded = driver.load_kernel(ck)
        entry = loaded_kernels[key] = (loaded, _cluster_dims(loaded.function))
    loaded, cluster = entry
    if any(c > 1 and g % c for g, c in zip(grid, cluster, strict=True)):
        raise LaunchContractError(
            f"`{ct.name}` runs in clusters of {cluster[0]}x{cluster[1]}x{cluster[2]} blocks "
            f"(num_ctas={num_ctas}), which do not divide its grid "
            f"{grid[0]}x{grid[1]}x{grid[2]}",
            user_location(),
            help="choose tile shapes that give a grid divisible by the cluster, or a smaller "
            "`num_ctas` (`kernel.options(num_ctas=1)`)",
        )
    return GpuLaunch(ct.name, loaded.function, grid, ParamBlock(signature, shapes))


def _refuse_hang(ct: CompiledTile) -> None:
    """Refuse a cubin whose launch could never end, before it takes the GPU: tileiras 13.5 can
    compile a warp-specialised kernel whose consumer warp group raises its registers
    (setmaxnreg) past what the block holds at the occupancy asked, and then retries for ever
    (sparse MLA at occupancy 2 hung the H100, 2026-12-05: backends/cubin_info.py reads it from
    the cubin when it is compiled)."""
    why = ct.never_finishes
    if why is not None:
        raise LaunchContractError(
            f"`{ct.name}` as tileiras compiled it would hang the GPU: {why}",
            user_location(),
            help="ask for fewer blocks an SM (`kernel.options(occupancy=1)`) or fewer worker "
            "warps (`num_worker_warps`), which leaves each thread more registers; an "
            "autotuned kernel skips such a configuration",
        )


def dynamic_values(signature: Signature, values: Sequence[Any]) -> list[Any]:
    """What changes from launch to launch, from a Tile kernel's `signature_of` values: per array its
    pointer, per scalar its value, in ABI order (a Const has no parameter)."""
    out: list[Any] = []
    for p, v in zip(signature, values, strict=True):
        if p.kind == "part":
            out.append(v[1].ptr)
        elif p.kind in ("tensor", "atomic"):
            out.append(v.ptr)
        elif p.kind == "scalar":
            out.append(v)
    return out


class ParamBlock:
    """The `void **kernelParams` of one launch shape, and the memory its pointers point at.

    The ABI interleaves what changes per launch (array pointers, scalars) with what does not
    (extents, strides), but nothing requires the parameters to lie in ABI order in host memory:
    only the pointer array is in ABI order. So the changing values sit together at the start
    of one buffer, packed by one `struct.Struct` at natural alignment, and the extents and
    strides after them, written once here.
    """

    def __init__(self, signature: Signature, shapes: Sequence[tuple[int, ...]]) -> None:
        dynamic: list[str] = []  # struct code of each changing value
        constants: list[int] = []  # i32 extents and strides
        slots: list[tuple[bool, int]] = []  # per ABI parameter: (changes?, index among those)
        bf16: list[int] = []  # changing values given as floats but passed as bf16 bits
        shapes_left = iter(shapes)
        for p in signature:
            if p.kind == "const":
                continue
            if not p.is_array:
                assert p.dtype is not None
                if p.dtype.name == "bf16":
                    bf16.append(len(dynamic))
                slots.append((True, len(dynamic)))
                dynamic.append(STRUCT_CODES[p.dtype.name])
                continue
            shape = next(shapes_left)
            strides = element_strides(shape)
            if any(d > _I32_MAX for d in (*shape, *strides)):
                raise LaunchContractError(
                    f"`{p.name}` has an extent or stride above 2**31 - 1, which Tile kernels index with i32",
                    user_location(),
                )
            slots.append((True, len(dynamic)))
            dynamic.append("Q")
            for d in (*shape, *strides[:-1]):
                slots.append((False, len(constants)))
                constants.append(d)
        fmt, offsets, size = natural_layout(dynamic)
        self.codes = tuple(dynamic)
        self.value_offsets = tuple(offsets)  # where each changing value lies in the buffer
        self._slots = tuple(slots)
        self.bf16 = tuple(bf16)
        self._values = struct.Struct(fmt)
        const_at = size + (-size % 4)
        self.size = max(8, const_at + 4 * len(constants))
        self.buffer = ctypes.create_string_buffer(self.size)
        struct.pack_into(f"<{len(constants)}i", self.buffer, const_at, *constants)
        base = ctypes.addressof(self.buffer)
        self.param_offsets = tuple(
            offsets[i] if changes else const_at + 4 * i for changes, i in slots
        )
        self._pointers = (ctypes.c_void_p * max(1, len(slots)))(
            *(base + off for off in self.param_offsets)
        )
        self.address: int = ctypes.addressof(self._pointers)
        self.pack_into = self._values.pack_into  # (buffer, 0, *values): the per-launch write
        self.lock = threading.Lock()  # held from the pack to the launch that reads it

    def set(self, values: Sequence[Any]) -> None:
        """Write one launch's changing values (`dynamic_values` order) into the buffer."""
        if self.bf16:
            values = list(values)
            for i in self.bf16:
                values[i] = bf16_bits(values[i])
        self.pack_into(self.buffer, 0, *values)

    def param_bytes(self) -> list[bytes]:
        """The bytes each entry of the pointer array points at, in ABI order (for tests)."""
        base = ctypes.addressof(self.buffer)
        out = []
        for (changes, i), pointer in zip(self._slots, self._pointers, strict=False):
            size = struct.calcsize("<" + self.codes[i]) if changes else 4
            off = int(pointer or 0) - base
            out.append(self.buffer.raw[off : off + size])
        return out


class GpuLaunch:
    """One prepared GPU launch: call it with the changing values and a stream.

    The lock keeps a second thread from packing its values into the shared buffer while the
    driver still reads this thread's (cuLaunchKernel copies the parameters before returning).
    """

    def __init__(
        self, name: str, function: Any, grid: tuple[int, int, int], params: ParamBlock
    ) -> None:
        cu = driver.cu()
        self.name = name
        self.function = function
        self.grid = grid
        self.params = params
        self._lock = params.lock  # params.py's policy: pack and launch under the buffer's lock
        self._cu_launch = cu.cuLaunchKernel
        self._CUstream = cu.CUstream
        self._legacy_stream = cu.CUstream(0)
        self._invalid_context = cu.CUresult.CUDA_ERROR_INVALID_CONTEXT
        self._cplan = self._compiled_plan()
        self._c_launch = claunch.module().tile_launch if self._cplan is not None else None  # type: ignore[union-attr]

    def _compiled_plan(self) -> Any:
        """The C launcher's plan of this launch (claunch.py), or None: cuda.bindings only."""
        params = self.params
        if params.bf16:
            return None
        try:
            return claunch.tile_plan(
                int(self.function),
                self.grid,
                ctypes.addressof(params.buffer),
                params.size,
                params.param_offsets,
                params.codes,
                params.value_offsets,
            )
        except (OSError, TypeError, ValueError):  # no libcuda, or a function with no address
            return None

    def __call__(self, values: Sequence[Any], stream: Any) -> None:
        # The compiled launcher packs its own copy of the buffer and launches, the GIL held
        # throughout, on the default stream (None: decided in C as streams.py decides it);
        # anything else (fl.graph's capture, a value it does not pack, a driver error) goes
        # the Python way below, which explains it.
        if (
            self._c_launch is not None
            and stream is None
            and self._c_launch(self._cplan, values, None) == 0
        ):
            return
        params = self.params
        with self._lock:
            if params.bf16:
                params.set(values)
            else:
                params.pack_into(params.buffer, 0, *values)
            if stream is None:
                cs = default_cu_stream(self._legacy_stream)
            elif type(stream) is Stream:
                cs = stream._cu if stream._cu is not None else stream.cu_stream()
            else:
                cs = self._CUstream(stream_handle(stream))
            gx, gy, gz = self.grid
            (err,) = self._cu_launch(self.function, gx, gy, gz, 1, 1, 1, 0, cs, params.address, 0)
            if err:
                self._failed(err, cs)

    def _failed(self, err: Any, cs: Any) -> None:
        """As `driver.call`: a thread that never used the GPU gets the context and tries again."""
        if err == self._invalid_context:
            driver.make_current()
            gx, gy, gz = self.grid
            (err,) = self._cu_launch(
                self.function, gx, gy, gz, 1, 1, 1, 0, cs, self.params.address, 0
            )
            if not err:
                return
        raise driver.driver_error(err, f"launching `{self.name}`")
