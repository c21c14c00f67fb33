"""The Tile lowerer's state and the tile typing rules: literals, unification, broadcasting.

`TileRules` is the frontend core's `Lowerer` (frontend/core.py) for the Tile track, with what
every part of tile lowering uses: the current block of the structured IR, `emit`, the rules by
which operands meet (`Weak` literals adopt the other operand's dtype, two dtypes never mix, shapes
broadcast as NumPy's and the broadcast is made explicit with `tile.reshape` + `tile.broadcast`),
casts, stores into a Part, `@` and the compile-time values (shapes, axes, dtypes) of calls,
and `absent_error` for an optional parameter used where a launch left it out.
It is what the handlers of control flow (control.py) and of `tile.*` (lower_api.py) see of the
lowerer; frontend.py's `TileLowerer` is the whole of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..errors import CompileError, KernelTypeError, Location
from ..frontend import values
from ..frontend.core import Lowerer
from ..frontend.loops import Jumps, LoopTypes
from ..frontend.source import FunctionSource
from ..frontend.values import SYMBOL, PyObj, Undefined, Weak
from ..ir.core import Block, Function, Op, Value
from ..ir.tile import ops
from ..ir.tile.types import ArrayParamType, TileType, is_pow2, tile_type
from .order import own_index

Operand = Any  # Value | Weak | PyObj | Undefined (after an `if`) | tuple[Operand, ...]

# The accumulator dtypes `tile.mma` has for each input dtype.
MMA_ACCUMULATORS = {
    dtypes.f16: (dtypes.f16, dtypes.f32),
    dtypes.bf16: (dtypes.f32,),
    dtypes.f32: (dtypes.f32,),
    dtypes.f64: (dtypes.f64,),
    dtypes.i8: (dtypes.i32,),  # 8-bit integers (signed or not, each side its own) into i32
    dtypes.u8: (dtypes.i32,),
}
MMA_INTS = (dtypes.i8, dtypes.u8)
for _f8 in (dtypes.f8e4m3fn, dtypes.f8e5m2):  # Hopper's fp8 tensor cores: f16 or f32 sums
    MMA_ACCUMULATORS[_f8] = (dtypes.f16, dtypes.f32)
MMA_ACCUMULATORS[dtypes.tf32] = (dtypes.f32,)
# Ops that compute on elements: 8-bit float tiles only load, store, convert and feed mma, tf32
# tiles only convert and feed mma.
_ARITHMETIC = (ops.Binary, ops.Unary, ops.Compare, ops.Reduce, ops.Scan, ops.Select)


def _refuse_f8(op: Op) -> None:
    for v in op.operands:
        t = v.type
        if isinstance(t, TileType) and t.dtype.mma_only:
            what = "load, store, convert" if t.dtype.is_f8 else "convert"
            raise KernelTypeError(
                f"{t.dtype.name} tiles {what} and feed `tile.mma`, nothing more",
                op.loc,
                label=f"this computes on a {t.dtype.name} tile",
                help="convert first, e.g. `x.astype(fl.f32)`, and back with "
                f"`.astype(fl.{t.dtype.name})` before the store",
            )


# The help for each operator rule (frontend/values.py, `OPERATOR_RULES`) in Tile terms.
_OPERATOR_HELP = {"div": "use `//` for floor division, or convert with `.astype(fl.f32)`"}
_POW2_HELP = (
    "round the tile up to a power of two; edge tiles are padded on load and masked on store"
)


class TileRules(Lowerer[Operand]):
    """Lowers one kernel body into `fn` (whose entry block already has the parameters)."""

    RETURN_HELP = "store results into a `tile.Part` parameter: `out.store(x)`"
    LOOP_HELP = "loop over `range(stop)` or `range(start, stop, step)`"
    ASSIGN_HELP = "tiles are values: assign to a name, and write memory with `part.store(x)`"
    VALUE_KINDS = "tiles and numbers"
    BINARY_KINDS = frozenset(
        {"add", "sub", "mul", "div", "floordiv", "mod", "pow", "matmul"}
        | {"and", "or", "xor", "shl", "shr"}  # bitwise and shifts: integer (and bool) tiles
    )

    def __init__(self, src: FunctionSource, fn: Function, env: dict[str, Operand]) -> None:
        super().__init__(src, env)
        self.fn = fn
        self.block: Block = fn.entry
        self._loop_types: LoopTypes[TileType] = LoopTypes()
        self.branch_depth = 0  # how many `if`s on run-time values enclose this statement
        self.jumps: Jumps | None = None  # the innermost loop's `break`/`continue` (jumps.py)
        # `with tile.unsafe():` statements (regions.py): the spans seen, and how many enclose here
        self.unsafe_regions: list[Location] = []
        self.unsafe_depth = 0
        # Values typed by Python (`alpha: float`, `n: int` parameters, and what only they and
        # literals compute): like a literal, each takes the other operand's dtype at a use.
        self.weak: set[Value] = set()
        # each `part.tiles()` loop lowered (persistent.Walk), for persistent.check_walks
        self.walks: list[Any] = []

    @property
    def loop_types(self) -> LoopTypes[TileType]:
        return self._loop_types

    def checkpoint(self) -> Callable[[], None]:
        env, block, n_ops = dict(self.env), self.block, len(self.block.ops)

        def restore() -> None:
            self.env, self.block = env, block
            del block.ops[n_ops:]  # the first attempt's bounds and initial values

        return restore

    def defined(self, name: str) -> bool:
        """Whether `name` has a value here (not unassigned on some path)."""
        return name in self.env and not isinstance(self.env[name], Undefined)

    def emit(self, op: Op) -> Value:
        if isinstance(op, _ARITHMETIC):
            _refuse_f8(op)
        self.block.append(op)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    # ---------------------------------------------------------------------------- values

    def const(self, value: Any, dtype: DType, loc: Location, shape: tuple[int, ...] = ()) -> Value:
        return self.emit(ops.Constant(value, TileType(dtype, shape), loc))

    def literal(self, w: Weak, dtype: DType, loc: Location) -> Any:
        """The literal `w` as a constant of `dtype`, if it holds the value."""
        if dtype.is_float and not isinstance(w.value, bool):
            help = values.overflow_help(
                dtype, "convert the tile to a wider type first (`.astype(fl.f32)`)"
            )
        else:
            help = f"write a value {dtype.name} holds, or convert the tile with `.astype(...)`"
        return values.literal_value(w, dtype, loc, help)

    def tile_value(self, x: Operand, loc: Location, dtype: DType | None = None) -> Value:
        """`x` as a tile value; a Weak becomes `dtype` (or its default type)."""
        if isinstance(x, Weak):
            dt = dtype or dtypes.tile_literal_default(x.value)
            return self.const(self.literal(x, dt, loc), dt, loc)
        if isinstance(x, Value) and isinstance(x.type, TileType):
            if dtype is not None and self.adopts(x, dtype) and x.type.dtype != dtype:
                return self.emit(ops.Cast(x, dtype, loc))
            return x
        if isinstance(x, Value):
            raise KernelTypeError(
                f"expected a tile, found the array `{x.name}` ({x.type})",
                loc,
                help=f"load a tile of it first: `tile.load_like({x.name}, part)` or `tile.load(...)`",
            )
        if isinstance(x, PyObj):
            raise values.not_a_value(x, loc, self.VALUE_KINDS)
        what = "a tuple" if isinstance(x, tuple) else f"`{getattr(x, 'name', x)}`"
        raise KernelTypeError(f"expected a tile or a number, found {what}", loc)

    def is_weak(self, x: Operand) -> bool:
        return isinstance(x, Value) and x in self.weak

    def adopts(self, x: Value, to: DType) -> bool:
        """Whether `x`, if weak, may become `to` where it meets it: a `float` value only a
        float dtype, an `int` value any number (as SIMT's `float` and `int` parameters)."""
        if x not in self.weak:
            return False
        return not to.is_bool and (to.is_float or not tile_type(x).dtype.is_float)

    def index(self, x: Operand, loc: Location) -> Value:
        """An i32 scalar for a tile coordinate or loop bound: a literal that i32 holds, a weak
        `int` value (converted as `astype` converts: wrapping), or an integer scalar i32
        holds every value of (i8, i16, u8, u16 widen exactly); an i64, u32 or u64 one is
        E0308, since converting it could change its value."""
        v = self.tile_value(x, loc, dtypes.i32)
        t = tile_type(v)
        if t.shape != () or not t.dtype.is_int:
            raise KernelTypeError(f"an index must be an integer scalar, found {t}", loc)
        if t.dtype == dtypes.i32:
            return v
        if t.dtype.bits >= 32:
            name = v.name or "x"
            raise KernelTypeError(
                f"tile indices and loop bounds are i32, found {t.dtype.name}",
                loc,
                label=f"this is {t.dtype.name}",
                help=f"annotate the parameter `fl.i32` (a launch refuses a value past it), "
                f"or convert explicitly: `{name}.astype(fl.i32)` (which wraps past 2**31 - 1)",
            )
        return self.emit(ops.Cast(v, dtypes.i32, loc))

    def ceil_div(self, a: Operand, b: Operand, loc: Location) -> Operand:
        """`ceil(a / b)` with Python's signs, as cuTile's `cdiv` (`-((-a) // b)`), written
        `a // b + (a % b != 0)` so that no intermediate overflows. By a positive literal
        (`tile.cdiv(n, TILE_N)`, the ops library's form) it stays `(a + b - 1) // b`, the
        Tile IR the kernels were tuned with, exact unless `a` is within `b` of the dtype's
        largest value."""
        if isinstance(a, Weak) and isinstance(b, Weak):
            q, r = values.fold("floordiv", a, b, loc), values.fold("mod", a, b, loc)
            assert q is not None and r is not None
            return Weak(q.value + (r.value != 0))
        if isinstance(b, Weak) and isinstance(b.value, int) and b.value > 0:
            return self.binary(
                "floordiv", self.binary("sub", self.binary("add", a, b, loc), Weak(1), loc), b, loc
            )
        q = self.binary("floordiv", a, b, loc)
        ne = self.compare("ne", self.binary("mod", a, b, loc), Weak(0), loc)
        up = self.cast(ne, tile_type(self.tile_value(q, loc)).dtype, loc)
        if self.is_weak(q):  # `tile.cdiv(n, 4)` of an `int` n stays weak, as `n // 4` is
            self.weak.add(up)
        return self.binary("add", q, up, loc)

    def unify(self, a: Operand, b: Operand, loc: Location, what: str) -> DType:
        if isinstance(a, Weak) and isinstance(b, Weak):  # the type that holds both
            da, db = dtypes.tile_literal_default(a.value), dtypes.tile_literal_default(b.value)
            return da if (da.is_float, da.bits) >= (db.is_float, db.bits) else db
        if self.is_weak(a) or self.is_weak(b):
            return self._unify_weak(a, b, loc, what)
        if isinstance(a, Weak):
            a, b = b, a
        da = tile_type(self.tile_value(a, loc)).dtype
        if isinstance(b, Weak):
            self.literal(b, da, loc)
            return da
        vb = self.tile_value(b, loc)
        db = tile_type(vb).dtype
        if da != db:
            # a loop variable that started as a literal (`k = 0`) takes the other side's type
            for v, other in ((self.tile_value(a, loc), db), (vb, da)):
                source = _literal_source(v)
                self.loop_types.retry_first_guess(source, TileType(other, tile_type(source).shape))
            wide = da if da.bits >= db.bits and da.is_float >= db.is_float else db
            raise KernelTypeError(
                f"mismatched types in {what}: {da.name} and {db.name}",
                loc,
                label=f"{da.name} and {db.name}",
                help=f"convert one side explicitly, e.g. `x.astype(fl.{wide.name})`",
            )
        return da

    def _unify_weak(self, a: Operand, b: Operand, loc: Location, what: str) -> DType:
        """Unify where a weak value (a `float`/`int` parameter) meets another operand: two weak
        ones by Python's rule (f64 if either is a float, else i64), else the strong side's
        dtype if the weak one may take it."""
        sides = [self.tile_value(x, loc) if not isinstance(x, Weak) else x for x in (a, b)]
        if all(isinstance(x, Weak) or self.is_weak(x) for x in sides):
            floats = [
                isinstance(x.value, float) if isinstance(x, Weak) else tile_type(x).dtype.is_float
                for x in sides
            ]
            return dtypes.f64 if any(floats) else dtypes.i64
        weak, strong = (sides[0], sides[1]) if self.is_weak(sides[0]) else (sides[1], sides[0])
        assert isinstance(weak, Value) and isinstance(strong, Value)  # one weak, one strong
        st = tile_type(strong).dtype
        if self.adopts(weak, st):
            return st
        kind = "float" if tile_type(weak).dtype.is_float else "int"
        raise KernelTypeError(
            f"`{weak.name or 'value'}` (a `{kind}` parameter) cannot be used as {st.name} "
            f"in {what}",
            loc,
            label=f"{kind} and {st.name}",
            help=f"convert explicitly, e.g. `{weak.name or 'x'}.astype(fl.{st.name})`, or "
            "convert the other operand, e.g. `.astype(fl.f32)`",
        )

    # ---------------------------------------------------------------------- broadcasting

    def broadcast_shapes(
        self, s1: tuple[int, ...], s2: tuple[int, ...], loc: Location
    ) -> tuple[int, ...]:
        out = []
        for i in range(1, max(len(s1), len(s2)) + 1):
            d1 = s1[-i] if i <= len(s1) else 1
            d2 = s2[-i] if i <= len(s2) else 1
            if d1 != d2 and 1 not in (d1, d2):
                raise KernelTypeError(
                    f"cannot broadcast tiles of shapes {s1} and {s2}",
                    loc,
                    help="dimensions must match or be 1 (NumPy rules); "
                    "keep reduced axes with `keepdims=True`",
                )
            out.append(max(d1, d2))
        return tuple(reversed(out))

    def broadcast_to(self, v: Value, shape: tuple[int, ...], loc: Location) -> Value:
        t = tile_type(v)
        if t.shape == shape:
            return v
        if self.broadcast_shapes(t.shape, shape, loc) != shape:
            raise KernelTypeError(f"cannot broadcast a tile of shape {t.shape} to {shape}", loc)
        if t.ndim < len(shape):
            v = self.emit(ops.Reshape(v, (1,) * (len(shape) - t.ndim) + t.shape, loc))
        if tile_type(v).shape != shape:
            v = self.emit(ops.Broadcast(v, shape, loc))
        return v

    def operands(self, xs: Sequence[Operand], dtype: DType, loc: Location) -> list[Value]:
        vs = [self.tile_value(x, loc, dtype) for x in xs]
        shape: tuple[int, ...] = ()
        for v in vs:
            shape = self.broadcast_shapes(shape, tile_type(v).shape, loc)
        return [self.broadcast_to(v, shape, loc) for v in vs]

    # ------------------------------------------------------------------------- operators

    def binary(self, kind: str, a: Operand, b: Operand, loc: Location) -> Operand:
        if kind == "matmul":
            return self.matmul(a, b, loc)
        folded = values.fold(kind, a, b, loc)
        if folded is not None:
            return folded
        sym = SYMBOL.get(kind, kind)
        dt = self.unify(a, b, loc, f"`{sym}`")
        values.check_operator(kind, sym, dt, loc, _OPERATOR_HELP)
        if kind == "pow" and not dt.is_float:
            return self._int_power(a, b, dt, loc)
        va, vb = self.operands([a, b], dt, loc)
        result = self.emit(ops.Binary(kind, va, vb, loc))
        if all(isinstance(x, Weak) or self.is_weak(x) for x in (a, b)):
            self.weak.add(result)  # what only weak values and literals compute stays weak
        return result

    def _int_power(self, a: Operand, b: Operand, dt: DType, loc: Location) -> Operand:
        """`x ** n` of an int tile by a literal n >= 0: square-and-multiply at compile time,
        wrapping as the simulator's integer power does. Tile IR has no integer power, so a
        run-time exponent is refused."""
        n = b.value if isinstance(b, Weak) else None
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise KernelTypeError(
                f"`**` of {dt.name} tiles takes a literal exponent of 0 or more in tile kernels",
                loc,
                help="write the exponent as a number (`x ** 3`), or convert: "
                "`x.astype(fl.f32) ** e`",
            )
        base = self.operands([a], dt, loc)[0]
        result: Value | None = None
        while True:
            if n & 1:
                result = base if result is None else self.emit(ops.Binary("mul", result, base, loc))
            n >>= 1
            if not n:
                break
            base = self.emit(ops.Binary("mul", base, base, loc))
        if result is None:  # x ** 0 == 1
            shape = tile_type(self.operands([a], dt, loc)[0]).shape
            return self.broadcast_to(self.tile_value(Weak(1), loc, dt), shape, loc)
        return result

    def compare(self, pred: str, a: Operand, b: Operand, loc: Location) -> Operand:
        folded = values.fold(pred, a, b, loc)
        if folded is not None:
            return folded
        dt = self.unify(a, b, loc, f"`{SYMBOL[pred]}`")
        va, vb = self.operands([a, b], dt, loc)
        return self.emit(ops.Compare(pred, va, vb, loc))

    def cast(self, x: Operand, dtype: DType, loc: Location) -> Value:
        if isinstance(x, Weak):
            return self.const(values.coerce_literal(x.value, dtype), dtype, loc)
        v = self.tile_value(x, loc)
        return v if tile_type(v).dtype == dtype else self.emit(ops.Cast(v, dtype, loc))

    def store(
        self,
        part: Value,
        x: Operand,
        loc: Location,
        index: Sequence[Value] | None = None,
        chunk: tuple[int, ...] | None = None,
        own: bool = False,
        hints: dict[str, Any] | None = None,
    ) -> None:
        """`part.store(x)` (this block's own tile), or, with `index`, `t.store(x)` for a tile
        `part.tiles()` gave this block, or a chunk of `chunk`'s shape `part.chunks()` gave
        (persistent.py); `hints`: tileiras's `latency` and `allow_tma`."""
        t = part.type
        assert isinstance(t, ArrayParamType) and t.tile is not None
        shape = chunk or t.tile
        v = self.tile_value(x, loc, t.dtype)
        vt = tile_type(v)
        if vt.dtype != t.dtype:
            raise KernelTypeError(
                f"cannot store a {vt.dtype.name} tile into `{part.name}`, a Part of {t.dtype.name}",
                loc,
                label=f"this is {vt.dtype.name}",
                help=f"convert it: `x.astype(fl.{t.dtype.name})`",
            )
        if not _broadcasts(vt.shape, shape):
            raise _store_shape_error(part.name, vt.shape, shape, chunk is not None, loc)
        value = self.broadcast_to(v, shape, loc)
        if index is None and (t.group or t.ndim > 3):  # the block id is not the tile index
            index, own = own_index(self, part, loc), True
        if index is None:
            self.block.append(ops.Store(part, value, loc, **(hints or {})))
        else:
            self.block.append(ops.StoreAt(part, value, index, loc, chunk, own, **(hints or {})))

    def permute(self, x: Value, axes: tuple[int, ...] | None, loc: Location) -> Value:
        n = tile_type(x).ndim
        perm = tuple(reversed(range(n))) if axes is None else axes
        if sorted(perm) != list(range(n)):
            raise CompileError(f"{perm} is not a permutation of the {n} axes", loc)
        return x if perm == tuple(range(n)) else self.emit(ops.Permute(x, perm, loc))

    def matmul(self, a: Operand, b: Operand, loc: Location) -> Value:
        va, vb = self.tile_value(a, loc), self.tile_value(b, loc)
        ta, tb = tile_type(va), tile_type(vb)
        acc_dt = ta.dtype
        if ta.dtype in (dtypes.f16, dtypes.bf16) or ta.dtype.mma_only:
            acc_dt = dtypes.f32
        elif ta.dtype in MMA_INTS:
            acc_dt = dtypes.i32
        m = ta.shape[0] if ta.ndim == 2 else 0
        n = tb.shape[-1] if tb.ndim == 2 else 0
        acc = self.const(0, acc_dt, loc, (m, n)) if m and n else None
        return self.mma(va, vb, acc, loc)

    def mma(self, a: Value, b: Value, acc: Value | None, loc: Location) -> Value:
        """`acc + a @ b` of (M, K) and (K, N) tiles, float of one dtype or 8-bit integers (i8
        or u8 each), `acc` (M, N) in a wide enough dtype (i32 for the integers)."""
        ta, tb = tile_type(a), tile_type(b)
        if ta.ndim != 2 or tb.ndim != 2 or ta.shape[1] != tb.shape[0]:
            raise KernelTypeError(
                f"cannot multiply tiles of shapes {ta.shape} and {tb.shape}",
                loc,
                help="`a @ b` needs a (M, K) and b (K, N)",
            )
        ints = ta.dtype in MMA_INTS and tb.dtype in MMA_INTS
        if not ints and (ta.dtype != tb.dtype or not ta.dtype.is_float):
            raise KernelTypeError(
                "`tile.mma` needs two float tiles of one dtype, or two 8-bit integer tiles, "
                f"found {ta.dtype.name} and {tb.dtype.name}",
                loc,
                help="convert one side with `.astype(...)`",
            )
        assert acc is not None
        tacc = tile_type(acc)
        want = (ta.shape[0], tb.shape[1])
        if tacc.shape != want:
            raise KernelTypeError(
                f"the accumulator must have shape {want}, found {tacc.shape}", loc
            )
        if tacc.dtype not in MMA_ACCUMULATORS.get(ta.dtype, ()):
            raise KernelTypeError(
                f"a {ta.dtype.name} product cannot accumulate in {tacc.dtype.name}",
                loc,
                help="accumulate in f32: `acc = tile.zeros((M, N), fl.f32)`",
            )
        return self.emit(ops.Mma(a, b, acc, loc))

    # ---------------------------------------------------------------- compile-time values

    def static_int(self, x: Operand, loc: Location, what: str) -> int:
        if isinstance(x, Weak) and isinstance(x.value, int) and not isinstance(x.value, bool):
            return x.value
        raise CompileError(
            f"{what} must be a compile-time integer",
            loc,
            help="use a literal, a `tile.Const[int]` parameter or a Part's `.shape`",
        )

    def static_shape(
        self, x: Operand, loc: Location, what: str = "a tile shape"
    ) -> tuple[int, ...]:
        items = x if isinstance(x, tuple) else (x,)
        shape = tuple(self.static_int(i, loc, what) for i in items)
        bad = next((d for d in shape if not is_pow2(d)), None)
        if bad is None:
            return shape
        message = f"tile dimensions must be powers of two, but {what} {shape} has {bad}"
        raise CompileError(message, loc, label="not a power of two", help=_POW2_HELP)

    def static_dtype(self, x: Operand, loc: Location) -> DType:
        if isinstance(x, PyObj) and isinstance(x.obj, DType):
            return x.obj
        raise CompileError("expected a dtype such as `fl.f32`", loc)


def _broadcasts(s: tuple[int, ...], to: tuple[int, ...]) -> bool:
    """Whether a tile of shape `s` broadcasts to `to` (NumPy's rules, `to` unchanged)."""
    if len(s) > len(to):
        return False
    return all(d in (1, t) for d, t in zip(reversed(s), reversed(to), strict=False))


def _store_shape_error(
    name: str, got: tuple[int, ...], tile: tuple[int, ...], chunk: bool, loc: Location
) -> KernelTypeError:
    """E0308 for a store of a `got` tile into `name`, whose tiles (or chunks) are `tile`."""
    what = "chunks" if chunk else "tiles"
    fixes = []
    if not chunk:
        fixes.append(f"partition `{name}` with the stored tile's shape (`.partition({got})`)")
    if math.prod(got) == math.prod(tile):
        fixes.append(f"reshape the tile: `v.reshape({tile})`")
    elif len(got) == len(tile) and all(
        g >= t and g % t == 0 for g, t in zip(got, tile, strict=True)
    ):
        zeros = (0,) * len(tile)
        fixes.append(f"store a part of it: `tile.extract(v, {zeros}, {tile})`")
    fixes.append(f"compute a tile of `{name}.shape`, e.g. load with `tile.load_like(x, {name})`")
    return KernelTypeError(
        f"cannot store a tile of shape {got} into `{name}`, whose {what} are {tile}",
        loc,
        label=f"a {got} tile",
        help="; or ".join(fixes),
    )


def _literal_source(v: Value) -> Value:
    """The value `v` was computed from with literals only (`k * BK + 1` -> `k`): the loop
    variable whose guessed type `v` has, if it is one."""
    while isinstance(v.owner, ops.Binary | ops.Unary):
        rest = [x for x in v.owner.operands if not _is_literal(x)]
        if len(rest) != 1:
            break
        v = rest[0]
    return v


def _is_literal(v: Value) -> bool:
    while isinstance(v.owner, ops.Broadcast | ops.Reshape):
        v = v.owner.operands[0]
    return isinstance(v.owner, ops.Constant)


def absent_error(x: PyObj, loc: Location, message: str) -> KernelTypeError:
    """E0308 for None used as an array: an optional parameter this launch left out (its
    PyObj keeps the parameter's name, tile/compiler.py), or a literal None."""
    name = f"`{x.name}`" if x.name != "None" else "the parameter"
    return KernelTypeError(
        message,
        loc,
        code="E0308",
        help=f"{name} is None in this specialisation (a `| None` parameter the launch passed "
        f"None for): use it only under `if {x.name} is not None:`, which is decided at "
        "compile time",
    )
