"""Tuple parameters: `As: tuple[tile.Tensor[fl.f16], ...]`, a launch's list of arrays as one
parameter (cuTile Python's lists of arrays, TileGym's group GEMM); and the spreading of a
launch's tuple and struct parameters (tile/structs.py: `w.left`, `w.right`, ...) into flat ones.

A launch passes a tuple or list of n arrays; the kernel is specialised per length, and each
element is an ordinary array parameter named `As[0]`, `As[1]`, ...: the signature, the borrow
check (an element of a tuple of Parts is an output like any Part, so two elements that share a
byte are refused, by name), the dispatcher and both runners see n parameters. In the body the
parameter is a tuple of the n arrays: `len(As)` is a compile-time int, `As[g]` takes an element
at a compile-time index, and `for a in tile.static_iter(As):` unrolls over them.

The kernel keeps one view per tuple length (`Flattening.view`): a Kernel whose parameters are
the flat list, sharing the kernel's source, guard and compiled forms, so a compile started by
the autotuner for the kernel serves the launch the view prepares. `TupleDispatch` stands for
the kernel's dispatcher and hands each call, flattened, to its view's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_args, get_origin

from ..abi import Signature, TileParam
from ..dtypes import DType
from ..errors import CompileError, Location
from ..runtime.binder import arity_error
from ..runtime.launch import keyword_error
from ..runtime.location import argument_error
from ..runtime.target import Target
from .structs import StructAnnotation, field_name
from .types import ArrayAnnotation, AtomicAnnotation, PartAnnotation, TensorAnnotation


@dataclass(frozen=True)
class TupleAnnotation:
    """`tuple[tile.Part[T], ...]` (or of tile.Tensor, tile.Atomic): a launch's tuple of arrays
    of one kind and dtype, any length from 1."""

    inner: ArrayAnnotation

    @property
    def dtype(self) -> DType:
        return self.inner.dtype

    def __repr__(self) -> str:
        return f"tuple[{self.inner!r}, ...]"


def tuple_annotation(ann: Any, loc: Location | None) -> TupleAnnotation | None:
    """`tuple[X, ...]` of an array annotation X as a TupleAnnotation; None for any other
    annotation. A tuple of anything else, or of a fixed length, is refused (E0599)."""
    if get_origin(ann) is not tuple:
        return None
    args = get_args(ann)
    if (
        len(args) == 2
        and args[1] is Ellipsis
        and isinstance(args[0], PartAnnotation | TensorAnnotation | AtomicAnnotation)
    ):
        return TupleAnnotation(args[0])
    raise CompileError(
        f"`{ann}` is no Tile parameter: a tuple parameter is `tuple[tile.Tensor[T], ...]` "
        "(or of tile.Part, tile.Atomic), any length",
        loc,
        code="E0599",
        help="write e.g. `As: tuple[tile.Tensor[fl.f16], ...]` and pass a tuple or list of arrays",
    )


def element_name(name: str, i: int) -> str:
    """The flat parameter that holds element i of tuple parameter `name`."""
    return f"{name}[{i}]"


class Flattening:
    """The tuple and struct parameters of one kernel, and its views by tuple lengths (a struct's
    fields are fixed: a kernel whose only spread parameters are structs has one view)."""

    def __init__(self, anns: Sequence[tuple[str, Any]], make_view: Callable[..., Any]) -> None:
        self.anns = list(anns)
        self.at = tuple(
            i for i, (_, a) in enumerate(anns) if isinstance(a, TupleAnnotation | StructAnnotation)
        )
        self.make_view = make_view  # (flat annotations) -> a Kernel over them
        self.views: dict[tuple[int, ...], Any] = {}

    def flatten(self, kernel: str, args: Sequence[Any]) -> tuple[Any, tuple[Any, ...]]:
        """(the view for these tuple lengths, the arguments with each tuple spread out)."""
        if len(args) != len(self.anns):
            raise arity_error(kernel, [n for n, _ in self.anns], len(args))
        flat: list[Any] = []
        lengths = []
        for i, arg in enumerate(args):
            if i not in self.at:
                flat.append(arg)
                continue
            name, ann = self.anns[i]
            if isinstance(ann, StructAnnotation):
                if not isinstance(arg, ann.cls):
                    raise argument_error(
                        f"argument `{name}` is a `{ann!r}` and needs an instance of it, got "
                        f"`{type(arg).__name__}`",
                        help=f"pass `{ann!r}(...)`; its fields are "
                        + ", ".join(f"`{f}`" for f, _ in ann.fields),
                    )
                flat.extend(ann.values(arg))
                continue
            if not isinstance(arg, tuple | list) or not arg:
                got = "an empty one" if isinstance(arg, tuple | list) else type(arg).__name__
                raise argument_error(
                    f"argument `{name}` is a `{ann!r}` and needs a tuple or list of at least "
                    f"one array, got {got}",
                    help=f"pass `({name}0, {name}1, ...)`; the kernel is compiled per length",
                )
            lengths.append(len(arg))
            flat.extend(arg)
        key = tuple(lengths)
        view = self.views.get(key)
        if view is None:
            view = self.views[key] = self.make_view(self.flat_annotations(key))
        return view, tuple(flat)

    def flat_annotations(self, lengths: tuple[int, ...]) -> list[tuple[str, Any]]:
        """The parameters of the view for `lengths`: each tuple as its elements, each struct
        as its fields."""
        out: list[tuple[str, Any]] = []
        left = iter(lengths)
        for name, ann in self.anns:
            if isinstance(ann, StructAnnotation):
                out.extend((field_name(name, f), a) for f, a in ann.fields)
            elif isinstance(ann, TupleAnnotation):
                out.extend((element_name(name, i), ann.inner) for i in range(next(left)))
            else:
                out.append((name, ann))
        return out

    def keyword_error(self, kernel: str, kwargs: dict[str, Any]) -> Exception:
        return keyword_error(kernel, [n for n, _ in self.anns], kwargs)


def bind(names: Sequence[str], signature: Signature) -> list[tuple[str, Any]]:
    """Each source parameter with its signature entry, with the tuple of the entries of its
    elements (`As[0]`, `As[1]`, ...: a tuple parameter's view, `Flattening`), or with the
    entries of its fields by field name (`w.left`, ...: a struct parameter's)."""
    out: list[tuple[str, Any]] = []
    i = 0
    for name in names:
        if i < len(signature) and signature[i].name == name:
            out.append((name, signature[i]))
            i += 1
            continue
        prefix = field_name(name, "")
        fields: dict[str, TileParam] = {}
        while i < len(signature) and signature[i].name.startswith(prefix):
            fields[signature[i].name[len(prefix) :]] = signature[i]
            i += 1
        if fields:
            out.append((name, fields))
            continue
        members: list[TileParam] = []
        while i < len(signature) and signature[i].name == element_name(name, len(members)):
            members.append(signature[i])
            i += 1
        out.append((name, tuple(members)))
    assert i == len(signature), "a signature with parameters the source does not name"
    return out


class TupleDispatch:
    """A kernel with tuple parameters in its dispatcher's place (tile/kernel.py): each call,
    flattened, goes to the dispatcher of its view (the Kernel for those tuple lengths), whose
    launches, checks and compiled warm path are a plain kernel's."""

    def __init__(
        self, name: str, flattening: Flattening, dispatcher_of: Callable[[Any], Any]
    ) -> None:
        self.name = name
        self.flattening = flattening
        self.dispatcher_of = dispatcher_of  # (view) -> the view's dispatcher for this grid

    def keyword_error(self, kwargs: dict[str, Any]) -> Exception:
        return self.flattening.keyword_error(self.name, kwargs)

    def launched_in_c(self, args: tuple[Any, ...], target: Target, stream: Any) -> bool:
        """Launch the call through its view's dispatcher (the compiled warm path first, as a
        plain kernel's call does); True: nothing is left for `launch`."""
        view, flat = self.flattening.flatten(self.name, args)
        dispatch = self.dispatcher_of(view)
        if not dispatch.launched_in_c(flat, target, stream):
            dispatch.launch(flat, target, stream)
        return True

    def launch(self, args: tuple[Any, ...], target: Target, stream: Any) -> None:
        self.launched_in_c(args, target, stream)
