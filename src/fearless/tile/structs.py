"""Struct parameters: a `typing.NamedTuple` or a dataclass whose fields are Tile parameters,
as one kernel parameter (CuTe DSL's struct-like arguments; cuda-oxide's struct arguments).

    class Window(NamedTuple):
        left: fl.i32
        right: fl.i32
        cap: fl.f32

    @tile.kernel
    def k(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], w: Window): ... w.left ...

    k(out.partition((128,)), x, Window(3, 4, 0.5))

A field is annotated as a parameter is (`tile.Tensor[T]`, `tile.Part[T]`, `tile.Atomic[T]`, `|
None`, `tile.Const[int]`, a scalar dtype); a struct holds no tuple or struct. A launch passes an
instance of the class, and each field becomes an ordinary parameter named `w.left`, `w.right`,
...: the signature, the borrow check (a Part field is an output like any Part, named by its
field), the dispatcher and both runners see the fields, spread by `tile/tuples.py`'s
`Flattening` as a tuple parameter's elements are. In the body `w.left` is that parameter, and
`w` itself can be handed to a `@tile.function`. The compiled code is the same as with the
fields written out as parameters.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ForwardRef, TypeGuard

from ..errors import CompileError, Location


@dataclass(frozen=True)
class StructAnnotation:
    """A struct class as a parameter's annotation: its fields and their Tile annotations."""

    cls: type
    fields: tuple[tuple[str, Any], ...]

    def values(self, arg: Any) -> tuple[Any, ...]:
        """An instance's field values, in declared order."""
        return tuple(getattr(arg, name) for name, _ in self.fields)

    def __repr__(self) -> str:
        return self.cls.__name__


@dataclass(frozen=True)
class StructValue:
    """A struct parameter in a kernel body: each field's value (a parameter's), by name."""

    name: str  # the parameter's
    fields: dict[str, Any]

    def field(self, attr: str, loc: Location) -> Any:
        """The value of `name.attr`; an unknown field is E0433, with the close names."""
        if attr in self.fields:
            return self.fields[attr]
        close = difflib.get_close_matches(attr, list(self.fields), n=1, cutoff=0.6)
        names = ", ".join(f"`{n}`" for n in self.fields)
        raise CompileError(
            f"struct parameter `{self.name}` has no field `{attr}`",
            loc,
            code="E0433",
            help=f"a similar name exists: `{self.name}.{close[0]}`"
            if close
            else f"its fields are {names}",
        )


def is_struct_class(ann: Any) -> TypeGuard[type]:
    """Whether `ann` is a class a struct parameter may be: a NamedTuple or a dataclass."""
    if not isinstance(ann, type):
        return False
    named_tuple = issubclass(ann, tuple) and hasattr(ann, "_fields")
    return named_tuple or dataclasses.is_dataclass(ann)


def struct_annotation(
    cls: type,
    scope: dict[str, Any] | None,
    loc: Location | None,
    check_field: Callable[[str, Any], None],
) -> StructAnnotation:
    """`cls`'s fields with their annotations (strings evaluated in its module and `scope`, the
    kernel's), each checked by `check_field(name, annotation)`; a field that is itself a tuple
    or a struct is E0599."""
    raw = _field_annotations(cls)
    module = sys.modules.get(cls.__module__)
    module_globals = dict(vars(module)) if module is not None else {}  # read, never written
    fields = []
    for name, ann in raw.items():
        if isinstance(ann, ForwardRef):  # a NamedTuple's string annotation
            ann = ann.__forward_arg__
        if isinstance(ann, str):
            try:
                ann = eval(ann, module_globals, scope)
            except Exception as exc:
                raise CompileError(
                    f"cannot resolve the annotation `{ann}` of field `{name}` of `{cls.__name__}`: "
                    f"{exc}",
                    loc,
                    code="E0599",
                ) from None
        if is_struct_class(ann) or getattr(ann, "__origin__", None) is tuple:
            raise CompileError(
                f"field `{name}` of `{cls.__name__}` is a `{getattr(ann, '__name__', ann)}`: a "
                "struct parameter's fields are arrays, scalars and Consts",
                loc,
                code="E0599",
                help="pass the inner struct or tuple as a parameter of its own",
            )
        check_field(f"{cls.__name__}.{name}", ann)
        fields.append((name, ann))
    if not fields:
        raise CompileError(
            f"`{cls.__name__}` has no fields: a struct parameter needs at least one",
            loc,
            code="E0599",
        )
    return StructAnnotation(cls, tuple(fields))


def _field_annotations(cls: type) -> dict[str, Any]:
    """The declared fields of a NamedTuple or dataclass and their annotations, in order."""
    if dataclasses.is_dataclass(cls):
        return {f.name: f.type for f in dataclasses.fields(cls)}
    return dict(getattr(cls, "__annotations__", {}))


def field_name(param: str, field: str) -> str:
    """The flat parameter that holds `field` of struct parameter `param`."""
    return f"{param}.{field}"
