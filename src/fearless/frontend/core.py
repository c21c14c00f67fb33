"""The lowerer both tracks subclass: what lowering Python means whatever the track's types.

`Lowerer` walks one function body. `lower_body` sends each statement to `stmt_<Node>` and `expr`
each expression to `expr_<Node>`; a node without a method is one "not supported" error. Names
resolve in the environment, then in the function's closure and module globals, then builtins
(`FunctionSource.lookup`); literals become `Weak` and operators on two literals are folded.
Assignment (and unpacking), `+=`, the rule that a kernel returns no value, the `if` on a
compile-time condition and the `for ... in range(...)` form are written here once, with one
wording for each mistake. A loop is lowered again when a carried type was guessed from a
literal (`lower_retrying`, frontend/loops.py).

Deep expressions. A long chain `a + b + c + ...` is one left-deep tree of `BinOp`s; it is lowered
iteratively (`expr_BinOp` walks down the left spine), in Python's order of evaluation. Any other
deep tree (`x ** x ** ...`, `- - x`, nested calls) is lowered recursively, so each statement is
lowered under `deep_statement`: as CPython's compiler does, it raises the recursion limit for
the time of the statement, by an amount sized to the statement's depth, and refuses a
statement nested more than `MAX_NESTING` levels with a CompileError naming its line.

Each track's subclasses add its own statements and expressions and implement the hooks: its
type rules (`binary`, `compare`, `lower_unary`), `condition`, `lower_if`, `lower_for`,
`lower_return`, `value_attribute`, `loop_types` and `checkpoint` (SIMT: simt/ssa.py, loops.py
and lower.py; Tile: tile/rules.py and frontend.py, with control.py).
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from ..errors import CompileError, Location
from .loops import LoopTypes, Token
from .source import FunctionSource
from .values import PyObj, Undefined, Weak, fold_unary, not_a_value

OperandT = TypeVar("OperandT")  # what an expression lowers to in the track (its `Operand`)

BINOPS: dict[type[ast.operator], str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.Pow: "pow",
    ast.LShift: "shl",
    ast.RShift: "shr",
    ast.BitAnd: "and",
    ast.BitOr: "or",
    ast.BitXor: "xor",
    ast.MatMult: "matmul",
}
CMPOPS: dict[type[ast.cmpop], str] = {
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
    ast.Eq: "eq",
    ast.NotEq: "ne",
}
UNARYOPS: dict[type[ast.unaryop], str] = {
    ast.UAdd: "pos",
    ast.USub: "neg",
    ast.Not: "not",
    ast.Invert: "invert",
}


def unsupported(what: str, loc: Location, help: str | None = None) -> CompileError:
    """E0001: a Python construct kernels do not have."""
    return CompileError(
        f"{what} is not supported in kernels", loc, label="not supported", help=help
    )


def unassigned(name: str, loc: Location, why: str = "") -> CompileError:
    """E0381: a read of `name` on a path where it has no value."""
    return CompileError(
        f"`{name}` may be used before it is assigned",
        loc,
        code="E0381",
        label="possibly unassigned here",
        notes=[why] if why else [],
        help=f"assign `{name}` on every path before this line",
    )


# The deepest statement (levels of nested AST nodes) a kernel may hold. CPython's own compiler
# stops at about 3 * sys.getrecursionlimit() (3000 by default), so any kernel a module with
# the default recursion limit defines fits well within it.
MAX_NESTING = 10_000
# Python frames the lowering spends per level of a tree, at most (expr -> expr_<Node> ->
# the track's helpers -> expr), and what a level of ast.unparse (used in messages) spends.
_FRAMES_PER_LEVEL = 8
# A statement at most this deep is lowered under the recursion limit as it is.
_SHALLOW = 64

_limit_lock = threading.Lock()
_limit_base = 0  # the recursion limit before the outermost active `deep_statement`
_limit_extra: list[int] = []  # the headroom of each active `deep_statement`, in all threads


def nesting_depth(node: ast.stmt) -> int:
    """The levels of nested nodes in statement `node` (itself 1) outside the statements it
    contains (each of those is measured when it is lowered), counted without recursion."""
    deepest = 0
    stack: list[tuple[ast.AST, int]] = [(node, 1)]
    while stack:
        n, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend(
            (child, depth + 1)
            for child in ast.iter_child_nodes(n)
            if not isinstance(child, ast.stmt)
        )
    return deepest


@contextlib.contextmanager
def deep_statement(node: ast.stmt, loc: Callable[[ast.AST], Location]) -> Iterator[None]:
    """Lower statement `node` with room for its depth on the Python stack.

    A statement deeper than MAX_NESTING is refused (E0001, at its line). A deep one gets the
    recursion limit raised by `_FRAMES_PER_LEVEL` frames per level while it is lowered (the
    limit is the interpreter's, shared by all threads: each active statement's headroom is
    added to the limit seen before the first, which comes back when the last one ends).
    """
    depth = nesting_depth(node)
    if depth <= _SHALLOW:
        yield
        return
    if depth > MAX_NESTING:
        raise _too_deep(node, depth, loc)
    headroom = depth * _FRAMES_PER_LEVEL
    global _limit_base
    with _limit_lock:
        if not _limit_extra:
            _limit_base = sys.getrecursionlimit()
        _limit_extra.append(headroom)
        sys.setrecursionlimit(_limit_base + sum(_limit_extra))
    try:
        yield
    except RecursionError:  # the headroom was not enough: still a user's error, not a crash
        raise _too_deep(node, depth, loc) from None
    finally:
        with _limit_lock:
            _limit_extra.remove(headroom)
            sys.setrecursionlimit(_limit_base + sum(_limit_extra))


def _too_deep(node: ast.stmt, depth: int, loc: Callable[[ast.AST], Location]) -> CompileError:
    return CompileError(
        f"this statement is nested {depth} levels deep, more than the {MAX_NESTING} levels "
        "a kernel statement may have",
        loc(node),
        label="nested too deeply",
        help="split the expression over several statements, e.g. `s = a + b` then "
        "`s = s + c` (a long sum or product compiles as a chain, written without parentheses)",
    )


def to_operand(obj: Any, name: str) -> Weak | PyObj:
    """A Python object referenced from a kernel: numbers become weak literals."""
    if isinstance(obj, bool | int | float):
        return Weak(obj)
    return PyObj(obj, name)


def as_load(target: ast.expr) -> ast.expr:
    """An assignment target (`x`, `a[i]`) as the expression that reads it, at its location."""
    copy = ast.parse(ast.unparse(target), mode="eval").body
    for a, b in zip(ast.walk(copy), ast.walk(target), strict=False):
        ast.copy_location(a, b)
    return copy


def identity(node: ast.Compare, left: Any, right: Any, is_: bool, loc: Location) -> Weak:
    """`a is b` / `a is not b` (`is_` False), decided at compile time: kernels ask it of None
    (an absent optional parameter is the object None, tile/signature.py; anything the kernel
    computes, a tile or an array parameter, is not None)."""
    if not (isinstance(left, PyObj) and left.obj is None) and not (
        isinstance(right, PyObj) and right.obj is None
    ):
        raise unsupported(
            f"the comparison `{ast.unparse(node)}`",
            loc,
            help="`is` and `is not` compare with None (`if m is not None:`); compare numbers "
            "with == and !=",
        )
    same = isinstance(left, PyObj) and isinstance(right, PyObj) and left.obj is right.obj
    return Weak(same == is_)


class Lowerer(ABC, Generic[OperandT]):
    """Lowers one function body; the track's subclass emits its IR."""

    # What to do instead of returning a value from a kernel (E0603).
    RETURN_HELP: ClassVar[str]
    # How the track's kernels loop, for a `for` over something other than `range(...)`.
    LOOP_HELP: ClassVar[str]
    # What else to do than assigning to something that is not a name (E0070).
    ASSIGN_HELP: ClassVar[str | None] = None
    # The binary operators (`BINOPS` values) the track's `binary` implements.
    BINARY_KINDS: ClassVar[frozenset[str]]
    # What the track's kernels compute with, for a compile-time object used as a value.
    VALUE_KINDS: ClassVar[str]

    def __init__(
        self,
        src: FunctionSource,
        env: dict[str, OperandT],
        call_path: Token = (),
        is_kernel: bool = True,
    ) -> None:
        self.src = src
        self.env = env
        self.call_path = call_path  # the device-function calls this body is inlined through
        self.is_kernel = is_kernel

    def loc(self, node: ast.AST) -> Location:
        return self.src.loc(node)

    # -------------------------------------------------------------------------- the hooks

    @property
    @abstractmethod
    def loop_types(self) -> LoopTypes[Any]:
        """The carried types guessed from literals, and the hints retries found."""

    @abstractmethod
    def checkpoint(self) -> Callable[[], None]:
        """Note where lowering is; the result puts it back there (for a loop's retry)."""

    @abstractmethod
    def binary(self, kind: str, a: OperandT, b: OperandT, loc: Location) -> OperandT: ...

    @abstractmethod
    def compare(self, pred: str, a: OperandT, b: OperandT, loc: Location) -> OperandT: ...

    @abstractmethod
    def lower_unary(self, kind: str, x: OperandT, node: ast.UnaryOp) -> OperandT:
        """`kind` (a `UNARYOPS` value) of a typed operand (literals are folded before)."""

    @abstractmethod
    def condition(self, node: ast.expr) -> OperandT:
        """An `if` condition: a `Weak` when it is known at compile time."""

    @abstractmethod
    def lower_if(self, node: ast.If, cond: OperandT) -> None:
        """An `if` on a run-time condition."""

    @abstractmethod
    def lower_ifexp(self, node: ast.IfExp, cond: OperandT) -> OperandT:
        """`a if cond else b` on a run-time condition (only the chosen arm's effects count)."""

    @abstractmethod
    def lower_for(self, node: ast.For, target: str, bounds: list[ast.expr]) -> None:
        """`for target in range(*bounds)`, the form checked already."""

    def lower_for_iter(self, node: ast.For, target: str) -> bool:
        """`for target in <not range>`: lower it and say True, or False (not supported)."""
        return False

    @abstractmethod
    def lower_return(self, node: ast.Return) -> None:
        """A `return` allowed here (a kernel's carries no value)."""

    @abstractmethod
    def value_attribute(self, base: OperandT, node: ast.Attribute) -> OperandT:
        """`x.attr` where `x` is a value of the track (not a compile-time Python object)."""

    def identity(
        self, node: ast.Compare, left: Any, right: Any, is_: bool, loc: Location
    ) -> OperandT | Weak:
        """`left is right` (`is not` when `is_` is False); a track may know objects whose
        None-ness is decided at run time (a SIMT slot, simt/slots.py)."""
        return identity(node, left, right, is_, loc)

    def reachable(self) -> bool:
        """Whether the next statement can run (not after a `return`, `break`, `continue`)."""
        return True

    def store_subscript(self, target: ast.Subscript, value: OperandT) -> None:
        """`a[i] = value`; kernels without writable arrays have no such target."""
        raise self.bad_target(target)

    # ----------------------------------------------------------------------------- loops

    def lower_retrying(self, node: ast.stmt, attempt: Callable[[Token], None]) -> None:
        """Lower loop `node` with `attempt(token)` until its carried types are right."""
        token: Token = (*self.call_path, id(node))
        self.loop_types.lower(token, lambda: attempt(token), self.checkpoint)

    # ------------------------------------------------------------------------ statements

    def lower_body(self, stmts: Sequence[ast.stmt]) -> None:
        for stmt in stmts:
            if not self.reachable():
                return  # the rest is unreachable (after return/break/continue)
            self.lower_stmt(stmt)

    def lower_stmt(self, node: ast.stmt) -> None:
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            raise unsupported(f"the `{type(node).__name__}` statement", self.loc(node))
        with deep_statement(node, self.loc):
            method(node)

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.expr(node.value)

    def stmt_Assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value, node)

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        kind = BINOPS.get(type(node.op))
        if kind is None or kind not in self.BINARY_KINDS:
            raise unsupported(f"the operator in `{ast.unparse(node)}`", self.loc(node))
        current = self.expr(as_load(node.target))
        result = self.binary(kind, current, self.expr(node.value), self.loc(node))
        self.assign(node.target, result, node)

    def assign(self, target: ast.expr, value: OperandT, stmt: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, Undefined):
                raise unassigned(value.name, self.loc(stmt), value.why)
            self.env[target.id] = value
        elif isinstance(target, ast.Subscript):
            if isinstance(value, PyObj) and isinstance(value.obj, str):  # at the string
                where = getattr(stmt, "value", None)
                at = self.loc(where) if isinstance(where, ast.expr) else self.loc(target)
                raise not_a_value(value, at, self.VALUE_KINDS)
            self.store_subscript(target, value)
        elif isinstance(target, ast.Tuple | ast.List):
            if any(isinstance(t, ast.Starred) for t in target.elts):
                raise unsupported(
                    "a starred assignment target (`a, *b = ...`)",
                    self.loc(target),
                    help="name each element: `a, b, c = t`, or index the tuple: `t[0]`",
                )
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                n = len(value) if isinstance(value, tuple) else "a non-tuple"
                raise CompileError(
                    f"cannot unpack {n} into {len(target.elts)} names",
                    self.loc(target),
                    code="E0070",
                )
            for t, v in zip(target.elts, value, strict=True):
                self.assign(t, v, stmt)
        else:
            raise self.bad_target(target)

    def bad_target(self, target: ast.expr) -> CompileError:
        return CompileError(
            f"cannot assign to `{ast.unparse(target)}`",
            self.loc(target),
            code="E0070",
            help=self.ASSIGN_HELP,
        )

    def stmt_Return(self, node: ast.Return) -> None:
        value = node.value
        if (
            self.is_kernel
            and value is not None
            and not (isinstance(value, ast.Constant) and value.value is None)
        ):
            raise CompileError(
                "kernels cannot return a value",
                self.loc(value),
                code="E0603",
                label="returned here",
                help=self.RETURN_HELP,
            )
        self.lower_return(node)

    def stmt_If(self, node: ast.If) -> None:
        cond = self.condition(node.test)
        if isinstance(cond, Weak):  # decided at compile time: lower only the taken arm
            self.lower_body(node.body if cond.value else node.orelse)
            return
        self.lower_if(node, cond)

    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            raise unsupported("`for ... else`", self.loc(node))
        if not isinstance(node.target, ast.Name):
            raise unsupported("a loop target that is not a plain name", self.loc(node.target))
        it = node.iter
        if not (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name)
            and it.func.id == "range"
            and self.env.get("range") is None
        ):
            if self.lower_for_iter(node, node.target.id):
                return
            raise unsupported(f"iterating over `{ast.unparse(it)}`", self.loc(it), self.LOOP_HELP)
        if not 1 <= len(it.args) <= 3 or it.keywords:
            raise CompileError(
                "range() takes 1 to 3 positional arguments", self.loc(it), code="E0061"
            )
        self.lower_for(node, node.target.id, it.args)

    # ----------------------------------------------------------------------- expressions

    def expr(self, node: ast.expr) -> OperandT:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            raise unsupported(f"the expression `{ast.unparse(node)}`", self.loc(node))
        return method(node)  # type: ignore[no-any-return]

    def expr_Constant(self, node: ast.Constant) -> Weak | PyObj:
        v = node.value
        if isinstance(v, bool | int | float):
            return Weak(v)
        if v is None:
            return PyObj(None, "None")
        if v is Ellipsis:
            help = "write every axis out, e.g. `v[:, :, None]` for `v[..., None]` of a 2-d tile"
        elif isinstance(v, str) and v.strip().lstrip("+-").lower() in ("inf", "infinity", "nan"):
            sign = "-" if v.strip().startswith("-") else ""
            name = "math.nan" if "nan" in v.lower() else f"{sign}math.inf"
            help = f"write `{name}` (import math): `float({v!r})` parses a string, on the host"
        elif isinstance(v, str):  # compile-time only: `if ACTIVATION == "relu":`, as Triton's
            return PyObj(v, repr(v))
        else:
            help = 'kernels work on numbers, and strings at compile time (`if MODE == "relu":`)'
        raise unsupported(f"the constant `{v!r}`", self.loc(node), help=help)

    def expr_Name(self, node: ast.Name) -> OperandT | Weak | PyObj:
        loc = self.loc(node)
        if node.id in self.env:
            value = self.env[node.id]
            if isinstance(value, Undefined):
                raise unassigned(node.id, loc, value.why)
            return value
        found, obj = self.src.lookup(node.id)
        if not found:
            raise CompileError(
                f"cannot find value `{node.id}` in this scope",
                loc,
                code="E0425",
                label="not found in this scope",
                help="define it in the kernel or at module level before the first launch",
            )
        return self.host_operand(obj, node.id, node)

    def host_operand(self, obj: Any, name: str, node: ast.expr) -> OperandT | Weak | PyObj:
        """A host object a kernel names (`x`, `mod.x`); a track may read some as values."""
        return to_operand(obj, name)

    def expr_Attribute(self, node: ast.Attribute) -> OperandT | Weak | PyObj:
        base = self.expr(node.value)
        if isinstance(base, PyObj):
            if not hasattr(base.obj, node.attr):
                raise self.missing_attribute(base, node)
            name = f"{base.name}.{node.attr}"
            return self.host_operand(getattr(base.obj, node.attr), name, node)
        return self.value_attribute(base, node)

    def missing_attribute(self, base: PyObj, node: ast.Attribute) -> CompileError:
        """E0433 for `base.attr` where the host object `base` has no `attr`, with the names
        close to it; a track may know better what its own modules offer."""
        fields = vars(base.obj) if hasattr(base.obj, "__dict__") else {}
        names = [n for n in fields if not n.startswith("_")]
        listed = ", ".join(f"`{n}`" for n in names)
        public = [n for n in dir(base.obj) if not n.startswith("_")]
        close = sorted(difflib.get_close_matches(node.attr, public, n=2, cutoff=0.6))
        hint = f"its attributes are {listed}" if listed and len(names) <= 8 else None
        if base.obj is None and base.name != "None":
            hint = (
                f"`{base.name}` is None in this specialisation (an optional parameter the launch "
                f"passed None for): use it only under `if {base.name} is not None:`"
            )
        if close:
            similar = " or ".join(f"`{base.name}.{n}`" for n in close)
            hint = f"a similar name exists: {similar}"
        return CompileError(
            f"`{base.name}` has no attribute `{node.attr}`",
            self.loc(node),
            code="E0433",
            help=hint,
        )

    def expr_BinOp(self, node: ast.BinOp) -> OperandT:
        """`a op b`. A left-deep chain (`a + b - c * d + ...`, however long) is lowered without
        recursion: the left spine first, then each right operand, as Python evaluates them."""
        # (a subclass that overrides this method sees each BinOp of the chain itself)
        follow = type(self).expr_BinOp is Lowerer.expr_BinOp
        spine: list[tuple[ast.BinOp, str]] = []
        n: ast.expr = node
        while True:
            assert isinstance(n, ast.BinOp)
            kind = BINOPS.get(type(n.op))
            if kind is None or kind not in self.BINARY_KINDS:
                raise unsupported(f"the operator in `{ast.unparse(n)}`", self.loc(n))
            spine.append((n, kind))
            n = n.left
            if not (follow and isinstance(n, ast.BinOp)):
                break
        acc = self.expr(n)
        for op_node, kind in reversed(spine):
            right = self.expr(op_node.right)
            for side, value in ((op_node.left, acc), (op_node.right, right)):
                if isinstance(value, PyObj) and isinstance(value.obj, str):  # at the string
                    raise not_a_value(value, self.loc(side), self.VALUE_KINDS)
            acc = self.binary(kind, acc, right, self.loc(op_node))
        return acc

    def expr_IfExp(self, node: ast.IfExp) -> OperandT:
        """`a if c else b`: a condition known at compile time lowers only the arm it picks,
        as an `if` statement does; otherwise the track selects (`lower_ifexp`)."""
        cond = self.condition(node.test)
        if isinstance(cond, Weak):
            return self.expr(node.body if cond.value else node.orelse)
        return self.lower_ifexp(node, cond)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> OperandT | Weak:
        x = self.expr(node.operand)
        kind = UNARYOPS[type(node.op)]
        if isinstance(x, Weak):
            return fold_unary(kind, x, self.loc(node))
        return self.lower_unary(kind, x, node)

    def expr_Compare(self, node: ast.Compare) -> OperandT:
        """`a < b`, and a chain `a < b <= c` as `a < b and b <= c` (`b` evaluated once)."""
        loc = self.loc(node)
        left = self.expr(node.left)
        result: OperandT | None = None
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            pred = CMPOPS.get(type(op))
            if pred is None and not isinstance(op, ast.Is | ast.IsNot):
                raise unsupported(
                    f"the comparison `{ast.unparse(node)}`",
                    loc,
                    help="kernels compare numbers with < <= > >= == != (and with None by "
                    "`is`, at compile time)",
                )
            right = self.expr(right_node)
            r: Any
            if pred is None:  # `is` / `is not`
                r = self.identity(node, left, right, isinstance(op, ast.Is), loc)
            elif isinstance(left, PyObj) and isinstance(right, PyObj) and pred in ("eq", "ne"):
                # compile-time objects (`x.dtype == fl.f32`): decided now, like a literal
                r = Weak((left.obj == right.obj) == (pred == "eq"))
            else:
                r = self.compare(pred, left, right, loc)
            result = r if result is None else self.binary("and", result, r, loc)
            left = right
        assert result is not None
        return result
