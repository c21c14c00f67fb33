"""What an array argument is: pointer, byte extent, shape, dtype, and where its memory lives.

`describe(obj, target)` accepts, fastest first: `fl.Tensor`, `torch.Tensor` (read straight from
its accessors), NumPy arrays, then anything with `__cuda_array_interface__` or `__dlpack__`
(parsed by cuda.core's `StridedMemoryView`). The "cuda" target needs device memory, "sim" host
memory; SIMT kernels take C-contiguous arrays of the rank their parameter declares (1 or 2).
Every refusal is a KernelTypeError that says how to fix the call (a DeviceError, E0702, for an
array on another GPU than the one fearless runs on).

`launch_extractor(type)` is the warm-launch form: one small function per argument type, cached,
returning `(ptr, length, dtype)` or None (then `describe` explains what is wrong);
`launch_extractor_2d(type)` the same for 2-D parameters, returning `(ptr, rows, cols, dtype)`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import DType
from ..errors import KernelTypeError
from . import process_gpu
from .devices import gpu_taken_error
from .location import argument_error
from .target import Target

Extracted = tuple[int, int, DType]
Extractor = Callable[[Any], "Extracted | None"]
Extracted2D = tuple[int, int, int, DType]
Extractor2D = Callable[[Any], "Extracted2D | None"]


@dataclass(frozen=True, slots=True)
class ArrayInfo:
    """One array argument. Strides are in bytes; `host` is the NumPy view of host memory."""

    ptr: int
    nbytes: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: DType
    on_device: bool
    owner: Any = field(repr=False)  # keeps the memory alive while this description is used
    host: np.ndarray | None = field(default=None, repr=False)
    # an fl.Tensor's device (runtime/devices.py); None: memory that follows the launch (NumPy
    # on sim; on cuda every array is on the process's GPU, process_gpu.GPU, checked where it
    # is described)
    device: int | None = None

    @property
    def size(self) -> int:
        return self.nbytes // self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def contiguous(self) -> bool:
        return is_c_contiguous(self.shape, self.strides, self.dtype.itemsize)


def describe(
    obj: Any,
    target: Target,
    *,
    name: str = "array",
    ndim: int | None = 1,
    stream: int | None = None,
) -> ArrayInfo:
    """Describe an array argument for `target`, requiring `ndim` dimensions (None: any).

    `stream` is the consumer stream for the generic protocols (DLPack and CUDA Array Interface
    producers order their pending work before it); None asks for no ordering.
    """
    info = _describe_any(obj, target, name, stream)
    if target.on_device and not info.on_device:
        raise argument_error(
            f"argument `{name}` is in host memory, but the cuda target needs device memory",
            "copy it to the GPU first: `fl.asarray(x)` or `torch.from_numpy(x).cuda()`",
        )
    if not target.on_device and info.on_device:
        raise argument_error(
            f"argument `{name}` is in GPU memory, but the target is the CPU simulator",
            'pass a host array (`x.cpu()`, `x.get()`), or run on the GPU: fl.set_target("cuda")',
        )
    if not info.contiguous:
        raise argument_error(
            f"argument `{name}` is not contiguous (shape {info.shape}, strides {info.strides} bytes)",
            contiguous_help(obj),
        )
    if info.ptr % info.dtype.itemsize and info.nbytes:
        off = info.ptr % info.dtype.itemsize
        raise argument_error(
            f"argument `{name}` is misaligned: its address is {off} byte{'s' if off > 1 else ''} "
            f"past a multiple of {info.dtype.itemsize}, the size of its {info.dtype} elements, "
            "which kernels load whole",
            "pass an aligned copy: "
            + (
                "`x.copy()` (a kernel writes the copy: copy the results back with `x[...] = copy`)"
                if isinstance(obj, np.ndarray)
                else "`x.clone()`"
                if _is_torch_tensor(obj)
                else "a copy made by the library the array comes from"
            ),
        )
    if ndim is not None and info.ndim != ndim:
        raise argument_error(
            f"argument `{name}` has {info.ndim} dimension{'s' if info.ndim != 1 else ''}, "
            f"but kernels take {ndim}-D arrays for `{name}`",
            "flatten it: `x.reshape(-1)` (a view of the same memory when contiguous)"
            if ndim == 1
            else f"reshape it: `x.reshape(rows, cols)`, or give the parameter {info.ndim} axes "
            f"(`simt.Slice[T, {info.ndim}]`, and so for DisjointSlice and AtomicSlice) if the "
            f"kernel can take {info.ndim}-D arrays",
        )
    return info


def contiguous_help(obj: Any) -> str:
    """How to make a contiguous copy of `obj`, in the words of its own library."""
    if _is_torch_tensor(obj):
        return "pass a contiguous copy: `x.contiguous()`"
    if isinstance(obj, np.ndarray):
        return (
            "pass a contiguous copy: `np.ascontiguousarray(x)` (a kernel writes the copy: "
            "copy the results back with `x[...] = copy`)"
        )
    if type(obj).__module__.split(".")[0] == "cupy":
        return "pass a contiguous copy: `cupy.ascontiguousarray(x)`"
    return "pass a contiguous copy of the array (made by the library the array comes from)"


def nbytes_text(nbytes: int) -> str:
    """A byte count for a message: exact, and in the largest binary unit that fits."""
    size, unit = float(nbytes), "bytes"
    for name in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if size < 1024:
            break
        size, unit = size / 1024, name
    exact = f"{nbytes:,} bytes"
    return exact if unit == "bytes" else f"{exact} ({size:,.1f} {unit})"


def is_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    if 0 in shape:  # no elements: any strides (NumPy gives an empty array zero strides)
        return True
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides), strict=True):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def as_dtype(value: Any) -> DType:
    """A DType from a DType, NumPy dtype or scalar type, torch dtype, Python type, or name
    ("f32", "float32")."""
    if value is dtypes.tf32 or (isinstance(value, str) and value == "tf32"):
        raise argument_error(
            "tf32 is a tile type (the tensor cores' f32 input), not an element type of tensors",
            "keep the data f32 and convert tiles in the kernel: `x.astype(fl.tf32)`",
        )
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in dtypes.BY_NAME:
        return dtypes.BY_NAME[value]
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.dtype):
        if (found := torch_dtype(value)) is not None:
            return found
        raise argument_error(
            f"{value} is not a fearless dtype",
            "use torch.bool, int8 ... int64, uint8 ... uint64, float16, bfloat16, float32, "
            "float64, float8_e4m3fn or float8_e5m2",
        )
    if value is int or value is float or value is bool:  # not `in`: np.dtype("int64") == int
        found = dtypes.from_python_type(value)
        assert found is not None
        return found
    return _from_numpy_dtype(
        value,
        f"{value!r} is not a fearless dtype",
        "use fl.bool_, fl.i8 ... fl.i64, fl.u8 ... fl.u64, fl.f16, fl.bf16, fl.f32, fl.f64, "
        "fl.f8e4m3fn or fl.f8e5m2",
    )


def _from_numpy_dtype(value: Any, message: str, help: str) -> DType:
    """The DType of what `np.dtype` makes of `value`; a KernelTypeError saying `message`."""
    try:
        return numpy_dtype(np.dtype(value))
    except (TypeError, KeyError, ValueError):  # ValueError: an array-like NumPy cannot read
        raise argument_error(message, help) from None


def numpy_dtype(dt: np.dtype[Any]) -> DType:
    """The DType of a NumPy dtype (ml_dtypes' bfloat16 and 8-bit floats included); KeyError when
    there is none."""
    raw = dtypes.BY_ML_NAME.get(dt.name)
    return raw if raw is not None else dtypes.from_numpy(dt)


# ---------------------------------------------------------------------------------- describing


def _is_fl_tensor(tp: type) -> bool:
    """Whether `tp` is `fl.Tensor` (or a subclass), known by its marker: tensor.py builds on
    this module, so this module does not import it."""
    return getattr(tp, "__fearless_tensor__", False) is True


def _describe_any(obj: Any, target: Target, name: str, stream: int | None) -> ArrayInfo:
    if _is_fl_tensor(type(obj)):
        return obj._array_info()
    if _is_torch_tensor(obj):
        return _torch_info(obj, name)
    if isinstance(obj, np.ndarray):
        return _numpy_info(obj, name, owner=obj)
    if hasattr(obj, "__cuda_array_interface__") or hasattr(obj, "__dlpack__"):
        if _dlpack_on_host(obj):
            return _numpy_info(np.from_dlpack(obj), name, owner=obj)
        return _view_info(obj, name, stream)
    if hasattr(obj, "__array_interface__"):
        return _numpy_info(np.asarray(obj), name, owner=obj)
    raise argument_error(
        f"argument `{name}` of type `{type(obj).__name__}` is not an array",
        "pass an fl.Tensor, a torch tensor, a NumPy array (on the sim target), or any array "
        "with `__dlpack__` or `__cuda_array_interface__`",
    )


def _numpy_info(a: np.ndarray, name: str, owner: Any) -> ArrayInfo:
    dtype = _element_type(a.dtype, name)
    return ArrayInfo(
        ptr=int(a.__array_interface__["data"][0]),
        nbytes=int(a.nbytes),
        shape=tuple(a.shape),
        strides=tuple(a.strides),
        dtype=dtype,
        on_device=False,
        owner=owner,
        # ml_dtypes' bfloat16 and 8-bit floats are stored as their raw bits, as DType.np says
        host=a.view(dtype.np) if a.dtype.name in dtypes.BY_ML_NAME else a,
    )


def _element_type(dt: Any, name: str) -> DType:
    if not getattr(dt, "isnative", True):  # a byte order not the machine's: kernels read native
        raise argument_error(
            f"argument `{name}` has element type {dt}, in a byte order other than this "
            "machine's, which kernels do not read",
            f"convert it to the native order: `{name}.astype({name}.dtype.newbyteorder('='))`",
        )
    return _from_numpy_dtype(
        dt,
        f"argument `{name}` has element type {dt}, which fearless has no type for",
        "convert it to bool, i8..i64, u8..u64, f16, bf16, f32, f64, f8e4m3fn or f8e5m2",
    )


def _dlpack_on_host(obj: Any) -> bool:
    device = getattr(obj, "__dlpack_device__", None)
    if device is None or hasattr(obj, "__cuda_array_interface__"):
        return False
    return int(device()[0]) in (1, 3)  # kDLCPU, kDLCUDAHost (pinned)


def _view_info(obj: Any, name: str, stream: int | None) -> ArrayInfo:
    """DLPack / CUDA Array Interface producers, through cuda.core's StridedMemoryView."""
    from cuda.core.utils import StridedMemoryView

    # -1 asks for no stream ordering; the legacy default stream is handle 1 in both protocols.
    consumer = -1 if stream is None else (1 if stream == 0 else stream)
    make = getattr(StridedMemoryView, "from_any_interface", StridedMemoryView)
    try:
        view = make(obj, stream_ptr=consumer)
        dt = view.dtype
    except (BufferError, NotImplementedError, TypeError, ValueError) as exc:
        raise argument_error(
            f"argument `{name}` could not be read as an array: {exc}",
            "pass an fl.Tensor, a torch tensor, or an array with `__dlpack__` or "
            "`__cuda_array_interface__` and a fearless element type",
        ) from None
    dtype = _element_type(dt, name)
    shape = tuple(int(s) for s in view.shape)
    itemsize = dtype.itemsize
    if view.strides is None:
        strides = _c_strides(shape, itemsize)
    else:
        strides = tuple(int(s) * itemsize for s in view.strides)
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if view.is_device_accessible and int(view.device_id) >= 0:
        _check_gpu(name, int(view.device_id))
    return ArrayInfo(
        ptr=int(view.ptr),
        nbytes=size * itemsize,
        shape=shape,
        strides=strides,
        dtype=dtype,
        on_device=bool(view.is_device_accessible) and int(view.device_id) >= 0,
        owner=view,
    )


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    out: list[int] = []
    step = itemsize
    for extent in reversed(shape):
        out.append(step)
        step *= max(extent, 1)
    return tuple(reversed(out))


# ------------------------------------------------------------------------------------- torch

_torch_dtypes: dict[Any, DType] = {}


def _is_torch_tensor(obj: Any) -> bool:
    torch = sys.modules.get("torch")  # never import torch ourselves: it takes seconds
    return torch is not None and isinstance(obj, torch.Tensor)


def torch_dtype(dt: Any) -> DType | None:
    if not _torch_dtypes:
        torch = sys.modules["torch"]
        names = {
            "bool": dtypes.bool_, "int8": dtypes.i8, "int16": dtypes.i16, "int32": dtypes.i32,
            "int64": dtypes.i64, "uint8": dtypes.u8, "uint16": dtypes.u16, "uint32": dtypes.u32,
            "uint64": dtypes.u64, "float16": dtypes.f16, "bfloat16": dtypes.bf16,
            "float32": dtypes.f32, "float64": dtypes.f64, "float8_e4m3fn": dtypes.f8e4m3fn,
            "float8_e5m2": dtypes.f8e5m2,
        }  # fmt: skip
        for attr, dtype in names.items():
            if hasattr(torch, attr):  # uint16..uint64 arrived in torch 2.3
                _torch_dtypes[getattr(torch, attr)] = dtype
    return _torch_dtypes.get(dt)


def torch_dtype_of(dtype: DType) -> Any | None:
    """The torch dtype whose DType is `dtype` (None: torch not loaded, or it has none)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    torch_dtype(torch.float32)  # fills the table
    for tdt, d in _torch_dtypes.items():
        if d is dtype:
            return tdt
    return None


def lazy_view_error(t: Any, what: str, name: str) -> KernelTypeError | None:
    """E0701 for torch tensor `t` (`what` names it: "argument `x`") where it is a lazy
    negation or conjugation view (`torch.conj(z).imag`, `torch._neg_view`): torch keeps the
    values before the negation in its memory and a bit that says to negate them on reading,
    which a kernel reading the memory would not; None for any other tensor. torch's own
    `.numpy()` refuses such a tensor too."""
    if t.is_neg():
        bit, view, made, resolve = "negative", "negation", "torch.conj(z).imag", "resolve_neg"
    elif t.is_conj():
        bit, view, made, resolve = "conjugate", "conjugation", "torch.conj(z)", "resolve_conj"
    else:
        return None
    return argument_error(
        f"{what} is a torch tensor with its {bit} bit set (a lazy {view} view, as `{made}` "
        f"is): its memory holds the values before the {view}, which a kernel would read as "
        "they are",
        f"pass `{name}.{resolve}()`, whose memory holds the values themselves",
    )


def torch_data_ptr(t: Any) -> int:
    """The address of torch tensor `t`'s first element as torch itself holds it: a subclass
    may override `data_ptr` or answer it in `__torch_function__`, neither of which moves the
    memory a kernel writes."""
    torch = sys.modules["torch"]
    with torch._C.DisableTorchFunctionSubclass():
        return int(torch.Tensor.data_ptr(t))


def torch_grad_leaf_error(t: Any, what: str) -> KernelTypeError | None:
    """E0701 where a kernel would write torch tensor `t` (`what` names it), a leaf that
    requires grad or a view of one, while grad mode is on: torch refuses an in-place op on
    either, since autograd would not see the write; None otherwise (no_grad, as an
    optimizer's step, writes it)."""
    torch = sys.modules["torch"]
    if not (t.requires_grad and torch.is_grad_enabled()):
        return None
    base = t._base
    if t.is_leaf:
        kind = "a torch leaf tensor"
    elif base is not None and base.is_leaf and base.requires_grad:
        kind = "a view of a torch leaf tensor"
    else:
        return None
    return argument_error(
        f"{what} is {kind} that requires grad, which a kernel would write: torch refuses "
        f"this ({'' if t.is_leaf else 'a view of '}a leaf Variable that requires grad "
        "is being used in an in-place operation), as autograd would not see the write",
        "write it under `with torch.no_grad():` (as an optimizer's step does), or write a new "
        "tensor (`torch.empty_like(x)`) and use that",
    )


def torch_write(obj: Any, what: str) -> Any:
    """The torch tensor whose memory a kernel writing `obj` changes (None: not torch's), once
    autograd's rule allows the write: E0701 (torch_grad_leaf_error) for a leaf that requires
    grad, in grad mode. The GPU launchers ask this of each output, as the simulator does, and
    bump the versions of what it returns after the launch (`bump_versions`)."""
    t = torch_written(obj)
    if t is not None and t.requires_grad:
        error = torch_grad_leaf_error(t, what)
        if error is not None:
            raise error
    return t


def bump_versions(tensors: Sequence[Any]) -> None:
    """A kernel wrote these torch tensors behind autograd's back: bump their version counters,
    as an in-place op does, so that a backward that saved one refuses its stale copy. Called
    with a tuple or list (torch's counter update reads a single tensor as a sequence of rows)."""
    global _bump
    if _bump is None:
        torch = sys.modules["torch"]
        # torch.autograd.graph.increment_version's own call, without its wrapper (0.12 us
        # against 0.26 for a tuple on this machine's CPU, 2026-12-07); the wrapper where a
        # torch has no such function
        _bump = getattr(torch._C, "_increment_version", None) or (
            torch.autograd.graph.increment_version
        )
    _bump(tensors)


_bump: Callable[[Sequence[Any]], None] | None = None


def torch_written(owner: Any) -> Any:
    """The torch tensor whose memory `owner` (an argument, an ArrayInfo's owner) is, or None:
    a torch tensor itself, the one an fl.Tensor wraps (through fl.Tensors over fl.Tensors), or
    the one a NumPy array is a view of (`t.numpy()`, which is what an fl.Tensor of a CPU
    tensor holds on "sim")."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    while True:
        if isinstance(owner, np.ndarray):  # a view (of a view) of torch's array: its base
            owner = owner.base
        elif _is_fl_tensor(type(owner)):  # an fl.Tensor's memory (another's, for a view)
            owner = owner._owner
        else:
            return owner if isinstance(owner, torch.Tensor) else None


def _torch_info(t: Any, name: str) -> ArrayInfo:
    torch = sys.modules["torch"]
    if t.layout is not torch.strided or t.is_nested:
        kind = "nested" if t.is_nested else f"{t.layout} (sparse)".replace("torch.", "")
        raise argument_error(
            f"argument `{name}` is a {kind} torch tensor, but kernels take dense (strided) arrays",
            "pass a dense copy: `x.to_dense()` (a nested tensor: `x.to_padded_tensor(0)`, or "
            "its `values()`)",
        )
    if (lazy := lazy_view_error(t, f"argument `{name}`", name)) is not None:
        raise lazy
    dtype = torch_dtype(t.dtype)
    if dtype is None:
        raise argument_error(
            f"argument `{name}` has element type {t.dtype}, which fearless has no type for",
            "convert it with `.to(torch.float32)` (or another supported type)",
        )
    device = t.device
    if device.type not in ("cuda", "cpu"):
        raise argument_error(
            f"argument `{name}` lives on torch device `{device}`",
            "move it to the GPU (`.cuda()`) or, for the simulator, to the CPU (`.cpu()`)",
        )
    on_device = device.type == "cuda"
    if on_device:
        _check_gpu(name, device.index or 0)
    itemsize = dtype.itemsize
    host = None
    if not on_device:
        detached = t.detach()
        if dtype.is_raw:  # NumPy has no bfloat16 nor fp8: the raw bits, as DType.np says
            detached = detached.view(torch.int16 if dtype is dtypes.bf16 else torch.uint8)
        host = detached.numpy().view(dtype.np)
    return ArrayInfo(
        # host memory: the address of what the simulator reads and writes, whatever the
        # tensor's accessors say; device memory: torch's own accessor, not an override
        ptr=torch_data_ptr(t) if host is None else int(host.__array_interface__["data"][0]),
        nbytes=int(t.numel()) * itemsize,
        shape=tuple(int(s) for s in t.shape),
        strides=tuple(int(s) * itemsize for s in t.stride()),
        dtype=dtype,
        on_device=on_device,
        owner=t,
        host=host,
    )


def _check_gpu(name: str, index: int) -> None:
    """An argument on GPU `index` must be on the process's GPU (process_gpu.py), which it fixes
    when fearless has not used the GPU yet; else E0702 (runtime/devices.py)."""
    if not process_gpu.choose(index, fixed=True):
        raise gpu_taken_error(f"argument `{name}` is on GPU {index}", index)


# ------------------------------------------------------------------------- warm-launch extractors

_MISSING: Any = object()  # a type not looked at yet (None is a cached "no fast reader")
_extractors: dict[type, Extractor | None] = {}


def launch_extractor(tp: type) -> Extractor | None:
    """The cached fast reader of a 1-D device array of type `tp` (cuda target), or None."""
    readers = (_extract_tensor, (_extract_torch, _extract_torch_subclass), _extract_generic)
    return _cached(_extractors, tp, readers)  # type: ignore[no-any-return]


def _cached(cache: dict[type, Any], tp: type, readers: tuple[Any, Any, Any]) -> Any:
    found = cache.get(tp, _MISSING)
    if found is _MISSING:
        found = cache[tp] = _extractor_for(tp, readers)
    return found


def _extractor_for(tp: type, readers: tuple[Any, Any, Any]) -> Any:
    """Of (fl.Tensor's, torch's (torch.Tensor's, a subclass's), the generic protocols')
    `readers`, the one for type `tp`; None for NumPy arrays (host memory: `describe` says what
    to do instead) and non-arrays."""
    tensor, (torch, torch_subclass), generic = readers
    if _is_fl_tensor(tp):
        return tensor
    if "torch" in sys.modules and issubclass(tp, sys.modules["torch"].Tensor):
        return torch if tp is sys.modules["torch"].Tensor else torch_subclass
    if issubclass(tp, np.ndarray):
        return None
    if hasattr(tp, "__cuda_array_interface__") or hasattr(tp, "__dlpack__"):
        return generic
    return None


def _extract_tensor(t: Any) -> Extracted | None:
    return (t._ptr, t._size, t._dtype) if t._dev1d else None


def _extract_torch(t: Any) -> Extracted | None:
    # `is_cuda` first: get_device() is -1 on the CPU but 0 on other devices (MPS, XPU ...).
    # torch's `is_contiguous()` is the C-contiguity of is_c_contiguous (extent-1 axes and
    # empty tensors pass), read from a flag torch keeps, cheaper than a stride() call.
    shape = t.shape
    if (
        len(shape) != 1
        or not t.is_cuda
        or t.get_device() != process_gpu.GPU
        or not t.is_contiguous()
    ):
        return None
    n = shape[0]
    dtype = _torch_dtypes.get(t.dtype) or torch_dtype(t.dtype)
    if dtype is None:
        return None
    return t.data_ptr(), n, dtype


def _extract_torch_subclass(t: Any) -> Extracted | None:
    """`_extract_torch` for a torch.Tensor subclass, whose `data_ptr` may be overridden."""
    got = _extract_torch(t)
    return None if got is None else (torch_data_ptr(t), got[1], got[2])


def _extract_generic(obj: Any) -> Extracted | None:
    try:
        info = describe(obj, Target.CUDA)
    except KernelTypeError:
        return None
    return info.ptr, info.shape[0], info.dtype


_extractors_2d: dict[type, Extractor2D | None] = {}


def launch_extractor_2d(tp: type) -> Extractor2D | None:
    """The cached fast reader of a C-contiguous 2-D device array of type `tp`, or None."""
    readers = (
        _extract_tensor_2d,
        (_extract_torch_2d, _extract_torch_subclass_2d),
        _extract_generic_2d,
    )
    return _cached(_extractors_2d, tp, readers)  # type: ignore[no-any-return]


def _extract_tensor_2d(t: Any) -> Extracted2D | None:
    shape = t._shape
    if len(shape) != 2 or not t._on_device or t._moved is not None:
        return None
    return t._ptr, shape[0], shape[1], t._dtype


def _extract_torch_2d(t: Any) -> Extracted2D | None:
    shape = t.shape
    if (
        len(shape) != 2
        or not t.is_cuda
        or t.get_device() != process_gpu.GPU
        or not t.is_contiguous()
    ):
        return None
    rows, cols = shape
    dtype = _torch_dtypes.get(t.dtype) or torch_dtype(t.dtype)
    if dtype is None:
        return None
    return t.data_ptr(), rows, cols, dtype


def _extract_torch_subclass_2d(t: Any) -> Extracted2D | None:
    """`_extract_torch_2d` for a torch.Tensor subclass, whose `data_ptr` may be overridden."""
    got = _extract_torch_2d(t)
    return None if got is None else (torch_data_ptr(t), got[1], got[2], got[3])


def _extract_generic_2d(obj: Any) -> Extracted2D | None:
    try:
        info = describe(obj, Target.CUDA, ndim=2)
    except KernelTypeError:
        return None
    return info.ptr, info.shape[0], info.shape[1], info.dtype
