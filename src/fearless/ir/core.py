"""The IR data model shared by both tracks: types, values, ops, blocks and functions.

The IR is SSA over a control-flow graph of basic blocks with block arguments (no phi ops):
a branch passes values to its target's arguments. Every value carries the `Location` of the
user's expression that made it, so any pass can report an error at the user's line.

Ops are small classes declaring their operands, attributes and memory effect
(`Effect.PURE / READ / WRITE / CONTROL`); generic passes (DCE, the verifier) ask about effects
instead of matching op names. Op kinds live in `ir/simt/ops.py`; this module has no lowering logic:
the LLVM backend and the simulator are visitors over these classes.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from ..dtypes import DType
from ..errors import Location

# --------------------------------------------------------------------------------------- types


class Type:
    """Base of IR types. Types are immutable values compared by ==."""


@dataclass(frozen=True)
class ScalarType(Type):
    dtype: DType

    def __str__(self) -> str:
        return self.dtype.name


@dataclass(frozen=True)
class ArrayType(Type):
    """An array parameter: `Slice` (read-only), `DisjointSlice` (per-thread writable) or
    `AtomicSlice` (`atomic`: read and written only by atomic ops, at any index); or an array
    the kernel makes: `Shared`, `Local`, or `Const` (a module-level NumPy array, read-only).

    `ndim` is 1 or 2 (a `Const` array: 1 to 3); an array is C-contiguous (row-major),
    indexed `a[row, col]`.
    """

    dtype: DType
    disjoint: bool
    ndim: int = 1
    atomic: bool = False
    # A block's shared-memory array (`simt.shared.array`): its static shape; None for the
    # parameters, which live in global memory.
    shared: tuple[int, ...] | None = None
    # A thread's own array (`simt.local.array`): its static shape; read and written by that
    # thread alone, at any index (bounds-checked).
    local: tuple[int, ...] | None = None
    # A read-only array whose values are baked into the kernel (`const.array`, a module-level
    # NumPy array): its shape. Unlike shared and local arrays it has no leading axis of blocks
    # or lanes in the simulator: `static_shape` leaves it out.
    const: tuple[int, ...] | None = None

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape of a shared or local array, fixed when the kernel compiles."""
        return self.shared if self.shared is not None else self.local

    @property
    def kind(self) -> str:
        """The annotation's name: `Slice`, `DisjointSlice`, `AtomicSlice`, `Shared`, `Local` or
        `Const`."""
        if self.const is not None:
            return "Const"
        if self.shared is not None:
            return "Shared"
        if self.local is not None:
            return "Local"
        return "AtomicSlice" if self.atomic else "DisjointSlice" if self.disjoint else "Slice"

    def __str__(self) -> str:
        shape = self.const if self.const is not None else self.static_shape
        if shape is not None:
            return f"{self.kind}[{self.dtype.name}, {', '.join(map(str, shape))}]"
        rank = f", {self.ndim}" if self.ndim != 1 else ""
        return f"{self.kind}[{self.dtype.name}{rank}]"


@dataclass(frozen=True)
class ThreadIndexType(Type):
    """The witness `simt.thread.index_1d()` returns: an i64 >= 0, unique per thread.

    With `block`, the witness `simt.thread.block_index_1d()` returns: the thread's linear
    position in its block, unique within the block (it opens shared memory, never a
    DisjointSlice).
    """

    block: bool = False

    def __str__(self) -> str:
        return "BlockIndex" if self.block else "ThreadIndex"


THREAD_INDEX = ThreadIndexType()
BLOCK_INDEX = ThreadIndexType(block=True)


@dataclass(frozen=True)
class ThreadIndex2DType(Type):
    """The witness `simt.thread.index_2d()` returns: a (row, col) pair unique per thread.

    It has no scalar value of its own: `t.row` and `t.col` are plain i64 values, and only the
    pair itself opens a 2-D DisjointSlice (`c[t]`). It never becomes a block argument.

    With `block`, the pair `simt.thread.block_index_2d()` returns: (tid.y + ntid.y * tid.z,
    tid.x), unique within the block; it opens 2-D shared arrays, never a DisjointSlice.

    With `width` > 1, the pair `simt.thread.block_column(k, width)` returns: the first column
    of a chunk of `width` the thread owns whole, written `ThreadIndex2D<4>`; it opens a
    DisjointSlice only for a chunk copy (`out[i] = v[k]`).
    """

    block: bool = False
    width: int = 1

    def __str__(self) -> str:
        name = "BlockIndex2D" if self.block else "ThreadIndex2D"
        return f"{name}<{self.width}>" if self.width > 1 else name


THREAD_INDEX_2D = ThreadIndex2DType()
BLOCK_INDEX_2D = ThreadIndex2DType(block=True)


def scalar(dtype: DType) -> ScalarType:
    return ScalarType(dtype)


# -------------------------------------------------------------------------------------- values


class Value:
    """An SSA value: the result of an op or an argument of a block."""

    __slots__ = ("id", "loc", "name", "owner", "type")

    def __init__(self, type: Type, loc: Location, name: str = "") -> None:
        self.type = type
        self.loc = loc
        self.name = name
        self.owner: Op | Block | None = None
        self.id = -1  # numbered by the printer / passes that need it

    @property
    def dtype(self) -> DType:
        assert isinstance(self.type, ScalarType), f"{self.type} is not a scalar"
        return self.type.dtype

    def __repr__(self) -> str:
        return f"<Value {self.name or '?'}: {self.type}>"


# ----------------------------------------------------------------------------------------- ops


class Effect(enum.Enum):
    PURE = "pure"  # no side effect: removable when unused
    READ = "read"  # reads memory: removable when unused, not reorderable across writes
    WRITE = "write"  # writes memory
    CHECK = "check"  # may stop the thread (a bounds check): never removed by DCE
    CONTROL = "control"  # a terminator


class Op:
    """Base of all ops. Subclasses set `opname`, `effect`, and name their operands."""

    opname: ClassVar[str] = "op"
    effect: ClassVar[Effect] = Effect.PURE
    is_terminator: ClassVar[bool] = False

    def __init__(
        self,
        operands: Sequence[Value],
        result_types: Sequence[Type],
        loc: Location,
        **attrs: Any,
    ) -> None:
        self.operands: list[Value] = list(operands)
        self.results: list[Value] = []
        for t in result_types:
            v = Value(t, loc)
            v.owner = self
            self.results.append(v)
        self.loc = loc
        self.attrs: dict[str, Any] = attrs
        self.block: Block | None = None

    @property
    def result(self) -> Value:
        assert len(self.results) == 1
        return self.results[0]

    def successors(self) -> list[Block]:
        return []

    def __repr__(self) -> str:
        return f"<{self.opname} at {self.loc}>"


class Nullary(Op):
    """An op of no operands and one result whose type the class fixes, both named in its
    header: `class ThreadIndex1D(Nullary, opname="thread.index_1d", result=THREAD_INDEX)`."""

    result_type: ClassVar[Type]

    def __init_subclass__(cls, opname: str = "", result: Type | None = None, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if opname:
            cls.opname = opname
        if result is not None:
            cls.result_type = result

    def __init__(self, loc: Location) -> None:
        super().__init__([], [self.result_type], loc)


class Choice(Op):
    """`cond ? a : b` (`where` on tiles): the result has a's type. Each IR names its own."""

    def __init__(self, cond: Value, a: Value, b: Value, loc: Location) -> None:
        super().__init__([cond, a, b], [a.type], loc)


class Exit(Op):
    """The function's end: a terminator of no operands (each IR names its own)."""

    effect = Effect.CONTROL
    is_terminator = True

    def __init__(self, loc: Location) -> None:
        super().__init__([], [], loc)


T = TypeVar("T")


class Attr(Generic[T]):
    """An op's attribute as a read-only property: `kind = Attr[str]()` in an Op subclass reads
    `op.attrs["kind"]`."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, op: Op, owner: type | None = None) -> T:
        return op.attrs[self.name]  # type: ignore[no-any-return]

    def __set__(self, op: Op, value: T) -> None:
        raise AttributeError(f"`{self.name}` is read-only: it is `attrs[{self.name!r}]`")


class Block:
    """A basic block: arguments, a list of ops, and a terminator as its last op."""

    def __init__(self, label: str = "") -> None:
        self.args: list[Value] = []
        self.ops: list[Op] = []
        self.label = label
        self.id = -1

    def add_arg(self, type: Type, loc: Location, name: str = "") -> Value:
        v = Value(type, loc, name)
        v.owner = self
        self.args.append(v)
        return v

    def append(self, op: Op) -> Op:
        op.block = self
        self.ops.append(op)
        return op

    @property
    def terminator(self) -> Op | None:
        if self.ops and self.ops[-1].is_terminator:
            return self.ops[-1]
        return None

    def successors(self) -> list[Block]:
        term = self.terminator
        return term.successors() if term is not None else []

    def __repr__(self) -> str:
        return f"<Block ^bb{self.id} {self.label}>"


class Function:
    """A kernel after the frontend: parameters are the entry block's arguments."""

    def __init__(self, name: str, loc: Location) -> None:
        self.name = name
        self.loc = loc
        self.blocks: list[Block] = []
        self.attrs: dict[str, Any] = {}

    @property
    def entry(self) -> Block:
        return self.blocks[0]

    @property
    def params(self) -> list[Value]:
        return self.entry.args

    def new_block(self, label: str = "") -> Block:
        b = Block(label)
        self.blocks.append(b)
        return b

    def ops(self) -> Iterator[Op]:
        for b in self.blocks:
            yield from b.ops

    def predecessors(self) -> dict[Block, list[Block]]:
        preds: dict[Block, list[Block]] = {b: [] for b in self.blocks}
        for b in self.blocks:
            for s in b.successors():
                preds[s].append(b)
        return preds

    def reverse_postorder(self) -> list[Block]:
        seen: set[Block] = set()
        order: list[Block] = []

        def visit(b: Block) -> None:
            # Iterative DFS: kernels can have deep CFGs and Python's recursion limit is low.
            stack: list[tuple[Block, Iterator[Block]]] = [(b, iter(b.successors()))]
            seen.add(b)
            while stack:
                node, it = stack[-1]
                for s in it:
                    if s not in seen:
                        seen.add(s)
                        stack.append((s, iter(s.successors())))
                        break
                else:
                    stack.pop()
                    order.append(node)

        visit(self.entry)
        order.reverse()
        return order

    def remove_unreachable(self) -> None:
        reachable = set(self.reverse_postorder())
        self.blocks = [b for b in self.blocks if b in reachable]

    def number(self) -> None:
        """Give blocks and values stable ids in block order (for printing and tests)."""
        n = 0
        for bi, b in enumerate(self.blocks):
            b.id = bi
            for a in b.args:
                a.id = n
                n += 1
            for op in b.ops:
                for r in op.results:
                    r.id = n
                    n += 1


def uses(fn: Function) -> dict[Value, list[Op]]:
    """Map each value to the ops using it."""
    out: dict[Value, list[Op]] = {}
    for op in fn.ops():
        for v in op.operands:
            out.setdefault(v, []).append(op)
    return out
