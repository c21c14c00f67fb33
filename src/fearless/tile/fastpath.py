"""The warm path of a Tile launch: a cheap key of the arguments -> a launch prepared once.

The first launch with some arguments goes the slow way (`Kernel.signature_of`, `_grid`,
`_borrow_check`, `ir_for`, and on the GPU `launch_gpu.prepare`), which explains every
refusal. What that produces depends on the arguments only through a few facts, which the warm
path reads on every call, in parameter order, into a dictionary key:

    Part    a live `Partition` (exactly) of an fl.Tensor of the declared dtype, on the target's
            side of the bus; key: pointer mod 16, shape, tile, grid, order, device (so that
            arrays on two devices meet the slow path's refusal, runtime/devices.py); on
            "sim" its host array must be writable (a read-only one meets the slow path's
            E0701; so does a read-only host array for an Atomic)
    Tensor  an fl.Tensor (live, of the declared dtype, on the target's side), or on "cuda" a
            torch tensor on GPU 0 of the declared dtype, or anything `describe` accepts with the
            declared dtype; key: pointer mod 16, shape. A plain torch.Tensor is read inline
            and its contiguity checked on every call (`is_contiguous()`, torch's flag for
            `is_c_contiguous`); a subclass's accessors may be overridden, so it is read as
            `describe` reads it and its strides, whose contiguity the slow path checked, go
            in the key; an fl.Tensor's device goes in it too
    Const   key: its type and value
    scalar  a bool, int or float; key: its type. The slow path's range check depends on the
            type alone except for an int passed to an integer parameter: that one is checked
            on every call.

Everything a prepared launch holds is a function of that key: the signature (`align` included:
the power of two up to 16 dividing a pointer is fixed by the pointer mod 16), the grid, the
byte extent of each array, and the packed extents and strides. What varies within one key, the
pointers and scalar values, goes into the launch as it is; the borrow check runs on every call,
on those pointers. An argument the warm path does not recognise, a failed check, an overlap or
a key seen for the first time all go to the slow path, so every error is the slow path's own.
On "cuda" a prepared launch keeps the cubin of the arch the slow path compiled for: like the
SIMT launcher, a warm launch does not read FEARLESS_ARCH again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import dtypes
from ..abi import ALIGN_BYTES, Signature
from ..dtypes import DType
from ..ir.tile.kernel import TileIR
from ..runtime import trace
from ..runtime.arrays import DEVICE_ID, ArrayInfo, describe, torch_dtype, torch_dtype_of
from ..runtime.binder import scalar_fits
from ..runtime.borrow import PAIRWISE_MAX, Pairs, find_overlap, output_pairs
from ..runtime.partition import Partition
from ..runtime.target import Target
from ..runtime.tensor import Tensor
from .types import AtomicAnnotation, ConstAnnotation, PartAnnotation, TensorAnnotation

# `array_align` caps a pointer's divisor at ALIGN_BYTES, a power of two: ptr & this decides it.
_ALIGN_MASK = ALIGN_BYTES - 1
# Prepared launches kept per kernel; a program that allocates new shapes without end starts over.
MAX_ENTRIES = 256

Key = tuple[Any, ...]
# read(argument, on_device, key, starts, payload) -> recognised? It appends the argument's key
# part, its pointer if it is an array, and what the launch passes for it (see `payload`).
Reader = Callable[[Any, bool, list[Any], list[int], list[Any]], bool]
# Runs a prepared launch: (payload, stream).
Runner = Callable[[list[Any], Any], None]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A launch the slow path checked and prepared, valid for every call with the same key.

    `nbytes` is the byte extent of each array argument in parameter order (the borrow check's
    ranges are [pointer, pointer + nbytes)); `run(payload, stream)` launches it.
    """

    signature: Signature
    ir: TileIR
    grid: tuple[int, int, int]
    nbytes: tuple[int, ...]
    run: Runner


class WarmPath:
    """One kernel's prepared launches, by argument key, and the readers that make the key.

    The payload of a call is what its launch takes besides the prepared parts: on "sim" the
    values `Kernel.signature_of` returns, on "cuda" the pointers and scalar values in ABI order
    (`launch_gpu.dynamic_values`).
    """

    def __init__(self, annotations: Sequence[tuple[str, Any]]) -> None:
        self.readers = tuple(reader_for(name, ann) for name, ann in annotations)
        outputs = [
            isinstance(a, PartAnnotation | AtomicAnnotation) for _, a in annotations if _is_array(a)
        ]
        self.outputs = tuple(outputs)
        self.pairs: Pairs | None = output_pairs(outputs) if len(outputs) <= PAIRWISE_MAX else None
        self.entries: dict[Key, Prepared] = {}
        self._annotations = tuple(annotations)
        # The compiled warm path (claunch_tile.c's tile_warm): what it launches, by the same keys:
        # (byte extent of each array, the launch's C plan). `c` is made at the first store.
        self.c_entries: dict[Key, tuple[tuple[int, ...], Any]] = {}
        self.c: Any = None
        self.c_launch: Any = (
            None  # claunch_tile.c's tile_warm(c, args, stream handle) -> 0 launched
        )
        self._c_torch: Any = None  # the torch.Tensor type `c` was made with
        self._c_forget: Any = None  # claunch_tile.c's tile_warm_forget(c)

    def lookup(
        self, args: Sequence[Any], target: Target
    ) -> tuple[Prepared | None, Key | None, list[Any]]:
        """(prepared launch, key, payload) of a call. The launch is None when the slow path
        must run: then the key is where to store what it prepares (None: nothing to store)."""
        if len(args) != len(self.readers):
            return None, None, []
        on_device = target.on_device
        parts: list[Any] = [target]
        starts: list[int] = []
        payload: list[Any] = []
        for read, arg in zip(self.readers, args, strict=False):  # same length: checked above
            if not read(arg, on_device, parts, starts, payload):
                return None, None, payload
        key = tuple(parts)
        try:
            entry = self.entries.get(key)
        except TypeError:  # an unhashable Const value: never cached
            return None, None, payload
        if entry is None or not self._disjoint(starts, entry.nbytes):
            return None, key, payload
        return entry, key, payload

    def launched_in_c(self, args: tuple[Any, ...], target: Target, stream: Any) -> bool:
        """Whether the compiled warm path (claunch_tile.c's tile_warm) launched this call: on the
        GPU, on the default stream, outside `fl.graph` and ops' recording (runtime/trace.py);
        False: nothing was launched, and `lookup` goes on."""
        c = self.c
        if c is None or stream is not None or target is not _CUDA or trace.recording:
            return False
        # None: the default stream, decided in C as streams.py decides it (-1 in fl.graph)
        return self.c_launch(c, args, None) == 0

    def _disjoint(self, starts: list[int], nbytes: tuple[int, ...]) -> bool:
        """The borrow check of `check_borrows` on these ranges (an overlap: the slow path raises).

        The pairwise test first, as the SIMT launcher does: zero-size arrays pass it by
        accident, and `find_overlap` decides those."""
        pairs = self.pairs
        if pairs is not None:
            for o, j in pairs:
                if starts[j] < starts[o] + nbytes[o] and starts[o] < starts[j] + nbytes[j]:
                    break
            else:
                return True
        ends = [s + n for s, n in zip(starts, nbytes, strict=True)]
        return find_overlap(starts, ends, self.outputs, pairs) is None

    def store(self, key: Key, entry: Prepared) -> None:
        """Keep what the slow path prepared for `key` (a key `lookup` returned: hashable)."""
        if len(self.entries) >= MAX_ENTRIES:
            self.entries.clear()
            self.c_entries.clear()
            if self.c is not None:
                self._c_forget(self.c)  # its remembered last entry was one of them
        self.entries[key] = entry
        cplan = getattr(entry.run, "_cplan", None)
        if cplan is not None and key[0] is Target.CUDA:
            self.c_entries[key] = (entry.nbytes, cplan)
            torch = sys.modules.get("torch")
            if self.c is None or (torch is not None and self._c_torch is not torch.Tensor):
                self._make_c(torch.Tensor if torch is not None else _NoTorch)

    def _make_c(self, torch_type: type) -> None:
        """The compiled warm path of this kernel (None: it has none here)."""
        from ..runtime import claunch

        self._c_torch = torch_type
        if self.pairs is None:
            return  # past PAIRWISE_MAX arrays the Python sweep decides
        kinds: list[int] = []
        wants: list[DType | None] = []
        for _, ann in self._annotations:
            if isinstance(ann, PartAnnotation):
                kinds.append(claunch.WARM_PART)
                wants.append(ann.dtype)
            elif isinstance(ann, TensorAnnotation | AtomicAnnotation):
                kinds.append(claunch.WARM_TENSOR)
                wants.append(ann.dtype)
            else:
                const = isinstance(ann, ConstAnnotation)
                kinds.append(claunch.WARM_CONST if const else claunch.WARM_SCALAR)
                wants.append(None)
        self.c = claunch.tile_warm_plan(
            tuple(kinds),
            tuple(wants),
            self.pairs,
            self.c_entries,
            Partition,
            Tensor,
            torch_type,
            Target.CUDA,
            DEVICE_ID,
            torch_dtype_of,
        )
        module = claunch.module()
        self.c_launch = module.tile_warm if module is not None else None
        self._c_forget = module.tile_warm_forget if module is not None else None


_CUDA = Target.CUDA  # (a member read through its class costs a descriptor call)


def _is_array(ann: Any) -> bool:
    return isinstance(ann, PartAnnotation | TensorAnnotation | AtomicAnnotation)


# -------------------------------------------------------------------------------- readers


def reader_for(name: str, ann: Any) -> Reader:
    """The reader of parameter `name` annotated `ann` (an annotation `Kernel.annotations` took)."""
    if isinstance(ann, PartAnnotation):
        return _part_reader(ann.dtype)
    if isinstance(ann, TensorAnnotation | AtomicAnnotation):
        return _tensor_reader(name, ann.dtype, isinstance(ann, AtomicAnnotation))
    if isinstance(ann, ConstAnnotation):
        return _read_const
    dt = ann if isinstance(ann, DType) else dtypes.from_python_type(ann)
    assert dt is not None
    return _scalar_reader(dt)


def _part_reader(want: DType) -> Reader:
    def read(
        arg: Any, on_device: bool, key: list[Any], starts: list[int], payload: list[Any]
    ) -> bool:
        if type(arg) is not Partition or arg._given_back is not None:
            return False
        t = arg.tensor
        if t._dtype is not want or t._on_device != on_device:
            return False
        ptr = t._ptr
        starts.append(ptr)
        if on_device:  # every array on GPU 0: the key claunch_tile.c builds too
            key.append((ptr & _ALIGN_MASK, t._shape, arg.tile, arg.grid, arg.group))
            payload.append(ptr)
        else:  # exactly what `signature_of` makes
            host = t._host
            if host is not None and not host.flags.writeable:
                return False  # a read-only array: the slow path refuses it
            key.append((ptr & _ALIGN_MASK, t._shape, arg.tile, arg.grid, arg.group, t._device))
            info = ArrayInfo(ptr, t._nbytes, t._shape, (), want, on_device, t, t._host, t._device)
            payload.append((arg, info))
        return True

    return read


def _tensor_reader(name: str, want: DType, output: bool) -> Reader:
    """A Tensor's reader, or an Atomic's (`output`: a read-only host array is refused)."""
    # torch.Tensor itself and the torch dtype of `want`, once torch is loaded (see `_torch_plain`)
    torch_types: list[Any] = []

    def read(
        arg: Any, on_device: bool, key: list[Any], starts: list[int], payload: list[Any]
    ) -> bool:
        tp = type(arg)
        if tp is Tensor:
            if arg._moved is not None or arg._dtype is not want or arg._on_device != on_device:
                return False
            ptr = arg._ptr
            # the device on sim only: on "cuda" every array is on GPU 0 (claunch_tile.c's key)
            key.append(
                (ptr & _ALIGN_MASK, arg._shape)
                if on_device
                else (ptr & _ALIGN_MASK, arg._shape, arg._device)
            )
            if on_device:
                payload.append(ptr)
            else:
                info = arg._array_info()
                if output and info.host is not None and not info.host.flags.writeable:
                    return False  # a read-only array: the slow path refuses it
                payload.append(info)
            starts.append(ptr)
            return True
        if on_device:
            plain = torch_types or _torch_plain(want, torch_types)
            if tp is plain[0]:
                # A plain torch.Tensor, inline: `describe`'s checks, its contiguity check as
                # torch's own flag (is_contiguous() is `is_c_contiguous`, extent-1 axes and
                # empty tensors included), so the key needs no strides.
                if (
                    not arg.is_cuda
                    or arg.get_device() != DEVICE_ID
                    or arg.dtype is not plain[1]
                    or not arg.is_contiguous()
                ):
                    return False
                ptr = arg.data_ptr()
                key.append((ptr & _ALIGN_MASK, arg.shape))
                starts.append(ptr)
                payload.append(ptr)
                return True
            if _is_torch(tp):
                return _read_torch(arg, want, key, starts, payload)
        return _read_described(arg, name, want, output, on_device, key, starts, payload)

    return read


class _NoTorch:
    """Stands for torch.Tensor while torch is not loaded: no argument has this type."""


def _torch_plain(want: DType, found: list[Any]) -> list[Any]:
    """[torch.Tensor, the torch dtype of `want`] into `found` once torch is loaded (until
    then a list whose type matches nothing, not kept: torch may be imported later)."""
    torch = sys.modules.get("torch")  # never imported here: a torch tensor means it is loaded
    if torch is None:
        return [_NoTorch, None]
    found += [torch.Tensor, torch_dtype_of(want)]
    return found


_torch_types: dict[type, bool] = {}


def _is_torch(tp: type) -> bool:
    """A torch.Tensor subclass (their accessors may be overridden: read as `_read_torch` does)."""
    found = _torch_types.get(tp)
    if found is None:
        torch = sys.modules.get("torch")  # never imported here: a torch tensor means it is loaded
        found = _torch_types[tp] = torch is not None and issubclass(tp, torch.Tensor)
    return found


def _read_torch(t: Any, want: DType, key: list[Any], starts: list[int], payload: list[Any]) -> bool:
    """A torch tensor subclass on the GPU, through its accessors (what `describe` reads, minus
    the contiguity check: the strides are in the key instead)."""
    if not t.is_cuda or t.get_device() != DEVICE_ID or torch_dtype(t.dtype) is not want:
        return False
    ptr = t.data_ptr()
    key.append((ptr & _ALIGN_MASK, t.shape, t.stride()))
    starts.append(ptr)
    payload.append(ptr)
    return True


def _read_described(
    arg: Any,
    name: str,
    want: DType,
    output: bool,
    on_device: bool,
    key: list[Any],
    starts: list[int],
    payload: list[Any],
) -> bool:
    """NumPy arrays, CPU torch tensors on "sim", CuPy and DLPack arrays: `describe` itself
    (an `output`'s read-only host array is left to the slow path, which refuses it)."""
    try:
        info = describe(arg, Target.CUDA if on_device else Target.SIM, name=name, ndim=None)
    except Exception:  # the slow path raises it again, after any earlier argument's error
        return False
    if info.dtype is not want:
        return False
    if output and info.host is not None and not info.host.flags.writeable:
        return False
    key.append((info.ptr & _ALIGN_MASK, info.shape))
    starts.append(info.ptr)
    payload.append(info.ptr if on_device else info)
    return True


def _read_const(
    arg: Any, on_device: bool, key: list[Any], starts: list[int], payload: list[Any]
) -> bool:
    key.append((type(arg), arg))
    if not on_device:
        payload.append(None)  # a Const has no kernel parameter; `signature_of` gives None
    return True


_FLOAT_MAX = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38}


def _scalar_reader(dt: DType) -> Reader:
    """A scalar that `binder.scalar_fits` accepts; the key holds its type, so a kind the slow
    path refused (a bool for an int, a float for an int) never reaches a cached launch."""
    ranged = dt.is_int
    limit = _FLOAT_MAX.get(dt.name, float("inf"))

    def read(
        arg: Any, on_device: bool, key: list[Any], starts: list[int], payload: list[Any]
    ) -> bool:
        tp = type(arg)
        exact = tp is float or tp is int or tp is bool  # isinstance below is for subclasses
        if not exact and not isinstance(arg, bool | int | float):
            return False
        if ranged and isinstance(arg, int) and not dtypes.literal_fits(arg, dt):
            return False
        if not ranged and not -limit <= arg <= limit and not scalar_fits(arg, dt):
            return False  # a finite value past the format's largest (NaN and inf fit)
        key.append(tp)
        payload.append(arg)
        return True

    return read
