"""Read the text `ir/printer.py` prints back into an IR `Function`.

    func @vecadd(%0: Slice[f32], %1: Slice[f32], %2: DisjointSlice[f32]) {   // params: a, b, c
    ^bb0:  // entry
      %3 = thread.index_1d : ThreadIndex                       // 4:9
      %4 = len %2 : i64                                        // 5:12
      %5 = index.int %3 : i64                                  // 5:8
      %6 = compare {pred='lt'} %5, %4 : bool                   // 5:8
      cond_br %6, ^bb1, ^bb2                                   // 5:8
    ^bb1(%7: i64):  // if.then
      ...
    }

`parse_function(print_function(fn))` prints exactly as `fn` does, for every op kind of
`ir/ops.py` and every type of `ir/core.py`, with or without the `// line:col` location
comments. What the printer does not print cannot come back: the source file of locations
(the `filename` argument, or a `// file:line:col` comment, supplies one), the function's
and the block arguments' own locations (they get the position of their text), and the names
of block arguments. Parameter names come from the `// params:` comment; without it a
parameter written with a name (`%a: Slice[f32]`) is called by it. Value and block names need
not be numbers nor in order (`%i`, `^loop`), so tests can write IR by hand; the printer
renumbers them. Lines holding only a comment are skipped, so the text of
`Kernel.inspect(stage="ir")` parses as it is.

A hand-written tokenizer and a recursive-descent parser, in two phases: the first reads every
line into syntax records, the second creates all blocks and values and then builds the ops
with their own constructors (a use may precede its definition in block order, as in a loop).
Errors raise `IRParseError` (a ValueError) naming the line and column. The parser checks what
building an op needs (operand and result counts, attributes, the result type the op gives);
dominance, terminators and operand typing are the verifier's (`ir/verifier.py`).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .. import dtypes
from ..errors import Location
from . import ops
from .core import (
    THREAD_INDEX,
    THREAD_INDEX_2D,
    ArrayType,
    Block,
    Function,
    Op,
    ScalarType,
    Type,
    Value,
)

__all__ = ["IRParseError", "parse_function", "parse_type"]


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


class _Tok(NamedTuple):
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
  | (?P<punct>[()\[\]{},:=\-])
    """,
    re.VERBOSE,
)


def _tokenize(text: str) -> list[list[_Tok]]:
    """The tokens of each line (index 0 is line 1), whitespace dropped."""
    out: list[list[_Tok]] = []
    finditer = _TOKEN.finditer
    for lineno, line in enumerate(text.split("\n"), start=1):
        toks: list[_Tok] = []
        pos = 0
        for m in finditer(line):
            if m.start() != pos:
                break
            pos = m.end()
            kind = m.lastgroup
            if kind != "ws":
                assert kind is not None
                toks.append(_Tok(kind, m.group(), lineno, m.start() + 1))
        if pos != len(line):
            raise IRParseError(f"unexpected character {line[pos]!r}", lineno, pos + 1, line)
        out.append(toks)
    return out


class _Line:
    """A cursor over the tokens of one line, its trailing comment set apart."""

    def __init__(self, toks: list[_Tok], source: str, lineno: int) -> None:
        self.comment: _Tok | None = None
        if toks and toks[-1].kind == "comment":
            self.comment = toks[-1]
            toks = toks[:-1]
        self.toks = toks
        self.source = source
        self.lineno = lineno
        self.pos = 0

    def error(self, message: str, tok: _Tok | None = None) -> IRParseError:
        if tok is None:
            tok = self.peek()
        if tok is None:  # at the end of the line: point just past its last token
            last = self.toks[-1] if self.toks else None
            col = last.col + len(last.text) if last is not None else 1
            return IRParseError(message, self.lineno, col, self.source)
        return IRParseError(message, tok.line, tok.col, self.source)

    def peek(self, offset: int = 0) -> _Tok | None:
        i = self.pos + offset
        return self.toks[i] if i < len(self.toks) else None

    def at(self, kind: str, text: str | None = None) -> bool:
        t = self.peek()
        return t is not None and t.kind == kind and (text is None or t.text == text)

    def next(self, what: str) -> _Tok:
        t = self.peek()
        if t is None:
            raise self.error(f"expected {what} at the end of the line")
        self.pos += 1
        return t

    def expect(self, kind: str, text: str | None = None, what: str | None = None) -> _Tok:
        desc = what or (f"`{text}`" if text is not None else kind)
        t = self.peek()
        if t is None:
            raise self.error(f"expected {desc} at the end of the line")
        if t.kind != kind or (text is not None and t.text != text):
            raise self.error(f"expected {desc}, found `{t.text}`", t)
        self.pos += 1
        return t

    def accept(self, kind: str, text: str | None = None) -> _Tok | None:
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


def _parse_type(ln: _Line) -> Type:
    t = ln.expect("name", what="a type")
    if t.text in _SCALARS:
        return _SCALARS[t.text]
    if t.text == "ThreadIndex":
        return THREAD_INDEX
    if t.text == "ThreadIndex2D":
        return THREAD_INDEX_2D
    if t.text in ("Slice", "DisjointSlice"):
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
        return ArrayType(_SCALARS[d.text].dtype, t.text == "DisjointSlice", ndim)
    raise ln.error(f"unknown type `{t.text}`", t)


def parse_type(text: str) -> Type:
    """The type `str(t)` printed: `f32`, `Slice[f32, 2]`, `ThreadIndex`, ..."""
    lines = _tokenize(text)
    if len(lines) != 1:
        raise IRParseError("a type is one line of text", 1, 1, text)
    ln = _Line(lines[0], text, 1)
    t = _parse_type(ln)
    ln.end()
    return t


# -------------------------------------------------------------------------------- attributes


def _parse_literal(ln: _Line) -> Any:
    """A Python literal as `repr` prints attribute values: numbers, bools, strings, tuples."""
    t = ln.next("a value")
    if t.kind == "punct" and t.text == "-":
        v = _parse_literal(ln)
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
            items.append(_parse_literal(ln))
            trailing_comma = bool(ln.accept("punct", ","))
            if not trailing_comma and not ln.at("punct", ")"):
                raise ln.error("expected `,` or `)`")
        if len(items) == 1 and not trailing_comma:
            return items[0]  # (x) is x, as in Python
        return tuple(items)
    raise ln.error(f"expected a value, found `{t.text}`", t)


def _parse_attrs(ln: _Line) -> dict[str, tuple[Any, _Tok, _Tok]]:
    """name -> (value, the name's token, the value's first token)."""
    attrs: dict[str, tuple[Any, _Tok, _Tok]] = {}
    ln.expect("punct", "{")
    while True:
        k = ln.expect("name", what="an attribute name")
        if k.text in attrs:
            raise ln.error(f"attribute `{k.text}` given twice", k)
        ln.expect("punct", "=")
        start = ln.peek() or k
        attrs[k.text] = (_parse_literal(ln), k, start)
        if ln.accept("punct", "}"):
            return attrs
        ln.expect("punct", ",", what="`,` or `}`")


# ------------------------------------------------------------------------------ syntax records


@dataclass
class _OpSyntax:
    ln: _Line
    name: _Tok
    results: list[_Tok] = field(default_factory=list)
    result_types: list[Type] = field(default_factory=list)
    attrs: dict[str, tuple[Any, _Tok, _Tok]] = field(default_factory=dict)
    operands: list[_Tok] = field(default_factory=list)
    targets: list[tuple[_Tok, list[_Tok]]] = field(default_factory=list)
    loc: Location | None = None


@dataclass
class _BlockSyntax:
    ln: _Line
    name: _Tok
    args: list[tuple[_Tok, Type]]
    label: str
    ops: list[_OpSyntax] = field(default_factory=list)


_LOC = re.compile(r"^(?:(?P<file>.*\S):)?(?P<line>\d+):(?P<col>\d+)$")


def _loc_comment(ln: _Line, filename: str) -> Location | None:
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


def _value_list(ln: _Line) -> list[_Tok]:
    vals = [ln.expect("value", what="a value `%n`")]
    while ln.accept("punct", ","):
        vals.append(ln.expect("value", what="a value `%n`"))
    return vals


def _target(ln: _Line) -> tuple[_Tok, list[_Tok]]:
    b = ln.expect("block", what="a block `^bbN`")
    args: list[_Tok] = []
    if ln.accept("punct", "("):
        args = _value_list(ln)
        ln.expect("punct", ")", what="`,` or `)`")
    return b, args


def _parse_op(ln: _Line, filename: str) -> _OpSyntax:
    results: list[_Tok] = []
    if ln.at("value"):
        results = _value_list(ln)
        ln.expect("punct", "=", what="`=` after the results")
    name = ln.expect("name", what="an op name")
    s = _OpSyntax(ln, name, results)
    if name.text in ("br", "cond_br", "return"):
        if results:
            raise ln.error(f"`{name.text}` has no results", results[0])
        if name.text == "br":
            s.targets.append(_target(ln))
        elif name.text == "cond_br":
            s.operands.append(ln.expect("value", what="a condition `%n`"))
            ln.expect("punct", ",")
            s.targets.append(_target(ln))
            ln.expect("punct", ",")
            s.targets.append(_target(ln))
    else:
        if ln.at("punct", "{"):
            s.attrs = _parse_attrs(ln)
        if ln.at("value"):
            s.operands = _value_list(ln)
        if results:
            ln.expect("punct", ":", what="`:` and the result types")
            s.result_types.append(_parse_type(ln))
            while ln.accept("punct", ","):
                s.result_types.append(_parse_type(ln))
            if len(s.result_types) != len(results):
                raise ln.error(
                    f"{len(results)} result(s) but {len(s.result_types)} type(s)", results[0]
                )
        elif ln.at("punct", ":"):
            raise ln.error(f"`{name.text}` without results takes no result type")
    ln.end()
    s.loc = _loc_comment(ln, filename)
    if s.loc is None:  # no location comment: the op's place in the text
        s.loc = Location(filename, name.line, (results[0] if results else name).col - 1)
    return s


def _parse_typed_values(ln: _Line, what: str) -> list[tuple[_Tok, Type]]:
    """`%a: T, %b: U)` after an opening `(`, through the closing `)` (at least one value)."""
    out: list[tuple[_Tok, Type]] = []
    while True:
        v = ln.expect("value", what=what)
        ln.expect("punct", ":")
        out.append((v, _parse_type(ln)))
        if ln.accept("punct", ")"):
            return out
        ln.expect("punct", ",", what="`,` or `)`")


def _parse_block_header(ln: _Line) -> _BlockSyntax:
    name = ln.expect("block")
    args = _parse_typed_values(ln, "a block argument `%n`") if ln.accept("punct", "(") else []
    ln.expect("punct", ":", what="`:` after the block name")
    ln.end()
    label = ln.comment.text[2:].strip() if ln.comment is not None else ""
    return _BlockSyntax(ln, name, args, label)


# ------------------------------------------------------------------------------------ builder


def _loc_of(tok: _Tok, filename: str) -> Location:
    return Location(filename, tok.line, tok.col - 1)


class _Builder:
    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.values: dict[str, Value] = {}
        self.blocks: dict[str, Block] = {}

    def define(self, ln: _Line, tok: _Tok, v: Value) -> None:
        if tok.text in self.values:
            raise ln.error(f"value {tok.text} is defined twice", tok)
        self.values[tok.text] = v

    def use(self, ln: _Line, tok: _Tok) -> Value:
        v = self.values.get(tok.text)
        if v is None:
            raise ln.error(f"value {tok.text} is defined nowhere", tok)
        return v

    def block(self, ln: _Line, tok: _Tok) -> Block:
        b = self.blocks.get(tok.text)
        if b is None:
            raise ln.error(f"block {tok.text} is defined nowhere", tok)
        return b


_Maker = Callable[[_OpSyntax, list[Value], dict[str, Any], Location], Op]


def _need(s: _OpSyntax, cond: bool, message: str, tok: _Tok | None = None) -> None:
    if not cond:
        raise s.ln.error(message, tok or s.name)


def _choice(s: _OpSyntax, attrs: dict[str, Any], key: str, allowed: Any) -> Any:
    v = attrs[key]
    _need(
        s,
        isinstance(v, str) and v in allowed,
        f"`{s.name.text}` {key} must be one of {', '.join(sorted(allowed))}, not {v!r}",
        s.attrs[key][2],
    )
    return v


def _array_operand(s: _OpSyntax, operands: list[Value]) -> ArrayType:
    _need(s, bool(operands), f"`{s.name.text}` needs an array operand")
    t = operands[0].type
    _need(s, isinstance(t, ArrayType), f"`{s.name.text}` needs an array, not {t}", s.operands[0])
    assert isinstance(t, ArrayType)
    return t


def _make_constant(s: _OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
    t = s.result_types[0]
    _need(s, isinstance(t, ScalarType), f"a constant is a scalar, not {t}")
    assert isinstance(t, ScalarType)
    dt = t.dtype
    v = attrs["value"]
    at = s.attrs["value"][2]
    if dt.is_bool:
        _need(s, isinstance(v, bool), f"a bool constant is True or False, not {v!r}", at)
    elif dt.is_float:
        _need(
            s, isinstance(v, int | float) and not isinstance(v, bool), f"{v!r} is not a number", at
        )
        v = float(v)
    else:
        _need(
            s,
            isinstance(v, int) and not isinstance(v, bool),
            f"a {dt.name} constant is an integer, not {v!r}",
            at,
        )
        lo, hi = dtypes.int_range(dt)
        _need(s, lo <= v <= hi, f"{v} does not fit {dt.name}", at)
    return ops.Constant(v, dt, loc)


def _make_math(s: _OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
    fn = _choice(s, attrs, "fn", ops.MATH_FNS)
    n = ops.MATH_FNS[fn]
    _need(s, len(operands) == n, f"math `{fn}` takes {n} operand(s), not {len(operands)}")
    return ops.MathCall(fn, operands, loc)


def _make_axis(s: _OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
    axis = attrs["axis"]
    _need(
        s,
        axis in (0, 1) and not isinstance(axis, bool),
        f"axis is 0 or 1, not {axis!r}",
        s.attrs["axis"][2],
    )
    return ops.ThreadIndexAxis(operands[0], axis, loc)


def _make_len(s: _OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
    t = _array_operand(s, operands)
    if t.ndim == 1:
        _need(s, "axis" not in attrs, "the `len` of a 1-D array takes no axis")
        return ops.ArrayLen(operands[0], loc)
    _need(s, "axis" in attrs, f"the `len` of a {t.ndim}-D array names its axis: `len {{axis=0}}`")
    axis = attrs["axis"]
    _need(
        s,
        isinstance(axis, int) and not isinstance(axis, bool) and 0 <= axis < t.ndim,
        f"axis {axis!r} is not an axis of {t}",
        s.attrs["axis"][2],
    )
    return ops.ArrayLen(operands[0], loc, axis)


def _make_load(s: _OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
    t = _array_operand(s, operands)
    n = len(operands) - 1
    _need(s, n == t.ndim, f"a load from {t} takes {t.ndim} index(es), not {n}")
    return ops.Load(operands[0], operands[1:], loc)


def _make_store(s: _OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
    t = _array_operand(s, operands)
    n = len(operands) - 2
    _need(s, n == t.ndim, f"a store to {t} takes {t.ndim} index(es) and a value")
    return ops.Store(operands[0], operands[1:-1], operands[-1], loc)


def _make_check(s: _OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
    sites = attrs["sites"]
    at = s.attrs["sites"][2]
    _need(
        s,
        isinstance(sites, tuple)
        and len(sites) > 0
        and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in sites),
        f"sites is a tuple of site numbers such as (0,) or (0, 1), not {sites!r}",
        at,
    )
    _need(
        s,
        len(operands) == 2 * len(sites),
        f"{len(sites)} site(s) take {2 * len(sites)} operands (index, length per site),"
        f" not {len(operands)}",
    )
    op = ops.BoundsCheck(operands[0], operands[1], sites[0], loc)
    op.operands = list(operands)
    op.attrs["sites"] = tuple(sites)
    return op


# opname -> (operand count or None when the maker checks it, result count, attrs, optional
# attrs, maker)
_SPECS: dict[str, tuple[int | None, int, frozenset[str], frozenset[str], _Maker]] = {}


def _spec(name: str, n_operands: int | None, n_results: int, attrs: str, maker: _Maker) -> None:
    required = frozenset(a for a in attrs.split() if not a.endswith("?"))
    optional = frozenset(a[:-1] for a in attrs.split() if a.endswith("?"))
    _SPECS[name] = (n_operands, n_results, required, optional, maker)


_spec("constant", 0, 1, "value", _make_constant)
_spec(
    "binary",
    2,
    1,
    "kind",
    lambda s, o, a, loc: ops.Binary(_choice(s, a, "kind", ops.BINARY_KINDS), o[0], o[1], loc),
)
_spec(
    "unary",
    1,
    1,
    "kind",
    lambda s, o, a, loc: ops.Unary(_choice(s, a, "kind", ops.UNARY_KINDS), o[0], loc),
)
_spec(
    "compare",
    2,
    1,
    "pred",
    lambda s, o, a, loc: ops.Compare(_choice(s, a, "pred", ops.COMPARE_PREDS), o[0], o[1], loc),
)
_spec("cast", 1, 1, "", lambda s, o, a, loc: _make_cast(s, o, loc))
_spec("select", 3, 1, "", lambda s, o, a, loc: ops.Select(o[0], o[1], o[2], loc))
_spec("math", None, 1, "fn", _make_math)
_spec("thread.index_1d", 0, 1, "", lambda s, o, a, loc: ops.ThreadIndex1D(loc))
_spec("thread.index_2d", 0, 1, "", lambda s, o, a, loc: ops.ThreadIndex2D(loc))
_spec("index.axis", 1, 1, "axis", _make_axis)
_spec(
    "thread.reg",
    0,
    1,
    "reg",
    lambda s, o, a, loc: ops.SpecialReg(_choice(s, a, "reg", ops.SPECIAL_REGS), loc),
)
_spec("index.int", 1, 1, "", lambda s, o, a, loc: ops.IndexToInt(o[0], loc))
_spec("len", 1, 1, "axis?", _make_len)
_spec("load", None, 1, "", _make_load)
_spec("store", None, 0, "", _make_store)
_spec("check.bounds", None, 0, "sites", _make_check)
_spec("return", 0, 0, "", lambda s, o, a, loc: ops.Return(loc))


def _make_cast(s: _OpSyntax, operands: list[Value], loc: Location) -> Op:
    t = s.result_types[0] if s.result_types else None
    _need(s, isinstance(t, ScalarType), f"a cast converts to a scalar type, not {t}")
    assert isinstance(t, ScalarType)
    return ops.Cast(operands[0], t.dtype, loc)


def _build_op(b: _Builder, s: _OpSyntax) -> Op:
    ln = s.ln
    loc = s.loc
    assert loc is not None
    opname = s.name.text
    operands = [b.use(ln, t) for t in s.operands]
    if opname == "br":
        ((dest, args),) = s.targets
        return ops.Br(b.block(ln, dest), [b.use(ln, t) for t in args], loc)
    if opname == "cond_br":
        (t_dest, t_args), (f_dest, f_args) = s.targets
        return ops.CondBr(
            operands[0],
            b.block(ln, t_dest),
            [b.use(ln, t) for t in t_args],
            b.block(ln, f_dest),
            [b.use(ln, t) for t in f_args],
            loc,
        )
    spec = _SPECS.get(opname)
    if spec is None:
        raise ln.error(f"unknown op `{opname}`", s.name)
    n_operands, n_results, required, optional, maker = spec
    if n_operands is not None and len(operands) != n_operands:
        raise ln.error(f"`{opname}` takes {n_operands} operand(s), not {len(operands)}", s.name)
    if len(s.results) != n_results:
        raise ln.error(f"`{opname}` has {n_results} result(s), not {len(s.results)}", s.name)
    for key, (_, tok, _) in s.attrs.items():
        if key not in required and key not in optional:
            raise ln.error(f"`{opname}` has no attribute `{key}`", tok)
    for key in sorted(required):
        if key not in s.attrs:
            raise ln.error(f"`{opname}` needs the attribute `{key}`", s.name)
    attrs = {k: v for k, (v, _, _) in s.attrs.items()}
    try:
        op = maker(s, operands, attrs, loc)
    except AssertionError as exc:  # a constructor's own check, not anticipated above
        raise ln.error(f"`{opname}` does not accept these operands ({exc})", s.name) from None
    for r, want, tok in zip(op.results, s.result_types, s.results, strict=True):
        if r.type != want:
            raise ln.error(f"`{opname}` here gives {r.type}, not {want}", tok)
    return op


# ---------------------------------------------------------------------------------- function


def parse_function(text: str, filename: str = "<ir>") -> Function:
    """The function `text` (as `print_function` prints it) describes.

    `filename` is the file of the locations (the printer omits it); ops without a location
    comment are located at their own place in `text`. Raises IRParseError on malformed text.
    """
    src_lines = text.split("\n")
    tok_lines = _tokenize(text)
    header: _Line | None = None
    blocks: list[_BlockSyntax] = []
    closed = False
    for i, toks in enumerate(tok_lines):
        ln = _Line(toks, src_lines[i], i + 1)
        if not ln.toks:
            continue  # blank, or a comment alone
        first = ln.toks[0]
        if closed:
            raise ln.error("text after the end of the function", first)
        if header is None:
            if not (first.kind == "name" and first.text == "func"):
                raise ln.error(f"expected `func @name(...)`, found `{first.text}`", first)
            header = ln
        elif first.kind == "punct" and first.text == "}":
            ln.pos = 1
            ln.end()
            closed = True
        elif first.kind == "block":
            blocks.append(_parse_block_header(ln))
        elif not blocks:
            raise ln.error("an op before the first block `^bb0:`", first)
        else:
            blocks[-1].ops.append(_parse_op(ln, filename))
    if header is None:
        raise IRParseError("no function in the text (expected `func @name(...)`)", 1, 1)
    if not closed:
        last = len(src_lines)
        raise IRParseError("the function is not closed by `}`", last, 1, src_lines[-1])
    if not blocks:
        raise header.error("a function needs at least one block", header.toks[0])
    return _build(header, blocks, filename)


def _parse_header(ln: _Line) -> tuple[_Tok, list[tuple[_Tok, Type]], list[str] | None]:
    ln.expect("name", "func")
    name = ln.expect("symbol", what="the function's name `@name`")
    ln.expect("punct", "(")
    params = [] if ln.accept("punct", ")") else _parse_typed_values(ln, "a parameter `%n`")
    ln.expect("punct", "{", what="`{` after the parameters")
    ln.end()
    names: list[str] | None = None
    c = ln.comment
    if c is not None:
        body = c.text[2:].strip()
        if not body.startswith("params:"):
            raise IRParseError(
                "expected the parameter names comment `// params: a, b`", c.line, c.col, ln.source
            )
        rest = body[len("params:") :].strip()
        names = [n.strip() for n in rest.split(",")] if rest else []
        if len(names) != len(params):
            raise IRParseError(
                f"{len(params)} parameter(s) but {len(names)} name(s) in the comment",
                c.line,
                c.col,
                ln.source,
            )
    return name, params, names


def _plain_name(tok: _Tok) -> str:
    """The name a value written `%k` carries: none for a number such as `%3`."""
    body = tok.text[1:]
    return "" if body.isdigit() else body


def _build(header: _Line, syntax: list[_BlockSyntax], filename: str) -> Function:
    name, params, names = _parse_header(header)
    fn = Function(name.text[1:], _loc_of(header.toks[0], filename))
    b = _Builder(filename)
    for bs in syntax:
        if bs.name.text in b.blocks:
            raise bs.ln.error(f"block {bs.name.text} is defined twice", bs.name)
        b.blocks[bs.name.text] = fn.new_block(bs.label)
    entry = fn.entry
    if syntax[0].args:
        raise syntax[0].ln.error(
            "the entry block's arguments are the function's parameters: declare them in the"
            " `func` line",
            syntax[0].args[0][0],
        )
    for k, (tok, t) in enumerate(params):
        pname = names[k] if names is not None else _plain_name(tok)
        b.define(header, tok, entry.add_arg(t, _loc_of(tok, filename), pname))
    # Every value exists before any op is built: a use may come before its definition in
    # block order (the verifier, not the parser, decides whether the definition dominates).
    results: dict[int, list[Value]] = {}
    for bs, block in zip(syntax, fn.blocks, strict=True):
        for tok, t in bs.args:
            arg = block.add_arg(t, _loc_of(tok, filename), _plain_name(tok))
            b.define(bs.ln, tok, arg)
        for s in bs.ops:
            assert s.loc is not None
            vals = []
            for tok, t in zip(s.results, s.result_types, strict=True):
                v = Value(t, s.loc, _plain_name(tok))
                b.define(s.ln, tok, v)
                vals.append(v)
            results[id(s)] = vals
    for bs, block in zip(syntax, fn.blocks, strict=True):
        for s in bs.ops:
            op = _build_op(b, s)
            placeholders = results[id(s)]
            for v in placeholders:
                v.owner = op
            op.results = placeholders
            block.append(op)
    fn.number()
    return fn
