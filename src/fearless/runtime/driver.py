"""The CUDA driver: device and context, kernel loading, cubin linking, memory and copies.

Everything starts lazily: the first call that needs the GPU makes the process's GPU's primary
context current through cuda.core (`Device(GPU).set_current()`), the context torch and CuPy use
too, so pointers and streams pass freely between them. Which GPU that is
(one per process) is process_gpu.py's to say. Modules, functions, copies and launches go
through cuda.bindings' thin driver calls; every CUresult is checked and a failure becomes a
ToolchainError that names the call and carries the driver's own error text.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..abi import CompiledKernel
from ..errors import FearlessError, OutOfMemoryError, ToolchainError
from . import process_gpu
from .target import cuda_status, result_text

_JIT_LOG_BYTES = 16 * 1024

_cu: Any = None  # cuda.bindings.driver, imported on first use
_info: DeviceInfo | None = None
_init_lock = threading.Lock()


@dataclass(frozen=True)
class DeviceInfo:
    """What the launcher needs to know about the GPU, read once."""

    device_id: int
    name: str
    compute_capability: tuple[int, int]
    arch: str  # "sm_90"
    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_grid_dims: tuple[int, int, int]
    sm_count: int
    warp_size: int


@dataclass(frozen=True)
class LoadedKernel:
    """A kernel function resident on the device, ready for cuLaunchKernel."""

    name: str
    entry: str
    function: Any  # cuda.bindings.driver.CUfunction
    handle: int  # the same CUfunction as an integer
    module: Any  # CUmodule; kept here so the function stays valid
    max_threads_per_block: int  # after register allocation: may be below the device's limit
    num_regs: int
    binary: str  # "cubin" or "ptx" (JIT-compiled by the driver at load)
    coarse_function: Any = None  # the thread-coarsened entry (CompiledKernel.coarse_entry)
    fast_function: Any = None  # CompiledKernel.fast_entry, for launches meeting fast_assumes
    fast_coarse_function: Any = None


def cu() -> Any:
    """The cuda.bindings.driver module (imported on first use, not when fearless is imported)."""
    global _cu
    if _cu is None:
        from cuda.bindings import driver

        _cu = driver
    return _cu


def check(result: tuple[Any, ...], what: str, help: str | None = None) -> Any:
    """Unpack a cuda.bindings result tuple, raising ToolchainError when its CUresult is an error."""
    err = result[0]
    if err:
        raise driver_error(err, what, help)
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def driver_error(err: Any, what: str, help: str | None = None) -> FearlessError:
    """The error of a failed driver call `what`: out of memory (E0704, at the user's line), or
    a driver or fearless problem (E0900)."""
    if err == cu().CUresult.CUDA_ERROR_OUT_OF_MEMORY:
        return _out_of_memory(what)
    return ToolchainError(
        f"{what} failed: {result_text(cu(), err)}",
        help=help
        or "this is a driver or fearless problem, not your code: `fearless doctor` "
        "checks the setup; please report it with the message above",
    )


def _out_of_memory(what: str) -> OutOfMemoryError:
    from .arrays import nbytes_text
    from .location import user_location

    try:  # what is left now; the query itself may fail (no context on this thread)
        err, free, total = cu().cuMemGetInfo()
    except Exception:  # a failed query must not hide the error being raised
        err = True
    notes = [] if err else [f"the GPU has {nbytes_text(free)} free of {nbytes_text(total)}"]
    return OutOfMemoryError(
        f"{what} failed: the GPU is out of memory",
        user_location(),
        notes=notes,
        help="free the tensors no longer needed (`del`; torch's caching allocator keeps freed "
        "blocks until `torch.cuda.empty_cache()`), use smaller batches, or see `nvidia-smi` "
        "for other processes holding GPU memory",
    )


def call(what: str, fn: Any, *args: Any) -> Any:
    """Run one driver call and check it; a thread without a current context gets one, once."""
    result = fn(*args)
    if result[0] == cu().CUresult.CUDA_ERROR_INVALID_CONTEXT:
        make_current()
        result = fn(*args)
    return check(result, what)


# --------------------------------------------------------------------------- device and context


def is_initialized() -> bool:
    """Whether this process has touched the GPU yet (nothing to synchronise when it has not)."""
    return _info is not None


def ensure_initialized() -> DeviceInfo:
    """Make the process's GPU's primary context current (once) and return what the launcher
    needs."""
    if _info is not None:
        return _info
    with _init_lock:
        if _info is None:
            _initialise()
    assert _info is not None
    return _info


def device_info() -> DeviceInfo:
    return ensure_initialized()


def make_current() -> None:
    """Bind the primary context to the calling thread (each host thread needs this once)."""
    from cuda.core import Device

    Device(process_gpu.GPU).set_current()


def _initialise() -> None:
    global _info
    usable, reason = cuda_status()
    if not usable:
        raise ToolchainError(
            f"no usable CUDA GPU: {reason}",
            help='run `fearless doctor`, or use the CPU simulator: fl.set_target("sim")',
        )
    index = process_gpu.fix()
    try:
        from cuda.core import Device

        dev = Device(index)
        dev.set_current()
        props = dev.properties
        cc = dev.compute_capability
        _info = DeviceInfo(
            device_id=int(dev.device_id),
            name=str(dev.name),
            compute_capability=(int(cc.major), int(cc.minor)),
            arch=f"sm_{cc.major}{cc.minor}",
            max_threads_per_block=int(props.max_threads_per_block),
            max_block_dims=(
                int(props.max_block_dim_x),
                int(props.max_block_dim_y),
                int(props.max_block_dim_z),
            ),
            max_grid_dims=(
                int(props.max_grid_dim_x),
                int(props.max_grid_dim_y),
                int(props.max_grid_dim_z),
            ),
            sm_count=int(props.multiprocessor_count),
            warp_size=int(props.warp_size),
        )
    except ToolchainError:
        raise
    except Exception as exc:
        raise ToolchainError(
            f"could not start CUDA on GPU {index}: {exc}",
            help="`fearless doctor` checks the driver and GPU",
        ) from exc


def synchronize_context() -> None:
    """Wait for all work on the device (every stream of this context)."""
    d = cu()
    call("cuCtxSynchronize", d.cuCtxSynchronize)


def synchronize_stream(handle: int) -> None:
    d = cu()
    call("cuStreamSynchronize", d.cuStreamSynchronize, d.CUstream(handle))


def order_after_legacy_stream(handle: int) -> None:
    """Make stream `handle` wait for the work queued so far on the legacy default stream."""
    if handle in (0, 1):  # the legacy stream itself
        return
    d = cu()
    flags = int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)
    event = call("cuEventCreate", d.cuEventCreate, flags)
    try:
        call("cuEventRecord", d.cuEventRecord, event, d.CUstream(0))
        call("cuStreamWaitEvent", d.cuStreamWaitEvent, d.CUstream(handle), event, 0)
    finally:
        d.cuEventDestroy(event)


# ----------------------------------------------------------------------------------- kernels


def load_kernel(ck: CompiledKernel) -> LoadedKernel:
    """Load `ck` (its cubin, else its PTX through the driver's JIT) and find its entry point."""
    info = ensure_initialized()
    d = cu()
    module, binary = None, "cubin"
    cubin_error: ToolchainError | None = None
    if ck.cubin:
        try:
            # by address, kept alive; the NUL keeps the driver from reading past non-ELF data
            image = np.frombuffer(ck.cubin + b"\0", dtype=np.uint8)
            module = call(
                f"loading the cubin of `{ck.name}`", d.cuModuleLoadData, image.ctypes.data
            )
        except ToolchainError as exc:  # e.g. built for another arch: the PTX may still JIT
            cubin_error = exc
    if module is None:
        if not ck.ptx:
            assert cubin_error is not None
            raise cubin_error
        module, binary = _load_ptx(ck, info), "ptx"
    fn = call(
        f"finding the entry `{ck.entry}` of `{ck.name}`",
        d.cuModuleGetFunction,
        module,
        ck.entry.encode(),
    )
    attr = d.CUfunction_attribute
    max_threads = call(
        "cuFuncGetAttribute", d.cuFuncGetAttribute, attr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn
    )
    num_regs = call("cuFuncGetAttribute", d.cuFuncGetAttribute, attr.CU_FUNC_ATTRIBUTE_NUM_REGS, fn)
    entries: dict[str, Any] = {}
    for entry in (ck.coarse_entry, ck.fast_entry, ck.fast_coarse_entry):
        if not entry:
            continue
        f = call(
            f"finding the entry `{entry}` of `{ck.name}`",
            d.cuModuleGetFunction,
            module,
            entry.encode(),
        )
        limit = call(
            "cuFuncGetAttribute",
            d.cuFuncGetAttribute,
            attr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            f,
        )
        max_threads = min(int(max_threads), int(limit))  # every variant must take the block
        entries[entry] = f
    return LoadedKernel(
        name=ck.name,
        entry=ck.entry,
        function=fn,
        handle=int(fn),
        module=module,
        max_threads_per_block=int(max_threads),
        num_regs=int(num_regs),
        binary=binary,
        coarse_function=entries.get(ck.coarse_entry or ""),
        fast_function=entries.get(ck.fast_entry or ""),
        fast_coarse_function=entries.get(ck.fast_coarse_entry or ""),
    )


def _load_ptx(ck: CompiledKernel, info: DeviceInfo) -> Any:
    d = cu()
    image = np.frombuffer(ck.ptx.encode() + b"\0", dtype=np.uint8)  # NUL-terminated PTX text
    log = bytearray(_JIT_LOG_BYTES)
    opts = [
        d.CUjit_option.CU_JIT_ERROR_LOG_BUFFER,
        d.CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ]
    result = d.cuModuleLoadDataEx(image.ctypes.data, len(opts), opts, [log, len(log)])
    if result[0] == d.CUresult.CUDA_ERROR_INVALID_CONTEXT:
        make_current()
        result = d.cuModuleLoadDataEx(image.ctypes.data, len(opts), opts, [log, len(log)])
    err = result[0]
    if not err:
        return result[1]
    text = bytes(log).split(b"\0", 1)[0].decode(errors="replace").strip()
    codes = d.CUresult
    if err == codes.CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
        help = (
            "the PTX needs a newer CUDA than this driver supports; update the NVIDIA driver, "
            "or compile for an older PTX ISA"
        )
    elif err == codes.CUDA_ERROR_NO_BINARY_FOR_GPU:
        help = f"the kernel was compiled for {ck.arch} but the GPU is {info.arch}; recompile with FEARLESS_ARCH={info.arch}"
    else:
        help = "the generated PTX did not assemble: this is a fearless bug, please report it"
    raise ToolchainError(
        f"the driver could not JIT-compile the PTX of `{ck.name}` for {info.arch}: "
        f"{result_text(d, err)}",
        notes=[f"ptxas said: {text}"] if text else None,
        help=help,
    )


def ptx_to_cubin(ptx: str | bytes, arch: str) -> bytes | None:
    """Link PTX into a cubin for `arch` (nvJitLink, else the driver's cuLink); None if impossible.

    The cubin lets the disk cache skip the driver's PTX JIT on later runs. Without a GPU this
    still works where nvJitLink is installed; otherwise there is nothing to link with.
    nvJitLink is called through cuda.bindings directly: a fresh process's first compile then
    pays its 0.05 s import, not cuda.core's (0.3 to 0.8 s, most of a SIMT first compile).
    """
    code = ptx.encode() if isinstance(ptx, str) else ptx
    cubin = _nvjitlink(code, arch)
    return cubin if cubin is not None else _culink(code, arch)


def warm_linker() -> None:
    """Load nvJitLink now (its first use dlopens the library: 40 ms), where it is installed."""
    try:
        from cuda.bindings import nvjitlink

        nvjitlink.version()
    except Exception:  # missing: ptx_to_cubin falls back, and says nothing either
        return


def _nvjitlink(code: bytes, arch: str) -> bytes | None:
    """The cubin nvJitLink makes of PTX `code`; None where nvJitLink is missing or refuses."""
    try:
        from cuda.bindings import nvjitlink
    except ImportError:
        return None
    try:
        handle = nvjitlink.create(1, [f"-arch={arch}"])
    except Exception:  # no libnvJitLink to load (cuda-bindings without the nvJitLink wheel)
        return None
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, code, len(code), "fearless")
        nvjitlink.complete(handle)
        out = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, out)
    except Exception:  # a link error: the driver's JIT will say why when the PTX is loaded
        return None
    finally:
        nvjitlink.destroy(handle)
    return bytes(out) or None


def _culink(code: bytes, arch: str) -> bytes | None:
    """The cubin of PTX `code` through cuda.core's Linker (the driver's cuLink where nvJitLink
    is missing); None if impossible."""
    try:
        from cuda.core import Linker, LinkerOptions, ObjectCode
    except ImportError:
        return None
    try:
        if cuda_status()[0]:
            ensure_initialized()  # the driver's cuLink backend needs a current context
        with warnings.catch_warnings():  # "falling back to the driver" notices from cuda.core
            warnings.simplefilter("ignore")
            linker = Linker(ObjectCode.from_ptx(code), options=LinkerOptions(arch=arch))
            try:
                out = linker.link("cubin")
            finally:
                linker.close()
        cubin = out.code
    except Exception:
        return None
    return bytes(cubin) if cubin else None


# ------------------------------------------------------------------------------------ memory


class DeviceAllocation:
    """An owning block of device memory (cuMemAlloc), freed with cuMemFree when collected.

    Synchronous allocation, not the stream-ordered pool: the block is valid on every stream as
    soon as this returns (torch's non-blocking streams included), and cuMemFree does not race
    with kernels still reading it. The block goes back through the driver that allocated it:
    the tests swap in a fake driver per test, and a block collected under the next one's would
    free whatever block of that one has the same address.
    """

    __slots__ = ("__weakref__", "_free", "nbytes", "ptr")

    def __init__(self, nbytes: int) -> None:
        self.ptr = 0
        self.nbytes = nbytes
        ensure_initialized()
        d = cu()
        self._free = d.cuMemFree
        self.ptr = int(call(f"allocating {nbytes} bytes on the GPU", d.cuMemAlloc, max(nbytes, 1)))

    def __del__(self) -> None:
        if self.ptr and _cu is not None:
            with contextlib.suppress(Exception):  # at shutdown the driver may already be gone
                self._free(self.ptr)
            self.ptr = 0

    def __repr__(self) -> str:
        return f"DeviceAllocation(ptr=0x{self.ptr:x}, nbytes={self.nbytes})"


def copy_host_to_device(dst: int, src: np.ndarray) -> None:
    """Copy a C-contiguous host array to device address `dst` (ordered on the legacy stream)."""
    if src.nbytes:
        d = cu()
        call("cuMemcpyHtoD", d.cuMemcpyHtoD, dst, src.ctypes.data, src.nbytes)


def copy_device_to_host(dst: np.ndarray, src: int) -> None:
    """Copy device bytes at `src` into a C-contiguous host array (waits for the legacy stream)."""
    if dst.nbytes:
        d = cu()
        call("cuMemcpyDtoH", d.cuMemcpyDtoH, dst.ctypes.data, src, dst.nbytes)


def copy_device_to_device(dst: int, src: int, nbytes: int) -> None:
    if nbytes:
        d = cu()
        call("cuMemcpyDtoD", d.cuMemcpyDtoD, dst, src, nbytes)


def fill(ptr: int, pattern: int, itemsize: int, count: int) -> None:
    """Set `count` elements of 1, 2 or 4 bytes at `ptr` to the bit pattern `pattern`."""
    if count == 0:
        return
    d = cu()
    fn = {1: d.cuMemsetD8, 2: d.cuMemsetD16, 4: d.cuMemsetD32}[itemsize]
    call("cuMemset", fn, ptr, pattern, count)
