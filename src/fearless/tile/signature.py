"""The specialisation of a Tile launch: the parameters' annotations, checked once, and a call's
arguments read into a `Signature` (per parameter its kind, dtype, rank, tile, Const value and
alignment facts), with every refusal a launch's arguments can meet before the grid; the same
from the annotations alone (`static_signature`) and from the data-less specs of an
ahead-of-time specialisation (`signature_from_specs`, tile/aot.py's `Spec`).

An optional array (`tile.Tensor[T] | None`, or Atomic, or Part: tile/types.py's
OptionalAnnotation) given None becomes a Const parameter of value None (`TileParam.absent`): like
any Const it has no kernel parameter, and a different value (an array) is a different
specialisation.

`declared` gives the same parameters in the runtime's vocabulary (`abi.Declared`), which the
dispatcher (runtime/dispatch.py) reads a call's arguments by on its warm path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import dtypes
from ..abi import Declared, Signature, TileParam, TileParamKind, array_align
from ..dtypes import DType
from ..errors import CompileError, KernelTypeError, Location
from ..frames import user_location
from ..frontend.source import FunctionSource, resolve_annotations
from ..runtime.arrays import ArrayInfo, describe
from ..runtime.binder import arity_error, dtype_error, readonly_error, scalar_error, scalar_fits
from ..runtime.location import argument_error
from ..runtime.partition import Partition
from ..runtime.target import Target
from .aot import PartSpec, Spec
from .structs import StructAnnotation, is_struct_class, struct_annotation
from .tuples import TupleAnnotation, tuple_annotation
from .types import (
    AtomicAnnotation,
    ConstAnnotation,
    OptionalAnnotation,
    PartAnnotation,
    TensorAnnotation,
)


def check_annotations(func: Callable[..., Any], src: FunctionSource) -> list[tuple[str, Any]]:
    """Each parameter's name and Tile annotation, in order; an annotation that is none, or a
    dtype that is no kernel parameter, is a CompileError at the parameter. A struct class
    (tile/structs.py) becomes a StructAnnotation, each of its fields checked the same way."""
    hints = resolve_annotations(func)
    out = []
    for arg in src.tree.args.args:
        loc = src.loc(arg)
        ann = hints.get(arg.arg)
        ann = tuple_annotation(ann, loc) or ann
        if is_struct_class(ann):
            scope = {**func.__globals__, **getattr(func, "__fearless_scope__", {})}

            def check_field(name: str, field: Any, loc: Location = loc) -> None:
                _check_annotation(name, field, loc, in_struct=True)

            ann = struct_annotation(ann, scope, loc, check_field)
        else:
            _check_annotation(arg.arg, ann, loc, in_struct=False)
        out.append((arg.arg, ann))
    return out


def _check_annotation(name: str, ann: Any, loc: Location, *, in_struct: bool) -> None:
    """E0599 at `loc` unless `ann` is a Tile parameter annotation whose dtype a kernel takes."""
    ok = isinstance(
        ann,
        PartAnnotation
        | TensorAnnotation
        | AtomicAnnotation
        | OptionalAnnotation
        | ConstAnnotation
        | DType,
    ) or (ann in (int, float, bool))
    ok = ok or (not in_struct and isinstance(ann, TupleAnnotation))
    if not ok:
        what = "field" if in_struct else "parameter"
        raise CompileError(
            f"{what} `{name}` needs a Tile annotation",
            loc,
            code="E0599",
            help=f"annotate it: `{name.rsplit('.', 1)[-1]}: tile.Part[fl.f32]` (an output), "
            f"`tile.Tensor[fl.f32]` (an input; `| None` if a launch may leave it out; "
            "`tuple[tile.Tensor[fl.f32], ...]` for a list of them, or a NamedTuple or "
            "dataclass of such fields), `tile.Atomic[fl.f32]` (updated by atomics), "
            "`tile.Const[int]` or `fl.f32`",
        )
    dt = getattr(ann, "dtype", ann)
    if isinstance(dt, DType) and dt.mma_only and (dt is ann or not dt.is_f8):
        what = "scalar" if dt is ann else "tensor"
        raise CompileError(
            f"parameter `{name}`: a {dt.name} {what} is not a kernel parameter",
            loc,
            code="E0599",
            help=f"pass f32 and convert in the kernel (`x.astype(fl.{dt.name})`)"
            + ("; tensors of it are fine" if dt.is_f8 else ""),
        )


def signature_of(
    kernel: str, anns: Sequence[tuple[str, Any]], args: tuple[Any, ...], target: Target
) -> tuple[Signature, list[Any]]:
    """The specialisation of a launch of `kernel` (parameters `anns`) and, per parameter, its
    runtime value or ArrayInfo (a Part's: the Partition and its tensor's ArrayInfo)."""
    if len(args) != len(anns):
        raise arity_error(kernel, [name for name, _ in anns], len(args))
    params: list[TileParam] = []
    values: list[Any] = []
    for (name, ann), arg in zip(anns, args, strict=True):
        if isinstance(ann, OptionalAnnotation):
            if arg is None:  # absent: a compile-time None, no kernel parameter
                params.append(TileParam.left_out(name))
                values.append(None)
                continue
            ann = ann.inner
        if isinstance(ann, PartAnnotation):
            if arg is None:
                raise none_error(kernel, name, ann)
            if not isinstance(arg, Partition):
                raise argument_error(
                    f"`{name}` is a `tile.Part` and needs a Partition, got `{type(arg).__name__}`",
                    help=f"pass `{name}.partition(tile_shape)` of an fl.Tensor (it moves the "
                    f"tensor until `unpartition()`), or launch inside `with {name}.partition("
                    f"tile_shape) as {name}p:` with `{name}p`",
                )
            arg.check_live()
            _check_dtype(kernel, name, arg.dtype, ann.dtype)
            t = arg.tensor
            info = ArrayInfo(
                t._ptr, t._nbytes, t._shape, (), t._dtype, t._on_device, t, t._host, t._device
            )
            if target.on_device != info.on_device:
                raise argument_error(
                    f"`{name}` lives on the {'GPU' if info.on_device else 'host'} but the "
                    f"target is {target}",
                )
            if _read_only(info):
                raise readonly_error(name)
            align = array_align(info.ptr, info.shape, info.dtype.itemsize)
            params.append(
                TileParam(name, "part", ann.dtype, t.ndim, arg.tile, align=align, group=arg.group)
            )
            values.append((arg, info))
        elif isinstance(ann, TensorAnnotation | AtomicAnnotation):
            if arg is None:
                raise none_error(kernel, name, ann)
            info = describe(arg, target, name=name, ndim=None)
            _check_dtype(kernel, name, info.dtype, ann.dtype)
            if isinstance(ann, AtomicAnnotation) and _read_only(info):
                raise readonly_error(name)
            align = array_align(info.ptr, info.shape, info.dtype.itemsize)
            kind: TileParamKind = "tensor" if isinstance(ann, TensorAnnotation) else "atomic"
            params.append(TileParam(name, kind, ann.dtype, len(info.shape), align=align))
            values.append(info)
        elif isinstance(ann, ConstAnnotation):
            if not isinstance(arg, ann.pytype) or (ann.pytype is int and isinstance(arg, bool)):
                raise argument_error(
                    f"argument `{name}` is a `tile.Const[{ann.pytype.__name__}]`, got {arg!r}",
                )
            params.append(TileParam(name, "const", None, value=arg))
            values.append(None)
        else:
            dt = ann if isinstance(ann, DType) else dtypes.from_python_type(ann)
            assert dt is not None
            if not scalar_fits(arg, dt):
                raise scalar_error(name, arg, dt)
            params.append(TileParam(name, "scalar", dt, weak=ann in (int, float)))
            values.append(arg)
    return tuple(params), values


def static_signature(kernel: str, anns: Sequence[tuple[str, Any]]) -> Signature:
    """A signature from the annotations alone, for `inspect` without arguments.

    Parts get 1-d... tiles of 128 per dimension of rank 1; Tensors rank 1; optional arrays
    are left out (the form every launch may take: a body that uses one unguarded fails here);
    Consts need values.
    """
    params = []
    for name, ann in anns:
        if isinstance(ann, OptionalAnnotation):
            params.append(TileParam.left_out(name))
        elif isinstance(ann, PartAnnotation):
            params.append(TileParam(name, "part", ann.dtype, 1, (128,)))
        elif isinstance(ann, TensorAnnotation):
            params.append(TileParam(name, "tensor", ann.dtype, 1))
        elif isinstance(ann, AtomicAnnotation):
            params.append(TileParam(name, "atomic", ann.dtype, 1))
        elif isinstance(ann, ConstAnnotation | TupleAnnotation | StructAnnotation):
            what = {ConstAnnotation: "a Const", TupleAnnotation: "a tuple"}.get(
                type(ann), "a struct"
            )
            raise CompileError(
                f"`{kernel}` has {what} parameter `{name}`: inspect it with arguments",
                help=f"`{kernel}.inspect(*args, stage=...)`, or declare a launch with "
                f"`{kernel}.specialise(...)` (tile.Spec) and inspect that",
            )
        else:
            dt = ann if isinstance(ann, DType) else dtypes.from_python_type(ann)
            params.append(TileParam(name, "scalar", dt, weak=ann in (int, float)))
    return tuple(params)


def signature_from_specs(
    name: str, anns: Sequence[tuple[str, Any]], args: Sequence[Any]
) -> Signature:
    """The specialisation a launch of kernel `name` (parameters `anns`: name, annotation) with
    arguments like `args` would compile."""
    kernel = name
    if len(args) != len(anns):
        raise KernelTypeError(
            f"`{kernel}` takes {len(anns)} argument(s) but {len(args)} specs were given",
            user_location(),
            code="E0061",
        )
    params: list[TileParam] = []
    for (pname, ann), arg in zip(anns, args, strict=True):
        if isinstance(ann, OptionalAnnotation):
            if arg is None:  # absent, as a launch's None (tile/signature.py)
                params.append(TileParam.left_out(pname))
                continue
            ann = ann.inner
        if isinstance(ann, PartAnnotation):
            if not isinstance(arg, PartSpec):
                raise _kind_error(kernel, pname, "tile.Spec(shape, dtype).partition(tile)", arg)
            _spec_dtype(pname, arg.array.dtype, ann.dtype)
            a = arg.array
            params.append(
                TileParam(pname, "part", ann.dtype, len(a.shape), arg.tile, align=a.align_facts())
            )
        elif isinstance(ann, TensorAnnotation):
            if not isinstance(arg, Spec):
                raise _kind_error(kernel, pname, "tile.Spec(shape, dtype)", arg)
            _spec_dtype(pname, arg.dtype, ann.dtype)
            params.append(
                TileParam(pname, "tensor", ann.dtype, len(arg.shape), align=arg.align_facts())
            )
        elif isinstance(ann, ConstAnnotation):
            if not isinstance(arg, ann.pytype) or (ann.pytype is int and isinstance(arg, bool)):
                raise _kind_error(kernel, pname, f"a {ann.pytype.__name__} value", arg)
            params.append(TileParam(pname, "const", None, value=arg))
        else:
            dt = ann if isinstance(ann, DType) else dtypes.from_python_type(ann)
            assert dt is not None  # annotations() accepted only dtypes and int/float/bool
            ok = arg is dt or (isinstance(arg, bool | int | float) and dtypes.literal_fits(arg, dt))
            if not ok:
                raise _kind_error(kernel, pname, f"a {dt.name} value or `fl.{dt.name}`", arg)
            params.append(TileParam(pname, "scalar", dt, weak=ann in (int, float)))
    return tuple(params)


def declared(anns: Sequence[tuple[str, Any]]) -> list[Declared]:
    """The parameters as declared, in the runtime's vocabulary (what the dispatcher reads): an
    optional array is its array kind with `optional` set."""
    return [
        Declared(name, _kind(ann), _dtype(ann), isinstance(ann, OptionalAnnotation))
        for name, ann in anns
    ]


def none_error(kernel: str, name: str, ann: Any) -> Exception:
    """E0701 for None given to a required array parameter, with how to make it optional."""
    return argument_error(
        f"argument `{name}` of `{kernel}` is None, but `{name}` is a `{ann!r}`, which a launch "
        "must pass",
        help=f"pass an array, or declare the parameter optional: `{name}: {ann!r} | None` "
        f"(a launch that passes None then compiles the kernel without it; test it in the body "
        f"with `if {name} is not None:`)",
    )


def _check_dtype(kernel: str, name: str, got: DType, want: DType) -> None:
    if got != want:
        raise dtype_error(kernel, name, got.name, want)


def _kind(ann: Any) -> TileParamKind:
    """The parameter kind an annotation declares (an optional array's: its array's)."""
    if isinstance(ann, OptionalAnnotation):
        ann = ann.inner
    if isinstance(ann, PartAnnotation):
        return "part"
    if isinstance(ann, TensorAnnotation):
        return "tensor"
    if isinstance(ann, AtomicAnnotation):
        return "atomic"
    return "const" if isinstance(ann, ConstAnnotation) else "scalar"


def _dtype(ann: Any) -> DType | None:
    """The element or scalar dtype an annotation declares (None: a Const)."""
    if isinstance(ann, ConstAnnotation):
        return None
    if isinstance(ann, DType):
        return ann
    return getattr(ann, "dtype", None) or dtypes.from_python_type(ann)


def _read_only(info: ArrayInfo) -> bool:
    """Whether an output's memory is a read-only host array (NumPy's `writeable=False`)."""
    return info.host is not None and not info.host.flags.writeable


def _kind_error(kernel: str, name: str, want: str, got: Any) -> KernelTypeError:
    return argument_error(
        f"`{kernel}`'s parameter `{name}` is specialised by {want}, got {got!r}",
    )


def _spec_dtype(name: str, got: DType, want: DType) -> None:
    if got != want:
        raise argument_error(
            f"the spec of `{name}` holds {got.name} but the kernel declares {want.name}",
        )
