"""The op kinds of the SIMT IR, each declaring operands, attributes and memory effect.

Semantics (`sim/numerics.py` is their executable definition, `sim/simt.py` runs them):
  constant            a scalar literal
  binary  kind        add sub mul div floordiv mod min max pow and or xor shl shr, on two
                      operands of one scalar type; `div` is float-only true division;
                      `floordiv`/`mod` follow Python (round toward -inf, sign of the divisor);
                      `shr` is arithmetic for signed and logical for unsigned types; wrapping
                      two's-complement for integers, IEEE round-to-nearest for floats, no FMA
  unary   kind        neg not invert abs
  compare pred        lt le gt ge eq ne -> bool (float: ordered, except `ne`, as Python)
  cast                numeric conversion: ints wrap/extend by the source's signedness,
                      float->int truncates toward zero, x->bool is x != 0
  select              cond ? a : b
  math    fn          a libdevice function on floats (exp log sqrt sin ... fma)
  thread.index_1d     blockIdx.x * blockDim.x + threadIdx.x as a ThreadIndex (i64)
  thread.index_2d     the pair (row, col) = (ctaid.y * ntid.y + tid.y, ctaid.x * ntid.x + tid.x)
                      as a ThreadIndex2D; it has no scalar value of its own
  thread.reg  reg     a special register (tid.x ntid.x ctaid.x nctaid.x ... y z, laneid) as
                      i32; laneid is the thread's position in its warp: its linear position in
                      the block (x fastest) mod 32
  thread.block_index_2d  the pair (tid.y + ntid.y * tid.z, tid.x) as a BlockIndex2D: unique
                      within the block, no scalar value of its own (as thread.index_2d)
  thread.block_index_1d  the thread's linear position in its block, tid.x + ntid.x * (tid.y +
                      ntid.y * tid.z), as a BlockIndex (i64): unique within the block
  thread.block_id     the block's linear index in the grid, ctaid.x + nctaid.x * (ctaid.y +
                      nctaid.y * ctaid.z), as a plain i64: unique per block, the same for the
                      block's threads; `out[b]` of a 1-D DisjointSlice with it stands under a
                      leader guard (simt/leader.py checks that)
  index.int           a ThreadIndex (or BlockIndex) seen as its plain i64 value
  index.advance       (ThreadIndex %i, i64 %g) -> ThreadIndex %i + %g: the next step of
                      `simt.thread.grid_stride`; %g is the launch's thread count along x,
                      nctaid.x * ntid.x (the verifier checks that it is computed so), which
                      keeps the steps of two threads apart. On a BlockIndex (the column of
                      `simt.thread.block_stride`), %g is the block's thread count,
                      ntid.x * ntid.y * ntid.z, and the result is a BlockIndex: still unique
                      within the block
  index.block_row     (BlockIndex %c) -> ThreadIndex2D (b, %c), b the block's linear index in
                      the grid, ctaid.x + nctaid.x * (ctaid.y + nctaid.y * ctaid.z): unique in
                      the grid, since b tells the blocks apart and %c the block's threads
  index.axis  axis    one coordinate of a ThreadIndex2D (0: row, 1: col) as a plain i64
  len  {axis}         an array's extent along `axis` (i64); the attribute is printed only for
                      2-D arrays, and a 1-D array's length is its extent along axis 0
  load / store        element access with one i64 index per axis (a 2-D array is row-major:
                      element (r, c) is at r * shape[1] + c); *unchecked*: the bounds pass
  atomic.rmw  kind    `kind` in add sub max min exch and_ or_ xor inc dec on one element of an
                      AtomicSlice or a shared array (operands: the array, one i64 index per axis, the value); the
                      result is the element's old value.
                      One indivisible read-modify-write: concurrent ones on one element act one
                      after another in some order. Integers wrap; float `sub` adds the
                      negation; float max/min are `math.fmax`/`fmin` of (old, value)
  atomic.cas          compare-and-swap (operands: array, indices, expected, value): stores the
                      value when the element equals `expected` bit for bit; the result is the
                      old element. Both atomics are unchecked; the bounds pass checks the index
  check.bounds sites  adds one check per axis before each access unless proven; stops the
                      thread and records the site in the device error record when not
                      0 <= index < length; grouped checks pass only if all pairs pass, and
                      report the first failing pair
  index.block_step    (BlockIndex %t, i64 %k, i64 %n) -> BlockIndex %t + min(%k as u64, 2^31) * %n:
                      the k-th column of `simt.thread.block_column`; %t is `block_index_1d`
                      and %n the block's thread count (both verified), so two threads never
                      meet (t < n), and a negative or huge k lands past any array (checked)
  index.block_tile_row  (i64 %r, i64 %k, i64 %n) -> BlockIndex2D (%r + min(%k as u64, 2^31) * %n,
                      tid.x): row k of the thread in its block's tile (`block_index_2d(k)`);
                      %r is the row of `block_index_2d` and %n the block's row count ntid.y *
                      ntid.z (both verified), so two threads never meet (%r < %n)
  index.tile_row      (i64 %l, i64 %rows, i64 %by) -> ThreadIndex2D (%by * %rows + %l, ctaid.x *
                      ntid.x + tid.x) when %l < %rows, else (2^62, ...), past any array:
                      `simt.thread.tile_index_2d(k, rows)`. %l is the row of an
                      index.block_tile_row, %rows a constant >= 1 and %by ctaid.y (verified):
                      block (bx, by) owns rows by * rows .. by * rows + rows - 1, so the pairs
                      are unique in a 2-D launch
  local.alloc {name?} a thread's own array of a static shape (`Local[f32, 4]`), its elements
                      0 until written; loads and stores index it as a parameter array
  shared.alloc {name?} a block's shared-memory array of a static shape (`Shared[f32, 256]`):
                      one per thread block, its elements undefined until written (the
                      simulator refuses a read of a slot its block has not written); loads and
                      stores index it as a parameter array (its `len` is the static extent)
  const.array {name, data}  a read-only array of a static shape (`Const[f32, 16]`, 1 to 3
                      axes) holding `data`, its bytes as hex (ops_const.py): a module-level
                      NumPy array frozen when the kernel compiled. Loads index it as a
                      parameter array (its `len` is the static extent); nothing stores to it
  barrier             `simt.syncthreads()`: the thread waits until every thread of its block
                      has reached this barrier; shared-memory writes before it are visible
                      to every thread of the block after it. WRITE: never moved or dropped
  grid.sync           `simt.cg.this_grid().sync()`: a `barrier` for the whole grid of a
                      cooperative launch (every block resident at once): the thread waits until
                      every thread of every block has reached it; global-memory writes and
                      atomics before it are visible to every thread after it
  warp.shfl  mode     (value, i32 b) -> the value of another lane of the warp: `idx` lane b & 31,
                      `down` lane + b, `xor` lane ^ b (b unsigned); a lane whose source lane
                      is past 31 or past the warp's last thread gets its own value
  warp.vote  kind     `all` / `any` of a bool over the warp's threads (bool), or `ballot`: bit k
                      set when lane k's bool is true (u32)
  warp.reduce  op     `sum` / `max` / `min` (the binary add / max / min) over the warp's threads,
                      to every thread of the warp, in the order of a shfl.down tree
                      (offsets 16, 8, 4, 2, 1) whose missing lanes are the identity
  block.reduce  op    the same over the block: the warps' trees, then one tree over the
                      warps' totals (warp w's total at lane w)
  block.scan  op      the inclusive prefix over the block's linear thread order: a shfl.up
                      scan per warp (offsets 1, 2, 4, 8, 16: lane l takes op(v[l - d], v[l])),
                      the same scan over the warps' totals, and op(prefix of the warps before,
                      own warp's prefix)
                      Every thread of the block runs a collective (warp or block) together:
                      the uniformity check puts them where the barrier may stand
  print  format       printf(format, operands...) to the process's standard output
                      (`vprintf`); each operand is a scalar whose conversion in `format` fits
                      its type (frontend/printing.py). WRITE: never moved or dropped
  br / cond_br / return
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import dtypes
from ...dtypes import DType
from ...errors import Location
from ..core import (
    THREAD_INDEX,
    THREAD_INDEX_2D,
    ArrayType,
    Attr,
    Block,
    Choice,
    Effect,
    Exit,
    Nullary,
    Op,
    ScalarType,
    ThreadIndexType,
    Value,
)
from .ops_block import (  # noqa: F401  (re-exported: every op class is `ops.<Name>`)
    COLLECTIVE_DTYPES,
    COLLECTIVE_OPS,
    COLLECTIVES,
    SHUFFLE_MODES,
    TILE_ROW_PAST,
    VOTE_KINDS,
    Barrier,
    BlockId,
    BlockIndex1D,
    BlockIndex2D,
    BlockReduce,
    BlockRowIndex,
    BlockScan,
    BlockStep,
    BlockTileRow,
    GridSync,
    LocalAlloc,
    SharedAlloc,
    TileRow,
    WarpReduce,
    WarpShuffle,
    WarpVote,
    is_cooperative,
)
from .ops_const import ConstArray  # noqa: F401  (re-exported as `ops.ConstArray`)

BOOL = ScalarType(dtypes.bool_)
I32 = ScalarType(dtypes.i32)
I64 = ScalarType(dtypes.i64)

BINARY_KINDS = frozenset(
    [
        "add",
        "sub",
        "mul",
        "div",
        "floordiv",
        "mod",
        "min",
        "max",
        "pow",
        "and",
        "or",
        "xor",
        "shl",
        "shr",
    ]
)
UNARY_KINDS = frozenset(["neg", "not", "invert", "abs"])
COMPARE_PREDS = frozenset(["lt", "le", "gt", "ge", "eq", "ne"])
# Float functions (one or more operands of one float type, same result type).
MATH_FNS: dict[str, int] = {
    **{
        name: 1
        for name in [
            "exp",
            "exp2",
            "expm1",
            "log",
            "log2",
            "log10",
            "log1p",
            "sqrt",
            "rsqrt",
            "cbrt",
            "sin",
            "cos",
            "tan",
            "asin",
            "acos",
            "atan",
            "sinh",
            "cosh",
            "tanh",
            "asinh",
            "acosh",
            "atanh",
            "floor",
            "ceil",
            "trunc",
            "round",
            "fabs",
            "erf",
            "erfc",
        ]
    },
    "pow": 2,
    "atan2": 2,
    "fmod": 2,
    "hypot": 2,
    "copysign": 2,
    "fmin": 2,
    "fmax": 2,
    "fma": 3,
}
SPECIAL_REGS = frozenset(
    [f"{r}.{a}" for r in ("tid", "ntid", "ctaid", "nctaid") for a in "xyz"] + ["laneid"]
)


class Constant(Op):
    opname = "constant"
    value = Attr[bool | int | float]()

    def __init__(self, value: bool | int | float, dtype: DType, loc: Location) -> None:
        super().__init__([], [ScalarType(dtype)], loc, value=value)


class Binary(Op):
    """`lhs <kind> rhs`. `nowrap` (an `add` only, printed only when set): the sum is known not
    to wrap, as a `range` loop's next counter (simt/loops.py guards it), which bounds_elim
    may take as a non-negative counter's step."""

    opname = "binary"
    kind = Attr[str]()

    def __init__(
        self, kind: str, lhs: Value, rhs: Value, loc: Location, nowrap: bool = False
    ) -> None:
        assert kind in BINARY_KINDS, kind
        assert not nowrap or kind == "add", kind
        super().__init__([lhs, rhs], [lhs.type], loc, kind=kind)
        if nowrap:
            self.attrs["nowrap"] = True

    @property
    def nowrap(self) -> bool:
        return bool(self.attrs.get("nowrap", False))


class Unary(Op):
    opname = "unary"
    kind = Attr[str]()

    def __init__(self, kind: str, x: Value, loc: Location) -> None:
        assert kind in UNARY_KINDS, kind
        super().__init__([x], [x.type], loc, kind=kind)


class Compare(Op):
    opname = "compare"
    pred = Attr[str]()

    def __init__(self, pred: str, lhs: Value, rhs: Value, loc: Location) -> None:
        assert pred in COMPARE_PREDS, pred
        super().__init__([lhs, rhs], [BOOL], loc, pred=pred)


class Cast(Op):
    opname = "cast"

    def __init__(self, x: Value, to: DType, loc: Location) -> None:
        super().__init__([x], [ScalarType(to)], loc)


class Select(Choice):
    opname = "select"


class MathCall(Op):
    opname = "math"
    fn = Attr[str]()

    def __init__(self, fn: str, args: Sequence[Value], loc: Location) -> None:
        assert MATH_FNS.get(fn) == len(args), fn
        super().__init__(args, [args[0].type], loc, fn=fn)


class ThreadIndex1D(Nullary, opname="thread.index_1d", result=THREAD_INDEX):
    """`simt.thread.index_1d()`: the thread's index in the launch, the 1-D witness."""


class ThreadIndex2D(Nullary, opname="thread.index_2d", result=THREAD_INDEX_2D):
    """`simt.thread.index_2d()`: the thread's (row, col) in the launch, the 2-D witness."""


class ThreadIndexAxis(Op):
    """`t.row` (axis 0) or `t.col` (axis 1) of a ThreadIndex2D: a plain i64, never a witness."""

    opname = "index.axis"
    axis = Attr[int]()

    def __init__(self, index: Value, axis: int, loc: Location) -> None:
        assert axis in (0, 1), axis
        super().__init__([index], [I64], loc, axis=axis)


class SpecialReg(Op):
    opname = "thread.reg"
    reg = Attr[str]()

    def __init__(self, reg: str, loc: Location) -> None:
        assert reg in SPECIAL_REGS, reg
        super().__init__([], [I32], loc, reg=reg)


class IndexAdvance(Op):
    """`i + g` of a ThreadIndex `i` and the launch's thread count `g` (of a BlockIndex and
    the block's thread count): still the witness."""

    opname = "index.advance"

    def __init__(self, index: Value, stride: Value, loc: Location) -> None:
        # A BlockIndex advances by the block's thread count and stays one (the verifier).
        super().__init__([index, stride], [index.type], loc)


class IndexToInt(Op):
    opname = "index.int"

    def __init__(self, index: Value, loc: Location) -> None:
        super().__init__([index], [I64], loc)


class ArrayLen(Op):
    opname = "len"

    def __init__(self, array: Value, loc: Location, axis: int = 0) -> None:
        assert isinstance(array.type, ArrayType)
        assert 0 <= axis < array.type.ndim, axis
        # 1-D arrays print as before (`len %a`); 2-D ones always name the axis.
        attrs = {"axis": axis} if array.type.ndim > 1 else {}
        super().__init__([array], [I64], loc, **attrs)

    @property
    def axis(self) -> int:
        return self.attrs.get("axis", 0)  # type: ignore[no-any-return]


def _indices(index: Value | Sequence[Value]) -> list[Value]:
    return [index] if isinstance(index, Value) else list(index)


Index = Value | Sequence[Value]
Lane = tuple[int, int] | None  # a chunk copy's (j, W); None for any other access


class _Access(Op):
    """A load or store; `vector=(j, W)` marks element j of a chunk copy of W contiguous
    elements (simt/chunks.py, ir/simt/chunk_groups.py): the W accesses stand together, lanes W-1
    down to 0, and the backend may move them as one vector at lane 0, when every lane's check
    has run. Their meaning is the W scalar accesses."""

    @property
    def vector(self) -> Lane:
        return self.attrs.get("vector")  # type: ignore[no-any-return]


def _lane(vector: Lane) -> dict[str, Any]:
    return {"vector": vector} if vector is not None else {}


class Load(_Access):
    """`array[i0, ...]`: operands are the array, then one i64 index per axis."""

    opname = "load"
    effect = Effect.READ

    def __init__(self, array: Value, index: Index, loc: Location, vector: Lane = None) -> None:
        assert isinstance(array.type, ArrayType)
        idx = _indices(index)
        assert len(idx) == array.type.ndim, (array.type, len(idx))
        super().__init__([array, *idx], [ScalarType(array.type.dtype)], loc, **_lane(vector))

    @property
    def indices(self) -> list[Value]:
        return self.operands[1:]


class Store(_Access):
    """`array[i0, ...] = value`: operands are the array, one i64 index per axis, the value."""

    opname = "store"
    effect = Effect.WRITE

    def __init__(
        self, array: Value, index: Index, value: Value, loc: Location, vector: Lane = None
    ) -> None:
        super().__init__([array, *_indices(index), value], [], loc, **_lane(vector))

    @property
    def indices(self) -> list[Value]:
        return self.operands[1:-1]


ATOMIC_KINDS = frozenset(["add", "sub", "max", "min", "exch", "and_", "or_", "xor", "inc", "dec"])
# integer-only kinds (numba's names): bitwise and, or, xor; inc and dec wrap (u32 and u64, as
# numba: PTX's atom.inc/dec on u32, a compare-and-swap loop on u64)
BITWISE_ATOMIC_KINDS = frozenset(["and_", "or_", "xor"])
WRAPPING_ATOMIC_KINDS = frozenset(["inc", "dec"])
WRAPPING_ATOMIC_DTYPES = ("u32", "u64")


def atomic_target(t: ArrayType) -> bool:
    """Whether atomics may update `t`: an AtomicSlice, or a block's shared array (whose
    phases `simt/sync_check.py` keeps free of plain accesses)."""
    return t.atomic or t.shared is not None


def _atomic_ndim(op: Op) -> int:
    t = op.operands[0].type
    return t.ndim if isinstance(t, ArrayType) else 1


class AtomicRMW(Op):
    """`simt.atomic.<kind>(array, index, value)`: operands array, one i64 index per axis,
    value; the result is the old element. WRITE: never dropped, never moved across other
    memory ops."""

    opname = "atomic.rmw"
    effect = Effect.WRITE
    kind = Attr[str]()

    def __init__(
        self,
        kind: str,
        array: Value,
        index: Value | Sequence[Value],
        value: Value,
        loc: Location,
    ) -> None:
        assert kind in ATOMIC_KINDS, kind
        assert isinstance(array.type, ArrayType) and atomic_target(array.type), array.type
        idx = _indices(index)
        super().__init__([array, *idx, value], [ScalarType(array.type.dtype)], loc, kind=kind)

    @property
    def indices(self) -> list[Value]:
        return self.operands[1 : 1 + _atomic_ndim(self)]


class AtomicCAS(Op):
    """`simt.atomic.cas(array, index, expected, value)`: operands array, one i64 index per
    axis, expected, value; the result is the old element."""

    opname = "atomic.cas"
    effect = Effect.WRITE

    def __init__(
        self,
        array: Value,
        index: Value | Sequence[Value],
        expected: Value,
        value: Value,
        loc: Location,
    ) -> None:
        assert isinstance(array.type, ArrayType) and atomic_target(array.type), array.type
        idx = _indices(index)
        super().__init__([array, *idx, expected, value], [ScalarType(array.type.dtype)], loc)

    @property
    def indices(self) -> list[Value]:
        return self.operands[1 : 1 + _atomic_ndim(self)]


class BoundsCheck(Op):
    """Stops the thread and records a site unless 0 <= index < length (unsigned compare).

    One op may hold several checks (`bounds_merge` groups them): operands are pairs
    (index0, length0, index1, length1, ...) and `sites` names each pair's site. The thread
    continues only if every pair passes; a failing thread records the first failing pair.
    """

    opname = "check.bounds"
    effect = Effect.CHECK
    sites = Attr[tuple[int, ...]]()

    def __init__(self, index: Value, length: Value, site: int, loc: Location) -> None:
        super().__init__([index, length], [], loc, sites=(site,))

    @classmethod
    def group(cls, checks: Sequence[BoundsCheck], loc: Location) -> BoundsCheck:
        first = checks[0]
        op = cls(first.operands[0], first.operands[1], first.sites[0], loc)
        op.operands = [v for c in checks for v in c.operands]
        op.attrs["sites"] = tuple(s for c in checks for s in c.sites)
        return op

    @property
    def site(self) -> int:
        """The site of a single (ungrouped) check."""
        return self.sites[0]

    def pairs(self) -> list[tuple[Value, Value, int]]:
        """(index, length, site) of each check in the op, in program order."""
        o = self.operands
        return [(o[2 * k], o[2 * k + 1], s) for k, s in enumerate(self.sites)]


class Print(Op):
    """`print(...)` in a kernel: one printf call (`format` with one conversion per operand)."""

    opname = "print"
    effect = Effect.WRITE
    format = Attr[str]()

    def __init__(self, fmt: str, args: Sequence[Value], loc: Location) -> None:
        super().__init__(list(args), [], loc, format=fmt)


class Br(Op):
    opname = "br"
    effect = Effect.CONTROL
    is_terminator = True
    dest = Attr[Block]()

    def __init__(self, dest: Block, args: Sequence[Value], loc: Location) -> None:
        super().__init__(args, [], loc, dest=dest)

    def successors(self) -> list[Block]:
        return [self.dest]


class CondBr(Op):
    opname = "cond_br"
    effect = Effect.CONTROL
    is_terminator = True
    if_true = Attr[Block]()
    if_false = Attr[Block]()

    def __init__(
        self,
        cond: Value,
        if_true: Block,
        true_args: Sequence[Value],
        if_false: Block,
        false_args: Sequence[Value],
        loc: Location,
    ) -> None:
        super().__init__(
            [cond, *true_args, *false_args],
            [],
            loc,
            if_true=if_true,
            if_false=if_false,
            n_true=len(true_args),
        )

    @property
    def cond(self) -> Value:
        return self.operands[0]

    @property
    def true_args(self) -> list[Value]:
        return self.operands[1 : 1 + self.attrs["n_true"]]

    @property
    def false_args(self) -> list[Value]:
        return self.operands[1 + self.attrs["n_true"] :]

    def successors(self) -> list[Block]:
        return [self.if_true, self.if_false]


class Return(Exit):
    opname = "return"


def uncast(v: Value) -> Value:
    """`v`, or the operand of the Cast that makes it."""
    return v.owner.operands[0] if isinstance(v.owner, Cast) else v


def block_thread_index(v: Value) -> Value | None:
    """The block's thread index (`simt.thread.block_index_1d()`, a ThreadIndexType with
    `block`) that the integer `v` converts, through a Cast and an IndexToInt; None if none."""
    owner = uncast(v).owner
    if isinstance(owner, IndexToInt):
        index = owner.operands[0]
        if isinstance(index.type, ThreadIndexType) and index.type.block:
            return index
    return None


def branch_args(term: Op, dest: Block) -> list[Value]:
    """The values `term` passes to `dest`'s arguments (for one edge)."""
    if isinstance(term, Br):
        return term.operands
    if isinstance(term, CondBr):
        return term.true_args if dest is term.if_true else term.false_args
    return []


def set_branch_args(term: Op, dest: Block, args: Sequence[Value]) -> None:
    if isinstance(term, Br):
        term.operands = list(args)
    elif isinstance(term, CondBr):
        t, f = term.true_args, term.false_args
        if dest is term.if_true:
            t = list(args)
        if dest is term.if_false:
            f = list(args)
        term.operands = [term.cond, *t, *f]
        term.attrs["n_true"] = len(t)


def attr_text(op: Op) -> dict[str, Any]:
    """Attributes worth printing (block references are printed by the printer itself)."""
    return {k: v for k, v in op.attrs.items() if k not in ("dest", "if_true", "if_false", "n_true")}
