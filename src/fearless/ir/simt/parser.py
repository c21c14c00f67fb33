"""Read the text `ir/simt/printer.py` prints back into an IR `Function`.

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
`ir/simt/ops.py` and every type of `ir/core.py`, with or without the `// line:col` location
comments. What the printer does not print cannot come back: the source file of locations
(the `filename` argument, or a `// file:line:col` comment, supplies one), the function's
and the block arguments' own locations (they get the position of their text), and the names
of block arguments. Parameter names come from the `// params:` comment; without it a
parameter written with a name (`%a: Slice[f32]`) is called by it. Value and block names need
not be numbers nor in order (`%i`, `^loop`), so tests can write IR by hand; the printer
renumbers them. Lines holding only a comment are skipped, so the text of
`Kernel.inspect(stage="ir")` parses as it is.

A hand-written tokenizer and a recursive-descent parser, in two phases: the first (ir/simt/text_syntax.py) reads every
line into syntax records, the second creates all blocks and values and then builds the ops
with their own constructors (a use may precede its definition in block order, as in a loop).
Errors raise `IRParseError` (a ValueError) naming the line and column. The parser checks what
building an op needs (operand and result counts, attributes, the result type the op gives);
dominance, terminators and operand typing are the verifier's (`ir/simt/verifier.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import dtypes
from ...errors import Location
from ..core import (
    ArrayType,
    Block,
    Function,
    Op,
    ScalarType,
    Type,
    Value,
)
from . import ops
from .text_syntax import (
    BlockSyntax,
    IRParseError,
    Line,
    OpSyntax,
    Tok,
    parse_type,
    read_block_header,
    read_op,
    read_typed_values,
    tokenize,
)

__all__ = ["IRParseError", "parse_function", "parse_type"]


# ------------------------------------------------------------------------------------ builder


def _loc_of(tok: Tok, filename: str) -> Location:
    return Location(filename, tok.line, tok.col - 1)


class _Builder:
    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.values: dict[str, Value] = {}
        self.blocks: dict[str, Block] = {}

    def define(self, ln: Line, tok: Tok, v: Value) -> None:
        if tok.text in self.values:
            raise ln.error(f"value {tok.text} is defined twice", tok)
        self.values[tok.text] = v

    def use(self, ln: Line, tok: Tok) -> Value:
        v = self.values.get(tok.text)
        if v is None:
            raise ln.error(f"value {tok.text} is defined nowhere", tok)
        return v

    def block(self, ln: Line, tok: Tok) -> Block:
        b = self.blocks.get(tok.text)
        if b is None:
            raise ln.error(f"block {tok.text} is defined nowhere", tok)
        return b


_Maker = Callable[[OpSyntax, list[Value], dict[str, Any], Location], Op]


def _need(s: OpSyntax, cond: bool, message: str, tok: Tok | None = None) -> None:
    if not cond:
        raise s.ln.error(message, tok or s.name)


def _choice(s: OpSyntax, attrs: dict[str, Any], key: str, allowed: Any) -> Any:
    v = attrs[key]
    _need(
        s,
        isinstance(v, str) and v in allowed,
        f"`{s.name.text}` {key} must be one of {', '.join(sorted(allowed))}, not {v!r}",
        s.attrs[key][2],
    )
    return v


def _array_operand(s: OpSyntax, operands: list[Value]) -> ArrayType:
    _need(s, bool(operands), f"`{s.name.text}` needs an array operand")
    t = operands[0].type
    _need(s, isinstance(t, ArrayType), f"`{s.name.text}` needs an array, not {t}", s.operands[0])
    assert isinstance(t, ArrayType)
    return t


def _make_constant(s: OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
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


def _make_math(s: OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
    fn = _choice(s, attrs, "fn", ops.MATH_FNS)
    n = ops.MATH_FNS[fn]
    _need(s, len(operands) == n, f"math `{fn}` takes {n} operand(s), not {len(operands)}")
    return ops.MathCall(fn, operands, loc)


def _make_axis(s: OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
    axis = attrs["axis"]
    _need(
        s,
        axis in (0, 1) and not isinstance(axis, bool),
        f"axis is 0 or 1, not {axis!r}",
        s.attrs["axis"][2],
    )
    return ops.ThreadIndexAxis(operands[0], axis, loc)


def _make_len(s: OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
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


def _make_load(s: OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
    t = _array_operand(s, operands)
    n = len(operands) - 1
    _need(s, n == t.ndim, f"a load from {t} takes {t.ndim} index(es), not {n}")
    return ops.Load(operands[0], operands[1:], loc, vector=_vector(s, attrs))


def _make_store(s: OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
    t = _array_operand(s, operands)
    n = len(operands) - 2
    _need(s, n == t.ndim, f"a store to {t} takes {t.ndim} index(es) and a value")
    return ops.Store(operands[0], operands[1:-1], operands[-1], loc, vector=_vector(s, attrs))


def _vector(s: OpSyntax, attrs: dict[str, Any]) -> tuple[int, int] | None:
    v = attrs.get("vector")
    ok = v is None or (isinstance(v, tuple) and len(v) == 2 and all(type(x) is int for x in v))
    _need(s, ok, "`vector` is a (lane, width) pair of ints")
    return v


def _make_check(s: OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
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


def _atomic_array(s: OpSyntax, operands: list[Value], values: int) -> list[Value]:
    """The indices of an atomic on an AtomicSlice: one per axis, then `values` operands."""
    t = _array_operand(s, operands)
    _need(
        s,
        ops.atomic_target(t),
        f"`{s.name.text}` needs an AtomicSlice or a shared array, not {t}",
        s.operands[0],
    )
    n = len(operands) - 1 - values
    _need(
        s,
        n == t.ndim,
        f"`{s.name.text}` on {t} takes {t.ndim} index(es) and {values} value(s)",
    )
    return operands[1 : 1 + n]


def _make_binary(s: OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location) -> Op:
    kind = _choice(s, attrs, "kind", ops.BINARY_KINDS)
    nowrap = attrs.get("nowrap", False)
    _need(s, nowrap in (True, False), f"`binary` nowrap must be True or False, not {nowrap!r}")
    _need(s, not nowrap or kind == "add", "`binary` nowrap is an `add`'s only")
    return ops.Binary(kind, operands[0], operands[1], loc, nowrap=nowrap)


def _make_atomic_rmw(
    s: OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location
) -> Op:
    idx = _atomic_array(s, operands, 1)
    kind = _choice(s, attrs, "kind", ops.ATOMIC_KINDS)
    return ops.AtomicRMW(kind, operands[0], idx, operands[-1], loc)


def _make_atomic_cas(
    s: OpSyntax, operands: list[Value], attrs: dict[str, Any], loc: Location
) -> Op:
    idx = _atomic_array(s, operands, 2)
    return ops.AtomicCAS(operands[0], idx, operands[-2], operands[-1], loc)


# opname -> (operand count or None when the maker checks it, result count, attrs, optional
# attrs, maker)
_SPECS: dict[str, tuple[int | None, int, frozenset[str], frozenset[str], _Maker]] = {}


def _spec(name: str, n_operands: int | None, n_results: int, attrs: str, maker: _Maker) -> None:
    required = frozenset(a for a in attrs.split() if not a.endswith("?"))
    optional = frozenset(a[:-1] for a in attrs.split() if a.endswith("?"))
    _SPECS[name] = (n_operands, n_results, required, optional, maker)


def _kinded(name: str, arity: int, attr: str, cls: Any, choices: Any) -> None:
    """An op whose first constructor argument is one of `choices`, written as its `attr`
    attribute (`binary {kind='add'}`), then its `arity` operands."""
    _spec(name, arity, 1, attr, lambda s, o, a, loc: cls(_choice(s, a, attr, choices), *o, loc))


_spec("constant", 0, 1, "value", _make_constant)
_spec("binary", 2, 1, "kind nowrap?", lambda s, o, a, loc: _make_binary(s, o, a, loc))
_kinded("unary", 1, "kind", ops.Unary, ops.UNARY_KINDS)
_kinded("compare", 2, "pred", ops.Compare, ops.COMPARE_PREDS)
_spec("cast", 1, 1, "", lambda s, o, a, loc: _make_cast(s, o, loc))
_spec("select", 3, 1, "", lambda s, o, a, loc: ops.Select(o[0], o[1], o[2], loc))
_spec("math", None, 1, "fn", _make_math)
_spec("index.axis", 1, 1, "axis", _make_axis)
_spec("shared.alloc", 0, 1, "name?", lambda s, o, a, loc: _make_shared(s, a, loc))
_spec("local.alloc", 0, 1, "name?", lambda s, o, a, loc: _make_local(s, a, loc))
_spec("const.array", 0, 1, "name data", lambda s, o, a, loc: _make_const_array(s, a, loc))
_spec("barrier", 0, 0, "", lambda s, o, a, loc: ops.Barrier(loc))
_spec("grid.sync", 0, 0, "", lambda s, o, a, loc: ops.GridSync(loc))
_kinded("warp.shfl", 2, "mode", ops.WarpShuffle, ops.SHUFFLE_MODES)
_kinded("warp.vote", 1, "kind", ops.WarpVote, ops.VOTE_KINDS)


def _collective_maker(cls: type[ops.WarpReduce]) -> _Maker:
    def make(s: OpSyntax, o: list[Value], a: dict[str, Any], loc: Location) -> Op:
        return cls(_choice(s, a, "op", ops.COLLECTIVE_OPS), o[0], loc)

    return make


for _cls in (ops.WarpReduce, ops.BlockReduce, ops.BlockScan):
    _spec(_cls.opname, 1, 1, "op", _collective_maker(_cls))


def _nullary_maker(cls: type[ops.Nullary]) -> _Maker:
    return lambda s, o, a, loc: cls(loc)


for _index in (
    ops.ThreadIndex1D,
    ops.ThreadIndex2D,
    ops.BlockIndex1D,
    ops.BlockIndex2D,
    ops.BlockId,
):
    _spec(_index.opname, 0, 1, "", _nullary_maker(_index))
_spec(
    "thread.reg",
    0,
    1,
    "reg",
    lambda s, o, a, loc: ops.SpecialReg(_choice(s, a, "reg", ops.SPECIAL_REGS), loc),
)
_spec("index.int", 1, 1, "", lambda s, o, a, loc: ops.IndexToInt(o[0], loc))
_spec("index.advance", 2, 1, "", lambda s, o, a, loc: ops.IndexAdvance(o[0], o[1], loc))
_spec(
    "index.block_row",
    1,
    1,
    "width?",
    lambda s, o, a, loc: ops.BlockRowIndex(o[0], loc, int(a.get("width", 1))),
)
_spec("index.block_step", 3, 1, "", lambda s, o, a, loc: ops.BlockStep(o[0], o[1], o[2], loc))
_spec(
    "index.block_tile_row", 3, 1, "", lambda s, o, a, loc: ops.BlockTileRow(o[0], o[1], o[2], loc)
)
_spec("index.tile_row", 3, 1, "", lambda s, o, a, loc: ops.TileRow(o[0], o[1], o[2], loc))
_spec("len", 1, 1, "axis?", _make_len)
_spec("load", None, 1, "vector?", _make_load)
_spec("store", None, 0, "vector?", _make_store)
_spec("check.bounds", None, 0, "sites", _make_check)
_spec("atomic.rmw", None, 1, "kind", _make_atomic_rmw)
_spec("atomic.cas", None, 1, "", _make_atomic_cas)
_spec("return", 0, 0, "", lambda s, o, a, loc: ops.Return(loc))
_spec("print", None, 0, "format", lambda s, o, a, loc: ops.Print(str(a["format"]), o, loc))


def _array_result(s: OpSyntax, space: str, kind: str) -> tuple[dtypes.DType, tuple[int, ...]]:
    """The dtype and shape of the `space` array ("local", "const" or "shared": ArrayType's
    field) that an allocating op declares as its result type; `kind` names it in the error."""
    t = s.result_types[0] if s.result_types else None
    shape = getattr(t, space) if isinstance(t, ArrayType) else None
    _need(s, shape is not None, f"{s.name.text} gives a {kind} array, not {t}")
    assert isinstance(t, ArrayType) and shape is not None
    return t.dtype, shape


def _make_local(s: OpSyntax, attrs: dict[str, Any], loc: Location) -> Op:
    name = attrs.get("name", "")
    _need(s, isinstance(name, str), f"name is a string, not {name!r}")
    return ops.LocalAlloc(*_array_result(s, "local", "Local"), loc, name)


def _make_const_array(s: OpSyntax, attrs: dict[str, Any], loc: Location) -> Op:
    dtype, shape = _array_result(s, "const", "Const")
    name, data = attrs["name"], attrs["data"]
    _need(s, isinstance(name, str), f"name is a string, not {name!r}")
    _need(s, isinstance(data, str), f"data is a hex string, not {data!r}")
    return ops.ConstArray(dtype, shape, data, loc, name)


def _make_shared(s: OpSyntax, attrs: dict[str, Any], loc: Location) -> Op:
    dtype, shape = _array_result(s, "shared", "Shared")
    name = attrs.get("name", "")
    _need(s, isinstance(name, str), f"name is a string, not {name!r}")
    return ops.SharedAlloc(dtype, shape, loc, name)


def _make_cast(s: OpSyntax, operands: list[Value], loc: Location) -> Op:
    t = s.result_types[0] if s.result_types else None
    _need(s, isinstance(t, ScalarType), f"a cast converts to a scalar type, not {t}")
    assert isinstance(t, ScalarType)
    return ops.Cast(operands[0], t.dtype, loc)


def _build_op(b: _Builder, s: OpSyntax) -> Op:
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
    tok_lines = tokenize(text)
    header: Line | None = None
    blocks: list[BlockSyntax] = []
    closed = False
    for i, toks in enumerate(tok_lines):
        ln = Line(toks, src_lines[i], i + 1)
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
            blocks.append(read_block_header(ln))
        elif not blocks:
            raise ln.error("an op before the first block `^bb0:`", first)
        else:
            blocks[-1].ops.append(read_op(ln, filename))
    if header is None:
        raise IRParseError("no function in the text (expected `func @name(...)`)", 1, 1)
    if not closed:
        last = len(src_lines)
        raise IRParseError("the function is not closed by `}`", last, 1, src_lines[-1])
    if not blocks:
        raise header.error("a function needs at least one block", header.toks[0])
    return _build(header, blocks, filename)


def _parse_header(ln: Line) -> tuple[Tok, list[tuple[Tok, Type]], list[str] | None]:
    ln.expect("name", "func")
    name = ln.expect("symbol", what="the function's name `@name`")
    ln.expect("punct", "(")
    params = [] if ln.accept("punct", ")") else read_typed_values(ln, "a parameter `%n`")
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


def _plain_name(tok: Tok) -> str:
    """The name a value written `%k` carries: none for a number such as `%3`."""
    body = tok.text[1:]
    return "" if body.isdigit() else body


def _build(header: Line, syntax: list[BlockSyntax], filename: str) -> Function:
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
            if isinstance(op, ops.SharedAlloc | ops.LocalAlloc) and "name" in op.attrs:
                op.name_array(op.attrs["name"])  # its value is named after the user's variable
            block.append(op)
    fn.number()
    return fn
