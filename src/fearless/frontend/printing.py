"""`print(...)` inside kernels, for both tracks: the call read as printf pieces.

`print(a, "b", f"c={x:.3f}", sep=" ", end="\\n")` becomes a list of pieces: literal text and
fields, each field a value with its Python format spec. A track's rule checks the values (a
SIMT scalar, a Tile tile) and builds one printf format with `printf_format`, the conversion of
each field chosen by `conversion` from its dtype, as cuTile Python chooses it:

    bool, i8 ... i32    %d          u8 ... u32   %u
    i64                 %lld        u64          %llu
    f16 bf16 f32        %f          f64          %lf     (`%f`: six decimals, as C's printf)

A format spec `[<>][+ ][#][0][width][.precision][type]` maps to the printf conversion with the
same flags (`{x:>8.3f}` -> `%8.3f`); a type that does not fit the dtype, or a spec with other
parts (`^`, `,`, `!r`), is refused (E0640). Compile-time constants (literals, globals) are
formatted by Python when the kernel compiles. `c_format` turns the printf format back into
Python's `%` formatting, which the simulators use, so that they print the GPU's text.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..dtypes import DType
from ..errors import CompileError, Location
from .intrinsics import Call
from .values import PyObj, Weak

PRINT_HELP = (
    "print string literals, f-strings and scalar values: "
    '`print("i =", i)` or `print(f"x = {x:.3f}")`'
)
_INT_TYPES = frozenset("diouxX")
_FLOAT_TYPES = frozenset("eEfFgG")
_SPEC = re.compile(
    r"(?P<align>[<>])?(?P<sign>[+ ])?(?P<alt>#)?(?P<zero>0)?(?P<width>[0-9]+)?"
    r"(?:\.(?P<precision>[0-9]+))?(?P<type>[diouxXeEfFgG])?"
)
_CONV = re.compile(r"%([-+ #0]*)([0-9]*)(\.[0-9]+)?(hh|h|ll|l)?([diouxXeEfFgG%])")


@dataclass(frozen=True)
class Field:
    """One printed value: the lowered operand, its Python format spec ("" for none)."""

    value: Any
    spec: str
    loc: Location


Piece = str | Field


def print_error(what: str, loc: Location, help: str = PRINT_HELP) -> CompileError:
    return CompileError(what, loc, code="E0640", label="cannot print this", help=help)


def _keyword_text(kw: ast.keyword, loc: Location) -> str:
    if kw.arg not in ("sep", "end"):
        raise print_error(
            f"`print` in a kernel does not take `{kw.arg}=`",
            loc,
            "a kernel prints to the process's standard output; pass only `sep=` and `end=`",
        )
    v = kw.value
    if not (isinstance(v, ast.Constant) and isinstance(v.value, str)):
        raise print_error(f"`{kw.arg}=` of `print` must be a string literal", loc)
    return v.value


def print_call(
    node: ast.Call, lower: Callable[[ast.expr], Any], loc_of: Callable[[ast.AST], Location]
) -> Call:
    """The `Call` of `print(...)` for a track's `print` intrinsic: its arguments are the pieces
    `read_print` reads."""
    return Call("print", print, list(read_print(node, lower, loc_of)), {}, loc_of(node))


def read_print(
    node: ast.Call, lower: Callable[[ast.expr], Any], loc_of: Callable[[ast.AST], Location]
) -> list[Piece]:
    """The pieces `print(...)` writes, its arguments lowered by `lower` (not yet checked)."""
    sep, end = " ", "\n"
    for kw in node.keywords:
        text = _keyword_text(kw, loc_of(kw))
        sep, end = (text, end) if kw.arg == "sep" else (sep, text)
    pieces: list[Piece] = []
    for i, a in enumerate(node.args):
        if i:
            pieces.append(sep)
        if isinstance(a, ast.Starred):
            raise print_error("`print(*...)` cannot unpack in a kernel", loc_of(a))
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            pieces.append(a.value)
        elif isinstance(a, ast.JoinedStr):
            pieces.extend(_fstring(a, lower, loc_of))
        else:
            pieces.append(Field(lower(a), "", loc_of(a)))
    pieces.append(end)
    return pieces


def _fstring(
    node: ast.JoinedStr, lower: Callable[[ast.expr], Any], loc_of: Callable[[ast.AST], Location]
) -> list[Piece]:
    out: list[Piece] = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            out.append(str(part.value))
            continue
        assert isinstance(part, ast.FormattedValue)
        loc = loc_of(part.value)
        if part.conversion != -1:
            raise print_error(f"`!{chr(part.conversion)}` in a kernel's f-string", loc)
        spec = ""
        if part.format_spec is not None:
            fs = part.format_spec
            assert isinstance(fs, ast.JoinedStr)
            if not all(isinstance(v, ast.Constant) for v in fs.values):
                raise print_error("a format spec computed at run time", loc)
            spec = "".join(str(v.value) for v in fs.values if isinstance(v, ast.Constant))
        out.append(Field(lower(part.value), spec, loc))
    return out


def constant_text(value: Any, spec: str, loc: Location) -> str:
    """A compile-time value's text, formatted by Python."""
    try:
        return format(value, spec)
    except (ValueError, TypeError) as e:
        raise print_error(f"format spec `{spec}` does not fit `{value!r}`: {e}", loc) from None


_CONSTANTS = (bool, int, float, str)


def constant_piece(f: Field) -> str | None:
    """A field known at compile time (a literal, a constant global) as format text, Python
    formatting it now; None for a run-time value."""
    v = f.value
    if isinstance(v, Weak):
        return constant_text(v.value, f.spec, f.loc).replace("%", "%%")
    if isinstance(v, PyObj) and isinstance(v.obj, _CONSTANTS):
        return constant_text(v.obj, f.spec, f.loc).replace("%", "%%")
    return None


def format_and_values(
    pieces: Sequence[Piece], scalar: Callable[[Field], tuple[Any, DType]]
) -> tuple[str, list[Any]]:
    """The printf format of `pieces` and the run-time values it reads, in order: constant
    fields become text now, every other field goes through the track's `scalar`, which checks
    it and returns (IR value, dtype)."""
    values: list[Any] = []

    def convert(f: Field) -> str:
        text = constant_piece(f)
        if text is not None:
            return text
        value, dtype = scalar(f)
        values.append(value)
        return conversion(dtype, f.spec, f.loc)

    return printf_format(pieces, convert), values


def conversion(dtype: DType, spec: str, loc: Location) -> str:
    """The printf conversion printing a value of `dtype` with Python format spec `spec`."""
    m = _SPEC.fullmatch(spec)
    if m is None:
        raise print_error(
            f"format spec `{spec}` has no printf form",
            loc,
            "use `[<>][+ ][#][0][width][.precision][type]`, type one of d i o u x X e E f F g G",
        )
    is_float = dtype.is_float
    typ = m.group("type")
    if typ is None:
        typ = "f" if is_float else "d" if dtype.is_signed or dtype.is_bool else "u"
    elif typ not in (_FLOAT_TYPES if is_float else _INT_TYPES):
        raise print_error(
            f"format spec `{spec}` does not fit a value of type {dtype.name}",
            loc,
            f"convert the value first: `fl.{'i64' if is_float else 'f64'}(x)`",
        )
    flags = "-" if m.group("align") == "<" else ""
    flags += (m.group("sign") or "") + (m.group("alt") or "")
    flags += "0" if m.group("zero") and m.group("align") != "<" else ""
    precision = "" if m.group("precision") is None else "." + m.group("precision")
    length = "ll" if dtype.bits == 64 and not is_float else ""
    length = "l" if dtype.bits == 64 and is_float else length
    return f"%{flags}{m.group('width') or ''}{precision}{length}{typ}"


def printf_format(pieces: Sequence[Piece], convert: Callable[[Field], str]) -> str:
    """The printf format of `pieces` (literal text escaped); `convert` gives a field's
    conversion, or the text of a compile-time constant already escaped."""
    return "".join(p.replace("%", "%%") if isinstance(p, str) else convert(p) for p in pieces)


def c_format(fmt: str, values: Sequence[Any]) -> str:
    """printf(fmt, values...) as the GPU prints it, for the simulators (ints as C reads them).
    A value with axes (a NumPy array: a whole Tile) prints as Tile IR's print does, each
    element by the conversion, in nested brackets: `[[0.00, 1.00], [2.00, 3.00]]`."""
    vals = iter(values)
    out: list[Any] = []

    def sub(m: re.Match[str]) -> str:
        flags, width, precision, length, typ = m.groups()
        if typ == "%":
            return "%%"
        conv = f"%{flags}{width}{precision or ''}{typ}"
        v = next(vals)
        if getattr(v, "ndim", 0):
            out.append(_nested(v, lambda x: conv % _c_value(x, typ, length)))
            return "%s"
        out.append(_c_value(v, typ, length))
        return conv

    py = _CONV.sub(sub, fmt)
    return py % tuple(out)


def _c_value(v: Any, typ: str, length: str | None) -> Any:
    """One value as printf reads it for conversion `typ`."""
    if typ in _FLOAT_TYPES:
        return float(v)
    bits = 64 if length == "ll" else 32
    x = int(v) & ((1 << bits) - 1)
    if typ in "di" and x >> (bits - 1):
        x -= 1 << bits
    return x


def _nested(a: Any, one: Callable[[Any], str]) -> str:
    """An array's elements by `one`, as nested bracketed lists joined by ", "."""
    if a.ndim == 0:
        return one(a.item())
    return "[" + ", ".join(_nested(row, one) for row in a) + "]"
