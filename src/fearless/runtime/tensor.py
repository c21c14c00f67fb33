"""`fl.Tensor`: fearless's own owning array, and its constructors (`fl.empty/zeros/ones/full`,
`fl.arange/asarray/from_numpy`; their `*_like` forms are in tensor_like.py).

A Tensor lives where the target runs kernels: in GPU memory on "cuda" (cuMemAlloc'd, or
borrowed from a torch/CuPy/DLPack array without copying), in a NumPy array on "sim". Wrapping
never copies when the memory already lives there, so two wrappers of one buffer share it and
the launch-time borrow check sees the overlap. Device tensors speak `__cuda_array_interface__`
and `__dlpack__`, so torch, CuPy and JAX take them without copies too.

`copy.copy(t)` is `t` itself (a handle, not new memory), `copy.deepcopy(t)` a new tensor with
a copy of the data, and pickling goes by value, as torch's tensors do; all three refuse a moved
tensor (E0382).
"""

from __future__ import annotations

import ast
import linecache
import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import DType
from ..errors import KernelTypeError, Location, OutOfMemoryError
from . import devices, driver, streams
from .arrays import (
    ArrayInfo,
    as_dtype,
    bump_versions,
    describe,
    nbytes_text,
    torch_write,
    torch_written,
)
from .location import argument_error, check_not_moved, user_location
from .params import bf16_bits
from .partition import Grouped, Partition, RowMajor, partition
from .target import Target, current_target

Shape = int | Sequence[int]

_KDL_CPU, _KDL_CUDA = 1, 2


class Tensor:
    """A dense, C-contiguous array on the current target. Create it with `fl.empty` and friends."""

    __fearless_tensor__ = True  # what arrays.py recognises an fl.Tensor by
    __slots__ = (
        "__weakref__",
        "_dev1d",
        "_device",
        "_dtype",
        "_host",
        "_moved",
        "_nbytes",
        "_on_device",
        "_owner",
        "_ptr",
        "_shape",
        "_size",
    )

    _ptr: int
    _shape: tuple[int, ...]
    _size: int
    _dtype: DType
    _nbytes: int
    _on_device: bool
    _owner: Any
    _host: np.ndarray | None
    _moved: Location | None
    _dev1d: bool
    _device: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise argument_error(
            "fl.Tensor is not constructed directly",
            help="create one with fl.empty, fl.zeros, fl.full, fl.arange or fl.asarray "
            "(from NumPy, torch or anything with __array__ or __dlpack__)",
        )

    @classmethod
    def _make(
        cls,
        ptr: int,
        shape: tuple[int, ...],
        dtype: DType,
        *,
        on_device: bool,
        owner: Any,
        host: np.ndarray | None = None,
        device: int = 0,
    ) -> Tensor:
        t = object.__new__(cls)
        t._ptr = ptr
        t._shape = shape
        t._size = math.prod(shape)
        t._dtype = dtype
        t._nbytes = t._size * dtype.itemsize
        t._on_device = on_device
        t._owner = owner  # the allocation, or the foreign array whose memory this is
        t._host = host
        t._moved = None
        t._dev1d = on_device and len(shape) == 1  # what a warm launch asks (arrays.py)
        t._device = device
        return t

    # ------------------------------------------------------------------------- properties

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def size(self) -> int:
        return self._size

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def nbytes(self) -> int:
        return self._nbytes

    @property
    def target(self) -> str:
        """Where the memory lives: "cuda" (GPU) or "sim" (host)."""
        return "cuda" if self._on_device else "sim"

    @property
    def device(self) -> int:
        """The index of the device the memory is on (runtime/devices.py): the GPU's on "cuda",
        a pretend device's on "sim"."""
        return self._device

    @property
    def data_ptr(self) -> int:
        """The address of element 0 (device or host)."""
        return self._ptr

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    # ------------------------------------------------------------------------- host access

    def numpy(self) -> np.ndarray:
        """The data as a NumPy array: the shared host array on sim, a fresh copy from the GPU.
        bf16 comes back as ml_dtypes' `bfloat16` (real floats over the same 16-bit storage), the
        8-bit floats as its `float8_e4m3fn` / `float8_e5m2`.

        On the GPU this first waits for launched work and raises any pending device error, so
        the numbers returned are never the output of a kernel that failed a bounds check.
        """
        self._check_live()
        if self._host is not None:
            if streams._captures:  # the GPU's read synchronises: refused inside `fl.graph`
                streams.refuse_in_sim_capture("reading a tensor back (`Tensor.numpy()`)")
            return public_view(self._host, self._dtype)
        from .device_errors import synchronize

        synchronize()
        out = np.empty(self._shape, dtype=self._dtype.np)
        driver.copy_device_to_host(out, self._ptr)
        return public_view(out, self._dtype)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self.numpy()
        if dtype is not None and np.dtype(dtype) != out.dtype:
            return out.astype(dtype)
        return out.copy() if copy and self._host is not None else out

    def _array_info(self) -> ArrayInfo:
        self._check_live()
        itemsize = self._dtype.itemsize
        strides = tuple(itemsize * math.prod(self._shape[i + 1 :]) for i in range(len(self._shape)))
        return ArrayInfo(
            self._ptr, self._nbytes, self._shape, strides, self._dtype,
            self._on_device, self, self._host, self._device,
        )  # fmt: skip

    # ---------------------------------------------------------------------------- moves

    def partition(
        self, shape: int | Sequence[int], order: Grouped | RowMajor | None = None
    ) -> Partition[Tensor]:
        """Move this tensor into disjoint tiles of `shape` for Tile kernels (`tile.Part`), in
        `order` (the grid's, `tile.grouped(n)` for a 2-D GEMM output, or `tile.row_major()`).

        The handle is consumed: using it raises MovedError until `unpartition()` gives the
        tensor back, or, as `with t.partition(shape) as tp:`, until the block ends. See
        `fearless.tile.Partition`.
        """
        if "torch" in sys.modules:  # a torch tensor's memory: autograd's rules too
            torch_write(self, "the tensor partitioned")
        return partition(self, shape, order)

    def _mark_moved(self, where: Location | None) -> None:
        """Consume this handle (a partition took the memory); any use now raises MovedError."""
        self._moved = where or Location("<unknown>", 0, 0)
        self._dev1d = False

    def _unmove(self) -> None:
        self._moved = None
        self._dev1d = self._on_device and len(self._shape) == 1
        if "torch" in sys.modules and (owner := torch_written(self)) is not None:
            # a partition wrote torch's memory behind autograd's back: as an in-place op would,
            # bump its version, so that a backward that saved it refuses to use it
            bump_versions((owner,))

    # ------------------------------------------------------------------- copy and pickle

    def __copy__(self) -> Tensor:
        """The same tensor: a handle to the same memory, moved when it is (a second handle
        that stayed live through a move would defeat it)."""
        self._check_live(copying=True)
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        """A new tensor of the same shape, dtype, target and device with a copy of the data."""
        self._check_live(copying=True)
        copied = self.astype(self._dtype)
        memo[id(self)] = copied
        return copied

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickled by value, as torch's tensors are: the data (from the GPU too) and dtype;
        unpickled onto the current target, on the same device index."""
        self._check_live(copying=True)
        return (_unpickle, (storage_view(self.numpy()), self._dtype, self._device))

    def _check_live(self, copying: bool = False) -> None:
        check_not_moved(
            self._moved,
            "use of a moved tensor: it was moved into a partition",
            "the tensor moved at",
            "use the tensor `unpartition()` gives back instead of the old handle, or partition "
            "it in a `with` block (`with z.partition(...) as zp:`) and use `z` after the block",
            copying,
        )

    # ---------------------------------------------------------------------- interchange

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if not self._on_device:
            raise AttributeError("a host (sim) tensor has no __cuda_array_interface__")
        if self._dtype.is_raw:
            raise AttributeError(
                f"{self._dtype} has no __cuda_array_interface__ type string; use DLPack"
            )
        self._check_live()
        return {
            "shape": self._shape,
            "typestr": self._dtype.np.str,
            "data": (self._ptr, False),
            "version": 3,
            "strides": None,
            # fearless allocates, fills and copies on the legacy default stream (handle 1 in
            # this protocol): a consumer on another stream must wait for it.
            "stream": 1,
        }

    def __dlpack_device__(self) -> tuple[int, int]:
        return (
            (_KDL_CUDA, driver.ensure_initialized().device_id) if self._on_device else (_KDL_CPU, 0)
        )

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        self._check_live()
        if self._dtype.is_raw:
            raise BufferError(f"fl.Tensor cannot export {self._dtype} through DLPack yet")
        kwargs: dict[str, Any] = {}
        if max_version is not None:
            kwargs["max_version"] = max_version
        if dl_device is not None:
            kwargs["dl_device"] = dl_device
        if copy is not None:
            kwargs["copy"] = copy
        if self._host is not None:
            return self._host.__dlpack__(**kwargs)
        if stream is not None and stream not in (-1, 1):  # the consumer's own stream waits
            driver.order_after_legacy_stream(stream)
        from cuda.core import Buffer
        from cuda.core.utils import StridedMemoryView

        buf = Buffer.from_handle(self._ptr, self._nbytes, owner=self)
        view = StridedMemoryView.from_buffer(buf, self._shape, dtype=self._dtype.np)
        return view.__dlpack__(**kwargs)

    def astype(self, dtype: Any) -> Tensor:
        """A copy converted to `dtype`, on this tensor's own target (NumPy's `astype`).

        Floats to integers truncate toward zero, as NumPy does; bf16 converts through f32 with
        round-to-nearest-even. A GPU tensor is converted through host memory.
        """
        self._check_live()
        want = as_dtype(dtype)
        values = storage_view(self.numpy())
        converted = values.copy() if want is self._dtype else _convert(values, self._dtype, want)
        host = np.ascontiguousarray(converted)
        if not self._on_device:
            return _wrap_host(host, want, self._device)
        alloc = driver.DeviceAllocation(self._size * want.itemsize)
        t = Tensor._make(
            alloc.ptr, self._shape, want, on_device=True, owner=alloc, device=self._device
        )
        driver.copy_host_to_device(t._ptr, host)
        return t

    def __repr__(self) -> str:
        if self._moved is not None:
            return f"fl.Tensor(<moved>, shape={self._shape}, dtype={self._dtype!r})"
        on = f"target='{self.target}'" + (f", device={self._device}" if self._device else "")
        if self._host is not None and self._size <= 1000:
            data = np.array2string(self._host, separator=", ")
            return f"fl.Tensor({data}, dtype={self._dtype!r}, {on})"
        return f"fl.Tensor(shape={self._shape}, dtype={self._dtype!r}, {on})"


# -------------------------------------------------------------------------------- creation


def empty(shape: Shape, dtype: Any = dtypes.f32, device: int | None = None) -> Tensor:
    """An uninitialised tensor on the current target, on `device` (default
    `fl.current_device()`)."""
    dims, dt = _shape(shape), as_dtype(dtype)
    dev = devices.resolve(device, "fl.empty")
    if current_target().simulated:
        if streams._captures:  # the GPU's cuMemAlloc: refused inside `fl.graph`
            streams.refuse_in_sim_capture(_allocating(dims, dt))
        try:
            host = np.empty(dims, dtype=dt.np)
        except (MemoryError, ValueError):  # ValueError: more bytes than NumPy can address
            raise _too_large(dims, dt) from None
        return _wrap_host(host, dt, dev)
    alloc = driver.DeviceAllocation(math.prod(dims) * dt.itemsize)
    return Tensor._make(alloc.ptr, dims, dt, on_device=True, owner=alloc, device=dev)


def zeros(shape: Shape, dtype: Any = dtypes.f32, device: int | None = None) -> Tensor:
    t = empty(shape, dtype, devices.resolve(device, "fl.zeros"))
    if t._host is not None:
        t._host.fill(0)
    else:
        driver.fill(t._ptr, 0, 1, t._nbytes)
    return t


def ones(shape: Shape, dtype: Any = dtypes.f32, device: int | None = None) -> Tensor:
    """A tensor of ones (True for bool) on the current target."""
    dt = as_dtype(dtype)
    return full(shape, True if dt.is_bool else 1, dt, devices.resolve(device, "fl.ones"))


def full(
    shape: Shape, value: bool | int | float, dtype: Any = None, device: int | None = None
) -> Tensor:
    """A tensor filled with `value`; the dtype defaults to the literal's (int: i64, float: f32)."""
    dt = dtypes.literal_default(value) if dtype is None else as_dtype(dtype)
    element = _element(value, dt)
    t = empty(shape, dt, devices.resolve(device, "fl.full"))
    if t._host is not None:
        t._host.fill(element)
    elif dt.itemsize in (1, 2, 4):
        pattern = int(np.array(element, dtype=dt.np).view(f"u{dt.itemsize}"))
        driver.fill(t._ptr, pattern, dt.itemsize, t._size)
    else:
        driver.copy_host_to_device(t._ptr, np.full(t._shape, element, dtype=dt.np))
    return t


def arange(
    start: int | float,
    stop: int | float | None = None,
    step: int | float = 1,
    dtype: Any = None,
    device: int | None = None,
) -> Tensor:
    """Evenly spaced values in [start, stop), like `np.arange`; ints give i64, floats f32."""
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        if v is None and name == "stop":
            continue
        number = not isinstance(v, bool) and isinstance(v, int | float | np.integer | np.floating)
        if v is None or not number or not math.isfinite(v) or (name == "step" and v == 0):
            what = f"`{type(v).__name__}` ({v!r:.40})" if not number else f"{v!r}"
            raise KernelTypeError(
                f"`{name}` of fl.arange is a finite{' non-zero' if name == 'step' else ''} "
                f"number, not {what}",
                user_location(),
                help="e.g. fl.arange(10) or fl.arange(0.0, 1.0, 0.25)",
            )
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        ints = all(isinstance(v, int) for v in (start, stop, step))
        dt = dtypes.i64 if ints else dtypes.f32
    else:
        dt = as_dtype(dtype)
    try:
        values = np.arange(start, stop, step, dtype=np.float32 if dt.is_raw else dt.np)
    except (MemoryError, ValueError):  # ValueError: more elements than NumPy can count
        n = max(0, math.ceil((stop - start) / step))
        raise _too_large((n,), dt) from None
    return _place(_to_storage(values, dt), dt, devices.resolve(device, "fl.arange"))


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor of `array`: shared on sim (no copy, like `torch.from_numpy`), copied to the GPU.

    `array` must be C-contiguous, on either target: a Tensor is dense, so a strided view could
    only be copied, and on sim a kernel's writes would then never reach `array`.
    """
    if not isinstance(array, np.ndarray):
        raise KernelTypeError(
            f"fl.from_numpy takes a NumPy array, not `{type(array).__name__}`",
            user_location(),
            help="use fl.asarray(x) for other arrays",
        )
    if not array.flags.c_contiguous:
        raise argument_error(
            f"fl.from_numpy needs a C-contiguous array, but this one is a strided view "
            f"(shape {array.shape}, strides {array.strides} bytes): a tensor of it would be a "
            "copy, and a kernel's writes would never reach the array",
            help="pass a C-contiguous array, or copy explicitly and copy the results back: "
            "`t = fl.from_numpy(np.ascontiguousarray(x))`, launch, then `x[...] = t.numpy()`; "
            "`fl.asarray(x)` makes that copy for you (for inputs: writes stay in the copy)",
        )
    return asarray(array)


def asarray(obj: Any, dtype: Any = None, device: int | None = None) -> Tensor:
    """`obj` as a Tensor on the current target, without copying when its memory is already there.

    NumPy arrays and CPU torch tensors are shared on "sim" and copied to the GPU on "cuda";
    GPU arrays (torch, CuPy, anything with `__dlpack__`/`__cuda_array_interface__`) are shared
    on "cuda". A different `dtype` than the data's means a converted copy. `device`: where a
    copy goes, and on "sim" the pretend device host memory is given (default: an fl.Tensor's
    own device, else `fl.current_device()`); an fl.Tensor on another device is copied there.
    """
    want = None if dtype is None else as_dtype(dtype)
    target = current_target()
    if isinstance(obj, Tensor):
        obj._check_live()
        dev = obj._device if device is None else devices.resolve(device, "fl.asarray")
        if want in (None, obj._dtype) and target.on_device == obj._on_device and dev == obj._device:
            return obj
        values = obj.numpy() if dev == obj._device else obj.numpy().copy()  # devices share none
        return _place(_convert(values, obj._dtype, want), want or obj._dtype, dev)
    dev = devices.resolve(device, "fl.asarray")
    if isinstance(obj, np.ndarray) and not obj.flags.c_contiguous:
        # kernels need contiguous memory: this is a copy, which a kernel's writes never leave
        # (the docstring says so; fl.from_numpy refuses such a view)
        obj = np.ascontiguousarray(obj)
    if _is_array_like(obj):
        where = Target.CUDA if _on_gpu(obj) else Target.SIM
        try:
            info = describe(obj, where, name="obj", ndim=None)
        except KernelTypeError as error:  # said again, naming what was passed, not `obj`
            raise _named_again(error, obj, where) from None
        if info.on_device and target.on_device and want in (None, info.dtype):
            return Tensor._make(info.ptr, info.shape, info.dtype, on_device=True, owner=info.owner)
        if info.on_device:  # a GPU array wanted on the host, or converted
            host = np.empty(info.shape, dtype=info.dtype.np)
            driver.copy_device_to_host(host, info.ptr)
            return _place(_convert(host, info.dtype, want), want or info.dtype, dev)
        assert info.host is not None
        if target.simulated and want in (None, info.dtype):
            if streams._captures and isinstance(obj, np.ndarray):  # the GPU copies it
                streams.refuse_in_sim_capture(_allocating(info.shape, info.dtype))
            t = _wrap_host(info.host, info.dtype, dev)
            if getattr(obj, "requires_grad", False) is True:  # torch's: its autograd state is
                t._owner = obj  # checked when the tensor is partitioned (the array's is not)
            return t
        return _place(_convert(info.host, info.dtype, want), want or info.dtype, dev)
    try:
        values = np.asarray(obj)
    except (TypeError, ValueError) as exc:
        raise KernelTypeError(
            f"cannot make a tensor from `{type(obj).__name__}`: {exc}",
            user_location(),
            help="pass a NumPy array, a torch tensor, a nested list of numbers, or an fl.Tensor",
        ) from None
    have = _host_dtype(values)  # numbers, or a clear error (strings, objects)
    want = want or have
    return _place(_convert(values, None, want), want, dev)


# -------------------------------------------------------------------------------- helpers


def _shape(shape: Shape) -> tuple[int, ...]:
    try:
        dims: tuple[Any, ...] = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    except TypeError:  # not a sequence: an fl.Tensor, a dtype, None
        dims = (None,)
    if isinstance(shape, bool) or not all(
        isinstance(d, int | np.integer) and not isinstance(d, bool) and d >= 0 for d in dims
    ):
        raise KernelTypeError(
            f"a tensor shape is a tuple of non-negative ints, not {shape!r}",
            user_location(),
            help="e.g. fl.empty(1024) or fl.empty((64, 64))",
        )
    return tuple(int(d) for d in dims)


def _too_large(dims: tuple[int, ...], dt: DType) -> OutOfMemoryError:
    """The simulator could not allocate a tensor of `dims` (its memory is this machine's)."""
    nbytes = math.prod(dims) * dt.itemsize
    return OutOfMemoryError(
        f"a tensor of shape {dims} and {dt} needs {nbytes_text(nbytes)}, more than this "
        "machine could allocate for the simulator",
        user_location(),
        help="the simulator keeps tensors in host memory: test kernels on smaller tensors "
        "(a kernel runs the same on any size), or run on a GPU with enough memory",
    )


def _element(value: Any, dt: DType) -> Any:
    """`value` as stored for `dt` (the raw bits for bf16), refusing fills that would change it."""
    if isinstance(value, np.bool_ | np.number):
        value = value.item()
    if not isinstance(value, bool | int | float):
        raise KernelTypeError(
            f"a tensor is filled with a number or a bool, not `{type(value).__name__}` "
            f"({value!r:.40})",
            user_location(),
            help="e.g. fl.full((4, 4), 0.5)",
        )
    if not dtypes.literal_fits(value, dt):
        raise KernelTypeError(
            f"cannot fill a tensor of {dt} with {value!r}",
            user_location(),
            help=f"pass a value that {dt} holds exactly, or choose another dtype",
        )
    if dt.is_f8:
        return _to_storage(np.asarray([float(value)], np.float32), dt)[0]
    return bf16_bits(float(value)) if dt is dtypes.bf16 else value


def _unpickle(values: np.ndarray, dt: DType, device: int) -> Tensor:
    """A pickled Tensor (`Tensor.__reduce_ex__`): its data, on the current target."""
    return _place(values, dt, devices.resolve(device, "unpickling an fl.Tensor"))


def _named_again(error: KernelTypeError, obj: Any, where: Target) -> KernelTypeError:
    """`describe`'s error about `obj` (`error`, naming fl.asarray's parameter), naming what the
    user passed instead."""
    try:
        describe(obj, where, name=_first_argument_text(), ndim=None)
    except KernelTypeError as named:
        return named
    return error


def _first_argument_text() -> str:
    """The source text of the first argument of the user's call at their line (`t[::2]` in
    `fl.asarray(t[::2])`), for an error message; "obj" where it cannot be read."""
    loc = user_location()
    try:
        assert loc is not None and loc.end_line is not None and loc.end_col is not None
        lines = [linecache.getline(loc.file, n).encode() for n in range(loc.line, loc.end_line + 1)]
        lines[-1] = lines[-1][: loc.end_col]
        lines[0] = lines[0][loc.col :]
        call = ast.parse(b"".join(lines).decode().strip(), mode="eval").body
        if isinstance(call, ast.Call) and call.args:
            return ast.unparse(call.args[0])
    except (AssertionError, SyntaxError, UnicodeDecodeError, ValueError, IndexError):
        pass
    return "obj"


def _wrap_host(array: np.ndarray, dt: DType, device: int) -> Tensor:
    info_ptr = int(array.__array_interface__["data"][0])
    return Tensor._make(
        info_ptr, tuple(array.shape), dt, on_device=False, owner=array, host=array, device=device
    )


def _allocating(dims: tuple[int, ...], dt: DType) -> str:
    """What an allocation is, for the error of one inside `fl.graph`."""
    return f"allocating a tensor of shape {dims} and {dt} ({math.prod(dims) * dt.itemsize} bytes)"


def _place(host: np.ndarray, dt: DType, device: int) -> Tensor:
    """A tensor on the current target holding a copy of (or, on sim, exactly) `host`."""
    host = np.ascontiguousarray(host)
    if current_target().simulated:
        if streams._captures:  # the GPU's cuMemAlloc: refused inside `fl.graph`
            streams.refuse_in_sim_capture(_allocating(host.shape, dt))
        return _wrap_host(host, dt, device)
    t = empty(host.shape, dt, device)
    driver.copy_host_to_device(t._ptr, host)
    return t


def _to_storage(values: np.ndarray, dt: DType) -> np.ndarray:
    """Values in `dt`'s storage type (bf16 and the 8-bit floats: the raw bits, rounded to
    nearest even)."""
    if dt.is_f8:  # ml_dtypes rounds to nearest even; past the largest finite: NaN (e4m3fn)
        return np.asarray(values, np.float32).astype(dtypes.ml_type(dt)).view(dt.np)
    if dt is not dtypes.bf16:
        return values.astype(dt.np, copy=False)
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)


def public_view(host: np.ndarray, dt: DType) -> np.ndarray:
    """What NumPy callers see of a host array in `dt`'s storage: the raw bits of bf16 and the
    8-bit floats as ml_dtypes' types (a view, sharing the memory), every other type as it is."""
    return host.view(dtypes.ml_type(dt)) if dt.is_raw else host


def storage_view(values: np.ndarray) -> np.ndarray:
    """`values` as fearless stores them: an ml_dtypes array as its raw bits."""
    raw = dtypes.BY_ML_NAME.get(values.dtype.name)
    return values.view(raw.np) if raw is not None else values


def _convert(values: np.ndarray, have: DType | None, want: DType | None) -> np.ndarray:
    values = storage_view(values)
    if want is None or want is have:
        return values
    if have is dtypes.bf16:  # widen the raw bits to f32 before converting
        values = (values.astype(np.uint32) << 16).view(np.float32)
    elif have is not None and have.is_f8:
        values = values.view(dtypes.ml_type(have)).astype(np.float32)
    return _to_storage(values, want)


def _host_dtype(values: np.ndarray) -> DType:
    if values.dtype == np.float64:
        return dtypes.f32  # a float literal alone is f32 (DESIGN section 2)
    try:
        return as_dtype(values.dtype)
    except KernelTypeError:
        raise KernelTypeError(
            f"cannot make a tensor of element type {values.dtype}",
            user_location(),
            help="pass numbers (or an explicit dtype=)",
        ) from None


def _is_array_like(obj: Any) -> bool:
    return (
        isinstance(obj, np.ndarray)
        or hasattr(obj, "__dlpack__")
        or hasattr(obj, "__cuda_array_interface__")
    )


def _on_gpu(obj: Any) -> bool:
    if isinstance(obj, np.ndarray):
        return False
    is_cuda = getattr(obj, "is_cuda", None)  # torch: its own flag (its array interface
    if isinstance(is_cuda, bool):  # raises RuntimeError for a tensor that requires grad)
        return is_cuda
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    device = getattr(obj, "__dlpack_device__", None)
    return device is not None and int(device()[0]) not in (_KDL_CPU, 3)
