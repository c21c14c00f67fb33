"""The syntax of the IR's text form: tokens, lines, types, attributes and op/block syntax.

The first phase of `ir/simt/parser.py`: each line of the printer's text becomes a syntax record
(`OpSyntax`, `BlockSyntax`) holding its tokens, so the second phase can create every block and
value before building any op. Errors raise `IRParseError` (a ValueError) naming the line and
column.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ... import dtypes
from ...errors import Location
from ..core import (
    BLOCK_INDEX,
    BLOCK_INDEX_2D,
    THREAD_INDEX,
    THREAD_INDEX_2D,
    ArrayType,
    ScalarType,
    ThreadIndex2DType,
    Type,
)


class IRParseError(ValueError):
    """Malformed IR text: `line` and `col` (both 1-based) say where."""

    def __init__(self, message: str, line: int, col: int, source_line: str | None = None) -> None:
        self.message = message
        self.line = line
        self.col = col
        text = f"line {line}, column {col}: {message}"
        if source_line is not None:
            text += f"\n    {source_line}\n    {' ' * (col - 1)}^"
        super().__init__(text)


# ------------------------------------------------------------------------------------ tokens


class Tok(NamedTuple):
    kind: str  # value block symbol number string name punct comment
    text: str
    line: int
    col: int  # 1-based


_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r]+)
  | (?P<comment>//[^\n]*)
  | (?P<value>%[\w.$]+)
  | (?P<block>\^[\w.$]+)
  | (?P<symbol>@[\w.$]+)
  | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<name>[^\W\d]\w*(?:\.\w+)*)
  | (?P<punct>[()\[\]{},:=\-<>])
    """,
    re.VERBOSE,
)


def tokenize(text: str) -> list[list[Tok]]:
    """The tokens of each line (index 0 is line 1), whitespace dropped."""
    out: list[list[Tok]] = []
    finditer = _TOKEN.finditer
    for lineno, line in enumerate(text.split("\n"), start=1):
        toks: list[Tok] = []
        pos = 0
        for m in finditer(line):
            if m.start() != pos:
                break
            pos = m.end()
            kind = m.lastgroup
            if kind != "ws":
                assert kind is not None
                toks.append(Tok(kind, m.group(), lineno, m.start() + 1))
        if pos != len(line):
            raise IRParseError(f"unexpected character {line[pos]!r}", lineno, pos + 1, line)
        out.append(toks)
    return out


class Line:
    """A cursor over the tokens of one line, its trailing comment set apart."""

    def __init__(self, toks: list[Tok], source: str, lineno: int) -> None:
        self.comment: Tok | None = None
        if toks and toks[-1].kind == "comment":
            self.comment = toks[-1]
            toks = toks[:-1]
        self.toks = toks
        self.source = source
        self.lineno = lineno
        self.pos = 0

    def error(self, message: str, tok: Tok | None = None) -> IRParseError:
        if tok is None:
            tok = self.peek()
        if tok is None:  # at the end of the line: point just past its last token
            last = self.toks[-1] if self.toks else None
            col = last.col + len(last.text) if last is not None else 1
            return IRParseError(message, self.lineno, col, self.source)
        return IRParseError(message, tok.line, tok.col, self.source)

    def peek(self, offset: int = 0) -> Tok | None:
        i = self.pos + offset
        return self.toks[i] if i < len(self.toks) else None

    def at(self, kind: str, text: str | None = None) -> bool:
        t = self.peek()
        return t is not None and t.kind == kind and (text is None or t.text == text)

    def next(self, what: str) -> Tok:
        t = self.peek()
        if t is None:
            raise self.error(f"expected {what} at the end of the line")
        self.pos += 1
        return t

    def expect(self, kind: str, text: str | None = None, what: str | None = None) -> Tok:
        desc = what or (f"`{text}`" if text is not None else kind)
        t = self.peek()
        if t is None:
            raise self.error(f"expected {desc} at the end of the line")
        if t.kind != kind or (text is not None and t.text != text):
            raise self.error(f"expected {desc}, found `{t.text}`", t)
        self.pos += 1
        return t

    def accept(self, kind: str, text: str | None = None) -> Tok | None:
        if self.at(kind, text):
            self.pos += 1
            return self.toks[self.pos - 1]
        return None

    def end(self) -> None:
        t = self.peek()
        if t is not None:
            raise self.error(f"unexpected `{t.text}`", t)


# ------------------------------------------------------------------------------------- types

_SCALARS: dict[str, ScalarType] = {t.name: ScalarType(t) for t in dtypes.ALL}


def read_type(ln: Line) -> Type:
    t = ln.expect("name", what="a type")
    if t.text in _SCALARS:
        return _SCALARS[t.text]
    if t.text == "ThreadIndex":
        return THREAD_INDEX
    if t.text == "BlockIndex":
        return BLOCK_INDEX
    if t.text == "BlockIndex2D":
        return BLOCK_INDEX_2D
    if t.text in ("Shared", "Local", "Const"):
        ln.expect("punct", "[")
        d = ln.expect("name", what="a dtype")
        if d.text not in _SCALARS:
            raise ln.error(f"unknown dtype `{d.text}`", d)
        dims = []
        while ln.accept("punct", ","):
            dims.append(int(ln.expect("number", what="an extent").text))
        ln.expect("punct", "]")
        most = 3 if t.text == "Const" else 2
        if not 1 <= len(dims) <= most or min(dims) < 1:
            raise ln.error(f"a {t.text} array has 1 to {most} positive extents", d)
        dt, shape = _SCALARS[d.text].dtype, tuple(dims)
        if t.text == "Const":
            return ArrayType(dt, False, len(dims), const=shape)
        if t.text == "Shared":
            return ArrayType(dt, False, len(dims), shared=shape)
        return ArrayType(dt, False, len(dims), local=shape)
    if t.text == "ThreadIndex2D":
        if not ln.accept("punct", "<"):
            return THREAD_INDEX_2D
        w = ln.expect("number", what="a chunk width")
        ln.expect("punct", ">")
        return ThreadIndex2DType(width=int(w.text))
    if t.text in ("Slice", "DisjointSlice", "AtomicSlice"):
        ln.expect("punct", "[")
        d = ln.expect("name", what="a dtype")
        if d.text not in _SCALARS:
            raise ln.error(f"unknown dtype `{d.text}`", d)
        ndim = 1
        if ln.accept("punct", ","):
            n = ln.expect("number", what="a rank")
            if n.text not in ("1", "2"):
                raise ln.error(f"an array has rank 1 or 2, not {n.text}", n)
            ndim = int(n.text)
        ln.expect("punct", "]")
        dtype = _SCALARS[d.text].dtype
        return ArrayType(dtype, t.text == "DisjointSlice", ndim, atomic=t.text == "AtomicSlice")
    raise ln.error(f"unknown type `{t.text}`", t)


def parse_type(text: str) -> Type:
    """The type `str(t)` printed: `f32`, `Slice[f32, 2]`, `ThreadIndex`, ..."""
    lines = tokenize(text)
    if len(lines) != 1:
        raise IRParseError("a type is one line of text", 1, 1, text)
    ln = Line(lines[0], text, 1)
    t = read_type(ln)
    ln.end()
    return t


# -------------------------------------------------------------------------------- attributes


def read_literal(ln: Line) -> Any:
    """A Python literal as `repr` prints attribute values: numbers, bools, strings, tuples."""
    t = ln.next("a value")
    if t.kind == "punct" and t.text == "-":
        v = read_literal(ln)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ln.error("`-` applies to a number only", t)
        return -v
    if t.kind == "number":
        if any(c in t.text for c in ".eE"):
            return float(t.text)
        return int(t.text)
    if t.kind == "name":
        consts: dict[str, Any] = {
            "True": True,
            "False": False,
            "None": None,
            "inf": math.inf,
            "nan": math.nan,
        }
        if t.text in consts:
            return consts[t.text]
        raise ln.error(f"unknown value `{t.text}`", t)
    if t.kind == "string":
        return ast.literal_eval(t.text)
    if t.kind == "punct" and t.text == "(":
        items: list[Any] = []
        trailing_comma = False
        while not ln.accept("punct", ")"):
            items.append(read_literal(ln))
            trailing_comma = bool(ln.accept("punct", ","))
            if not trailing_comma and not ln.at("punct", ")"):
                raise ln.error("expected `,` or `)`")
        if len(items) == 1 and not trailing_comma:
            return items[0]  # (x) is x, as in Python
        return tuple(items)
    raise ln.error(f"expected a value, found `{t.text}`", t)


def read_attrs(ln: Line) -> dict[str, tuple[Any, Tok, Tok]]:
    """name -> (value, the name's token, the value's first token)."""
    attrs: dict[str, tuple[Any, Tok, Tok]] = {}
    ln.expect("punct", "{")
    while True:
        k = ln.expect("name", what="an attribute name")
        if k.text in attrs:
            raise ln.error(f"attribute `{k.text}` given twice", k)
        ln.expect("punct", "=")
        start = ln.peek() or k
        attrs[k.text] = (read_literal(ln), k, start)
        if ln.accept("punct", "}"):
            return attrs
        ln.expect("punct", ",", what="`,` or `}`")


# ------------------------------------------------------------------------------ syntax records


@dataclass
class OpSyntax:
    ln: Line
    name: Tok
    results: list[Tok] = field(default_factory=list)
    result_types: list[Type] = field(default_factory=list)
    attrs: dict[str, tuple[Any, Tok, Tok]] = field(default_factory=dict)
    operands: list[Tok] = field(default_factory=list)
    targets: list[tuple[Tok, list[Tok]]] = field(default_factory=list)
    loc: Location | None = None


@dataclass
class BlockSyntax:
    ln: Line
    name: Tok
    args: list[tuple[Tok, Type]]
    label: str
    ops: list[OpSyntax] = field(default_factory=list)


_LOC = re.compile(r"^(?:(?P<file>.*\S):)?(?P<line>\d+):(?P<col>\d+)$")


def loc_comment(ln: Line, filename: str) -> Location | None:
    c = ln.comment
    if c is None:
        return None
    m = _LOC.match(c.text[2:].strip())
    if m is None:
        raise IRParseError(
            "expected a location comment `// line:col` after an op", c.line, c.col, ln.source
        )
    col = int(m.group("col"))
    if col < 1:
        raise IRParseError("location columns start at 1", c.line, c.col, ln.source)
    return Location(m.group("file") or filename, int(m.group("line")), col - 1)


def read_values(ln: Line) -> list[Tok]:
    vals = [ln.expect("value", what="a value `%n`")]
    while ln.accept("punct", ","):
        vals.append(ln.expect("value", what="a value `%n`"))
    return vals


def read_target(ln: Line) -> tuple[Tok, list[Tok]]:
    b = ln.expect("block", what="a block `^bbN`")
    args: list[Tok] = []
    if ln.accept("punct", "("):
        args = read_values(ln)
        ln.expect("punct", ")", what="`,` or `)`")
    return b, args


def read_op(ln: Line, filename: str) -> OpSyntax:
    results: list[Tok] = []
    if ln.at("value"):
        results = read_values(ln)
        ln.expect("punct", "=", what="`=` after the results")
    name = ln.expect("name", what="an op name")
    s = OpSyntax(ln, name, results)
    if name.text in ("br", "cond_br", "return"):
        if results:
            raise ln.error(f"`{name.text}` has no results", results[0])
        if name.text == "br":
            s.targets.append(read_target(ln))
        elif name.text == "cond_br":
            s.operands.append(ln.expect("value", what="a condition `%n`"))
            ln.expect("punct", ",")
            s.targets.append(read_target(ln))
            ln.expect("punct", ",")
            s.targets.append(read_target(ln))
    else:
        if ln.at("punct", "{"):
            s.attrs = read_attrs(ln)
        if ln.at("value"):
            s.operands = read_values(ln)
        if results:
            ln.expect("punct", ":", what="`:` and the result types")
            s.result_types.append(read_type(ln))
            while ln.accept("punct", ","):
                s.result_types.append(read_type(ln))
            if len(s.result_types) != len(results):
                raise ln.error(
                    f"{len(results)} result(s) but {len(s.result_types)} type(s)", results[0]
                )
        elif ln.at("punct", ":"):
            raise ln.error(f"`{name.text}` without results takes no result type")
    ln.end()
    s.loc = loc_comment(ln, filename)
    if s.loc is None:  # no location comment: the op's place in the text
        s.loc = Location(filename, name.line, (results[0] if results else name).col - 1)
    return s


def read_typed_values(ln: Line, what: str) -> list[tuple[Tok, Type]]:
    """`%a: T, %b: U)` after an opening `(`, through the closing `)` (at least one value)."""
    out: list[tuple[Tok, Type]] = []
    while True:
        v = ln.expect("value", what=what)
        ln.expect("punct", ":")
        out.append((v, read_type(ln)))
        if ln.accept("punct", ")"):
            return out
        ln.expect("punct", ",", what="`,` or `)`")


def read_block_header(ln: Line) -> BlockSyntax:
    name = ln.expect("block")
    args = read_typed_values(ln, "a block argument `%n`") if ln.accept("punct", "(") else []
    ln.expect("punct", ":", what="`:` after the block name")
    ln.end()
    label = ln.comment.text[2:].strip() if ln.comment is not None else ""
    return BlockSyntax(ln, name, args, label)
