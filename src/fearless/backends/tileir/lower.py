"""Tile IR (ours) -> CUDA Tile IR bytecode, a visitor over the ops using NVIDIA's encoders.

The encoders come from `backends/tileir/cuda_tile.py` (the only module that imports cuda-tile). The
entry's parameters follow `TileParam`'s ABI (compiler.py): each array becomes a tensor view
(`make_tensor_view` of its pointer, dynamic extents and strides, last stride 1), and every
(array, tile shape, padding) it is loaded or stored with becomes one partition view, made at
the top of the entry so that loop bodies can use it. A store writes the Part at this block's
ids: the bytecode has no other way to name a tile of a Part.

Memory order: loads and stores take the current token and a store makes the next one, so a
block that reads its own output tile before writing it sees the old values. A token made inside
a region cannot be used outside it: a loop or an if whose blocks store carries the token as one
more loop-carried value or result, so what follows is ordered after those stores.

Each op goes to the handler of its class in `registry.lowers`: a method below, or a function of
`arith.py` or `indexed.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ... import dtypes
from ...dtypes import DType
from ...errors import CompileError
from ...ir.core import Block, Effect, Value
from ...ir.tile import ops
from ...ir.tile.kernel import TileIR
from ...ir.tile.types import ArrayParamType, TileType, array_type, tile_type
from . import cuda_tile as tileir

# arith.py (mma, extract, bitcast, cat) and indexed.py (gather, scatter, the atomics) register
# handlers with `lowers` when imported: importing both here makes `lowers` complete.
from . import indexed as tileir_indexed  # noqa: F401
from .arith import SIMPLE as _SIMPLE
from .arith import float_divmod, reduce_tile, scan_tile
from .registry import lowers


def stored_dtype(dt: DType) -> DType:
    """The element type an array of `dt` has in memory: a bool array is bytes (0 or 1, as torch
    and NumPy keep it), loaded as i8 and compared with 0, stored as 0 or 1. Tile IR's i1 views
    are not bytes: tileiras 13.5 copies an i1 tile through shared memory as packed bits (a
    128 x 128 tile as 2 KB, each row S / 8 bytes apart), so a bool mask that took that path
    read the wrong bytes on the GPU (2026-12-05, docs/design.md section 7.2) while its plain
    loads and the simulator read bytes."""
    return dtypes.i8 if dt.is_bool else dt


def lower_to_bytecode(ir: TileIR, version: Any, arch: str = "sm_90") -> bytes:
    """The bytecode of one specialisation; `arch` keys the kernel's and the loads' hints."""
    bc = tileir.encoders()

    def param_types(tt: Any) -> list[Any]:
        out = []
        for p in ir.fn.params:
            t = p.type
            i32 = tt.tile(tt.I32, [])
            if isinstance(t, ArrayParamType):
                elem = tt.simple(getattr(bc.SimpleType, _SIMPLE[stored_dtype(t.dtype).name]))
                out.append(tt.tile(tt.pointer(elem, bc.PtrAttr.Missing), []))
                out += [i32] * t.ndim + [i32] * (t.ndim - 1)
            else:
                assert isinstance(t, TileType)
                out.append(tt.tile(tt.simple(getattr(bc.SimpleType, _SIMPLE[t.dtype.name])), []))
        return out

    def body(builder: Any, tt: Any, values: Sequence[Any]) -> None:
        _Lowerer(bc, builder, tt, arch).function(ir, list(values))

    h = ir.hints
    if h.num_worker_warps is not None:
        tileir.check_worker_warps(h.num_worker_warps, version)
    hints = tileir.entry_hints(arch, h.num_ctas, h.occupancy, h.num_worker_warps) if h else {}
    return tileir.write_module(ir.name, param_types, body, version, hints)


class _Lowerer:
    def __init__(self, bc: Any, b: Any, tt: Any, arch: str) -> None:
        self.bc, self.b, self.tt, self.arch = bc, b, tt, arch
        self.values: dict[Value, Any] = {}
        self.arrays: dict[Value, tuple[Any, Any, list[Any]]] = {}  # param -> (tv type, tv, dims)
        # (array, tile shape, padding, dim_map) -> its partition view
        self.views: dict[tuple[Value, tuple[int, ...], str, tuple[int, ...]], Any] = {}
        self.raw: dict[Value, tuple[Any, list[Any], list[Any]]] = {}  # param -> ptr, dims, strides
        self.token: Any = None  # the chain of writes (stores, atomics, prints)
        self.entry_token: Any = None

    # ------------------------------------------------------------------------ types

    def elem(self, dt: DType) -> Any:
        return self.tt.simple(getattr(self.bc.SimpleType, _SIMPLE[dt.name]))

    def stored(self, dt: DType) -> Any:
        """The element type of an array of `dt` in memory (`stored_dtype`)."""
        return self.elem(stored_dtype(dt))

    @staticmethod
    def stored_tile(t: TileType) -> TileType:
        """The tile type a load of `t` reads from memory (`stored_dtype`)."""
        return TileType(stored_dtype(t.dtype), t.shape)

    def nonzero(self, x: Any, t: TileType) -> Any:
        """x != 0 as an i1 tile, for `x` of tile type `t` (a cast to bool; a float compares
        unordered, so nan is true)."""
        bc, b = self.bc, self.b
        rt = self.tid(TileType(dtypes.bool_, t.shape))
        zero = bc.encode_ConstantOp(b, self.tid(t), self._bytes(0, t.dtype))
        if t.dtype.is_float:
            return bc.encode_CmpFOp(
                b, rt, x, zero, bc.ComparisonPredicate.NOT_EQUAL, bc.ComparisonOrdering.UNORDERED
            )
        sign = bc.Signedness.Signed if t.dtype.is_signed else bc.Signedness.Unsigned
        return bc.encode_CmpIOp(b, rt, x, zero, bc.ComparisonPredicate.NOT_EQUAL, sign)

    def to_bool(self, x: Any, shape: tuple[int, ...]) -> Any:
        """A loaded i8 tile of a bool array as i1: x != 0."""
        return self.nonzero(x, TileType(dtypes.i8, shape))

    def to_byte(self, x: Any, shape: tuple[int, ...]) -> Any:
        """An i1 tile as the 0 / 1 bytes a bool array holds."""
        return self.bc.encode_ExtIOp(
            self.b, self.tid(TileType(dtypes.i8, shape)), x, self.bc.Signedness.Unsigned
        )

    def tid(self, t: TileType) -> Any:
        return self.tt.tile(self.elem(t.dtype), list(t.shape))

    @staticmethod
    def part_tile(part: Value) -> tuple[int, ...]:
        """The tile shape of a Part (the array a `tile.store` writes)."""
        tile = array_type(part).tile
        assert tile is not None, f"{part} is not a Part"
        return tile

    # --------------------------------------------------------------------- function

    def function(self, ir: TileIR, flat: list[Any]) -> None:
        bc, tt = self.bc, self.tt
        it = iter(flat)
        for p in ir.fn.params:
            t = p.type
            if isinstance(t, ArrayParamType):
                align = iter(self._align_of(ir, p, t.ndim))
                ptr_t = tt.tile(tt.pointer(self.stored(t.dtype), bc.PtrAttr.Missing), [])
                i32 = tt.tile(tt.I32, [])
                ptr = self._assume(next(it), ptr_t, next(align), nonnegative=False)
                dims = [self._assume(next(it), i32, next(align)) for _ in range(t.ndim)]
                strides = [self._assume(next(it), i32, next(align)) for _ in range(t.ndim - 1)]
                dyn = bc.DYNAMIC_SHAPE
                tv_t = tt.tensor_view(
                    self.stored(t.dtype),
                    [dyn] * t.ndim,
                    [dyn] * (t.ndim - 1) + [1],
                    bc.PtrAttr.Missing,
                )
                tv = bc.encode_MakeTensorViewOp(self.b, tv_t, ptr, dims, strides)
                self.arrays[p] = (tv_t, tv, dims)
                self.raw[p] = (ptr, dims, strides)
            else:
                self.values[p] = next(it)
        self.token = self.entry_token = bc.encode_MakeTokenOp(self.b, tt.Token)
        self._make_views(ir.fn.entry)
        self.block(ir.fn.entry)

    @staticmethod
    def _align_of(ir: TileIR, param: Value, ndim: int) -> tuple[int, ...]:
        """The launch's divisibility facts for an array parameter (1s when none are known)."""
        align = ir.param_of(param).align
        return align if len(align) == 2 * ndim else (1,) * (2 * ndim)

    def _assume(self, value: Any, type_id: Any, divisor: int, nonnegative: bool = True) -> Any:
        """`value` with the facts the launch guarantees: >= 0 (extents, strides), divisibility."""
        bc = self.bc
        if nonnegative:
            value = bc.encode_AssumeOp(self.b, type_id, value, bc.Bounded(0, None))
        if divisor > 1:
            value = bc.encode_AssumeOp(self.b, type_id, value, bc.DivBy(divisor))
        return value

    def _make_views(self, block: Block) -> None:
        for op in block.ops:
            if isinstance(op, ops.Load):
                attrs = op.attrs
                self._view(op.operands[0], attrs["shape"], attrs["padding"], attrs.get("order"))
            elif isinstance(op, ops.Store | ops.StoreAt):
                part = op.operands[0]
                self._view(part, op.attrs.get("chunk") or self.part_tile(part), 0.0)
            elif isinstance(op, ops.AtomicStore):
                self._view(op.operands[0], tile_type(op.operands[1]).shape, 0.0)
            for region in ops.regions(op):
                self._make_views(region)

    def _view(
        self,
        array: Value,
        shape: tuple[int, ...],
        padding: float,
        order: tuple[int, ...] | None = None,
    ) -> Any:
        """The partition view of `array` in tiles of `shape`; `order` is its dim_map (tile axis
        d is array axis order[d], ops.Load), the identity unless set."""
        bc = self.bc
        if math.isnan(padding):
            pad, pkey = bc.PaddingValue.Nan, "nan"
        elif math.isinf(padding):
            pad, pkey = (
                (bc.PaddingValue.PosInf, "inf") if padding > 0 else (bc.PaddingValue.NegInf, "-inf")
            )
        elif math.copysign(1.0, padding) < 0:
            pad, pkey = bc.PaddingValue.NegZero, "-0"
        else:
            pad, pkey = bc.PaddingValue.Zero, "0"
        dim_map = list(order) if order is not None else list(range(len(shape)))
        key = (array, shape, pkey, tuple(dim_map))
        view = self.views.get(key)
        if view is None:
            tv_t, tv, _ = self.arrays[array]
            pv_t = self.tt.partition_view(list(shape), tv_t, dim_map, pad)
            view = bc.encode_MakePartitionViewOp(self.b, pv_t, tv)
            self.views[key] = view
        return view

    def block(self, block: Block) -> list[Any]:
        for op in block.ops:
            if isinstance(op, ops.Yield):
                return [self.values[v] for v in op.operands]
            if isinstance(op, ops.Return):
                self.bc.encode_ReturnOp(self.b, [])
                return []
            out = lowers.lookup(op)(self, op, [self.values.get(v) for v in op.operands])
            if isinstance(op, ops.MULTI_RESULT):
                for r, x in zip(op.results, out, strict=True):
                    self.values[r] = x
            elif op.results:
                self.values[op.result] = out
        return []

    # -------------------------------------------------------------------------- ops

    @lowers(ops.Constant)
    def op_Constant(self, op: ops.Constant, args: list[Any]) -> Any:
        t = tile_type(op.result)
        return self.bc.encode_ConstantOp(
            self.b, self.tid(t), self._bytes(op.attrs["value"], t.dtype)
        )

    def _bytes(self, value: Any, dt: DType) -> bytes:
        bc = self.bc
        if dt.is_bool:
            return b"\xff" if value else b"\x00"
        if dt.is_int:
            v = int(value) & ((1 << dt.bits) - 1)
            return v.to_bytes(dt.itemsize, "little")
        st = getattr(bc.SimpleType, _SIMPLE[dt.name])
        bits = bc.float_to_bits(float(value), st)
        return int(bits).to_bytes((bc.float_bit_size(st) + 7) // 8, "little")

    def _block_ids(self) -> tuple[Any, Any, Any]:
        i32 = self.tt.tile(self.tt.I32, [])
        return self.bc.encode_GetTileBlockIdOp(self.b, i32, i32, i32)  # type: ignore[no-any-return]

    @lowers(ops.BlockId)
    def op_BlockId(self, op: ops.BlockId, args: list[Any]) -> Any:
        return self._block_ids()[op.attrs["axis"]]

    @lowers(ops.NumBlocks)
    def op_NumBlocks(self, op: ops.NumBlocks, args: list[Any]) -> Any:
        i32 = self.tt.tile(self.tt.I32, [])
        return self.bc.encode_GetNumTileBlocksOp(self.b, i32, i32, i32)[op.attrs["axis"]]

    @lowers(ops.ArrayDim)
    def op_ArrayDim(self, op: ops.ArrayDim, args: list[Any]) -> Any:
        return self.arrays[op.operands[0]][2][op.attrs["axis"]]

    @lowers(ops.Load)
    def op_Load(self, op: ops.Load, args: list[Any]) -> Any:
        bc = self.bc
        attrs = op.attrs
        view = self._view(op.operands[0], attrs["shape"], attrs["padding"], attrs.get("order"))
        index = args[1:]
        t = tile_type(op.result)
        tile, _ = bc.encode_LoadViewTkoOp(
            self.b, self.tid(self.stored_tile(t)), self.tt.Token, view,
            index, self.read_token(op.operands[0]),
            bc.MemoryOrderingSemantics.WEAK, None, self._hints(op), [False] * len(index),
        )  # fmt: skip
        return self.to_bool(tile, t.shape) if t.dtype.is_bool else tile

    @lowers(ops.Store)
    def op_Store(self, op: ops.Store, args: list[Any]) -> Any:
        part = op.operands[0]
        return self._store(op, args[1], list(self._block_ids()[: array_type(part).ndim]))

    @lowers(ops.StoreAt)
    def op_StoreAt(self, op: ops.StoreAt, args: list[Any]) -> Any:
        return self._store(op, args[1], list(args[2:]), op.attrs.get("chunk"))

    def read_token(self, array: Value) -> Any:
        """The token a read of `array` orders after: the kernel's first for a Tensor, which
        nothing in the kernel writes and the launch's borrow check keeps apart from every
        output (so its loads need not wait for stores, and a persistent loop's next loads can
        start before this iteration's stores); the stores' chain for a Part or Atomic."""
        at = array_type(array)
        return self.token if at.is_part or at.atomic else self.entry_token

    def _hints(self, op: ops.Load | ops.Store | ops.StoreAt) -> Any:
        """The load or store's tileiras hints (None when it sets none)."""
        if "latency" not in op.attrs and "allow_tma" not in op.attrs:
            return None
        return tileir.load_store_hints(
            self.arch, op.attrs.get("latency"), op.attrs.get("allow_tma", True)
        )

    @lowers(ops.Print)
    def op_Print(self, op: ops.Print, args: list[Any]) -> Any:
        """`print_tko`, ordered after the stores before it (13.2 bytecode and later)."""
        bc = self.bc
        if self.b.version >= bc.BytecodeVersion.V_13_2:
            self.token = bc.encode_PrintTkoOp(
                self.b, self.tt.Token, list(args), self.token, op.attrs["format"]
            )
        else:
            bc.encode_PrintTkoOp(self.b, None, list(args), None, op.attrs["format"])

    def _store(
        self,
        op: ops.Store | ops.StoreAt,
        value: Any,
        index: list[Any],
        chunk: tuple[int, ...] | None = None,
    ) -> None:
        bc, part = self.bc, op.operands[0]
        if array_type(part).dtype.is_bool:
            value = self.to_byte(value, tile_type(op.operands[1]).shape)
        view = self._view(part, chunk or self.part_tile(part), 0.0)
        self.token = bc.encode_StoreViewTkoOp(
            self.b, self.tt.Token, value, view, index, self.token,
            bc.MemoryOrderingSemantics.WEAK, None, self._hints(op), [False] * len(index),
        )  # fmt: skip

    def _unsupported(self, op: Any, what: str) -> CompileError:
        return CompileError(
            f"{what} is not supported by the Tile IR backend yet",
            op.loc,
            help="the simulator runs it; please report which operation you need",
        )

    @lowers(ops.Binary)
    def op_Binary(self, op: ops.Binary, args: list[Any]) -> Any:
        bc, b = self.bc, self.b
        kind = op.attrs["kind"]
        t = tile_type(op.result)
        dt, rt = t.dtype, self.tid(t)
        x, y = args
        ne = bc.RoundingMode.NEAREST_EVEN
        if dt.is_float:
            simple = {
                "add": bc.encode_AddFOp,
                "sub": bc.encode_SubFOp,
                "mul": bc.encode_MulFOp,
                "div": bc.encode_DivFOp,
            }
            if kind == "div" and ("rounding" in op.attrs or "flush_to_zero" in op.attrs):
                mode = {"approx": bc.RoundingMode.APPROX, "full": bc.RoundingMode.FULL}
                rounding = mode.get(op.attrs.get("rounding", ""), ne)
                return bc.encode_DivFOp(b, rt, x, y, rounding, bool(op.attrs.get("flush_to_zero")))
            if kind in simple:
                return simple[kind](b, rt, x, y, ne, False)
            if kind in ("max", "min"):
                f = bc.encode_MaxFOp if kind == "max" else bc.encode_MinFOp
                return f(b, rt, x, y, True, False)
            if kind == "pow":
                return bc.encode_FPowFOp(b, rt, x, y)
            if kind == "atan2":
                return bc.encode_Atan2Op(b, rt, x, y)
            if kind in ("floordiv", "mod"):
                return float_divmod(self, kind, t, x, y)
            raise self._unsupported(op, f"`{kind}` on float tiles")
        if dt.is_bool or kind in ("and", "or", "xor"):
            f = {"and": bc.encode_AndIOp, "or": bc.encode_OrIOp, "xor": bc.encode_XOrIOp}.get(kind)
            if f is None:
                raise self._unsupported(op, f"`{kind}` on bool tiles")
            return f(b, rt, x, y)
        sign = bc.Signedness.Signed if dt.is_signed else bc.Signedness.Unsigned
        none = bc.IntegerOverflow.NONE
        if kind in ("add", "sub", "mul"):
            f = {"add": bc.encode_AddIOp, "sub": bc.encode_SubIOp, "mul": bc.encode_MulIOp}[kind]
            return f(b, rt, x, y, none)
        if kind in ("max", "min"):
            f = bc.encode_MaxIOp if kind == "max" else bc.encode_MinIOp
            return f(b, rt, x, y, sign)
        if kind in ("shl", "shr"):
            return self._shift(kind, dt, tile_type(op.result), x, y)
        if kind in ("floordiv", "mod"):
            return self._int_divmod(kind, dt, tile_type(op.result), x, y, op.operands[1])
        raise self._unsupported(op, f"`{kind}` on integer tiles")

    def _int_divmod(self, kind: str, dt: DType, t: TileType, x: Any, y: Any, divisor: Any) -> Any:
        """`x // y`, `x % y` of integers with the simulator's meaning (sim/numerics.py,
        NumPy's): the quotient rounds toward -inf, the remainder takes the divisor's sign, and
        `x // 0 == x % 0 == 0`, where Tile IR leaves a division by zero undefined (the
        remainder `x - (x // 0) * 0` would be x): a divisor that may be 0 is replaced by 1 and
        the result by 0 where it was. A nonzero constant divisor needs no guard."""
        bc, b, rt = self.bc, self.b, self.tid(t)
        sign = bc.Signedness.Signed if dt.is_signed else bc.Signedness.Unsigned
        none = bc.IntegerOverflow.NONE
        guard = ops.splat_value(divisor) in (None, 0)
        if guard:
            zero = bc.encode_ConstantOp(b, rt, self._bytes(0, dt))
            bool_t = self.tid(TileType(dtypes.bool_, t.shape))
            by_zero = bc.encode_CmpIOp(b, bool_t, y, zero, bc.ComparisonPredicate.EQUAL, sign)
            y = bc.encode_SelectOp(
                b, rt, by_zero, bc.encode_ConstantOp(b, rt, self._bytes(1, dt)), y
            )
        rounding = bc.RoundingMode.NEGATIVE_INF if dt.is_signed else bc.RoundingMode.ZERO
        r = bc.encode_DivIOp(b, rt, x, y, sign, rounding)
        if kind == "mod":
            r = bc.encode_SubIOp(b, rt, x, bc.encode_MulIOp(b, rt, r, y, none), none)
        return bc.encode_SelectOp(b, rt, by_zero, zero, r) if guard else r

    def _shift(self, kind: str, dt: DType, t: TileType, x: Any, y: Any) -> Any:
        """`x << y`, `x >> y` with the simulator's meaning (sim/numerics.py): the amount read
        as unsigned; amounts of the width or more give 0 (`shl`, unsigned `shr`) or the sign
        (signed `shr`, by shifting width - 1), where Tile IR leaves them undefined."""
        bc, b, rt = self.bc, self.b, self.tid(t)
        unsigned = bc.Signedness.Unsigned
        top = bc.encode_ConstantOp(b, rt, self._bytes(dt.bits - 1, dt))
        amount = bc.encode_MinIOp(b, rt, y, top, unsigned)
        if kind == "shl":
            r = bc.encode_ShLIOp(b, rt, x, amount, bc.IntegerOverflow.NONE)
        else:
            sign = bc.Signedness.Signed if dt.is_signed else unsigned
            r = bc.encode_ShRIOp(b, rt, x, amount, sign)
            if dt.is_signed:
                return r
        width = bc.encode_ConstantOp(b, rt, self._bytes(dt.bits, dt))
        bool_t = self.tid(TileType(dtypes.bool_, t.shape))
        big = bc.encode_CmpIOp(
            b, bool_t, y, width, bc.ComparisonPredicate.GREATER_THAN_OR_EQUAL, unsigned
        )
        zero = bc.encode_ConstantOp(b, rt, self._bytes(0, dt))
        return bc.encode_SelectOp(b, rt, big, zero, r)

    @lowers(ops.Compare)
    def op_Compare(self, op: ops.Compare, args: list[Any]) -> Any:
        bc = self.bc
        dt = tile_type(op.operands[0]).dtype
        pred = {
            "eq": "EQUAL", "ne": "NOT_EQUAL", "lt": "LESS_THAN", "le": "LESS_THAN_OR_EQUAL",
            "gt": "GREATER_THAN", "ge": "GREATER_THAN_OR_EQUAL",
        }[op.attrs["pred"]]  # fmt: skip
        p = getattr(bc.ComparisonPredicate, pred)
        rt = self.tid(tile_type(op.result))
        if dt.is_float:
            unordered = pred == "NOT_EQUAL"  # NaN != x holds
            order = bc.ComparisonOrdering.UNORDERED if unordered else bc.ComparisonOrdering.ORDERED
            return bc.encode_CmpFOp(self.b, rt, args[0], args[1], p, order)
        sign = bc.Signedness.Signed if dt.is_signed else bc.Signedness.Unsigned
        return bc.encode_CmpIOp(self.b, rt, args[0], args[1], p, sign)

    @lowers(ops.Unary)
    def op_Unary(self, op: ops.Unary, args: list[Any]) -> Any:
        bc, b = self.bc, self.b
        kind = op.attrs["kind"]
        t = tile_type(op.result)
        rt, x, dt = self.tid(t), args[0], t.dtype
        if kind == "neg":
            return (
                bc.encode_NegFOp(b, rt, x)
                if dt.is_float
                else bc.encode_NegIOp(b, rt, x, bc.IntegerOverflow.NONE)
            )
        if kind == "not":
            return self._not(rt, x)
        if kind == "abs":
            if dt.is_float:
                return bc.encode_AbsFOp(b, rt, x)
            # Tile IR's absi reads its operand as signed: an unsigned value is its own abs
            return bc.encode_AbsIOp(b, rt, x) if dt.is_signed else x
        full, ne = bc.RoundingMode.FULL, bc.RoundingMode.NEAREST_EVEN
        table = {
            "exp": lambda: bc.encode_ExpOp(
                b, rt, x, bc.RoundingMode.APPROX if op.attrs.get("approx") else full
            ),
            "exp2": lambda: bc.encode_Exp2Op(b, rt, x, bool(op.attrs.get("flush_to_zero"))),
            "log": lambda: bc.encode_LogOp(b, rt, x),
            "log2": lambda: bc.encode_Log2Op(b, rt, x),
            "sqrt": lambda: bc.encode_SqrtOp(b, rt, x, ne, False),
            "rsqrt": lambda: bc.encode_RsqrtOp(b, rt, x, False),
            "tanh": lambda: bc.encode_TanHOp(
                b, rt, x, bc.RoundingMode.APPROX if op.attrs.get("approx") else full
            ),
            "sin": lambda: bc.encode_SinOp(b, rt, x),
            "cos": lambda: bc.encode_CosOp(b, rt, x),
            "tan": lambda: bc.encode_TanOp(b, rt, x),
            "sinh": lambda: bc.encode_SinHOp(b, rt, x),
            "cosh": lambda: bc.encode_CosHOp(b, rt, x),
            "floor": lambda: bc.encode_FloorOp(b, rt, x),
            "ceil": lambda: bc.encode_CeilOp(b, rt, x),
        }
        if kind not in table:
            raise self._unsupported(op, f"`{kind}`")
        return table[kind]()

    def _float_to_int(self, op: ops.Cast, x: Any, rt: Any, dst: DType) -> Any:
        """Toward zero, saturating (PTX's cvt.rzi.sat, the simulator's `_float_to_int`): out of
        range goes to the type's bound, NaN to 0. Without the saturating flag tileiras
        converted through i32 and wrapped (1.2 * 255 became 50 in a u8)."""
        bc, b = self.bc, self.b
        dsign = bc.Signedness.Signed if dst.is_signed else bc.Signedness.Unsigned
        if b.version < bc.BytecodeVersion.V_13_4:
            raise self._unsupported(op, f"a saturating conversion to {dst.name}")
        y = bc.encode_FToIOp(b, rt, x, dsign, bc.RoundingMode.NEAREST_INT_TO_ZERO, True)
        t = tile_type(op.operands[0])
        nan = bc.encode_CmpFOp(
            b,
            self.tid(TileType(dtypes.bool_, t.shape)),
            x,
            x,
            bc.ComparisonPredicate.NOT_EQUAL,
            bc.ComparisonOrdering.UNORDERED,
        )
        return bc.encode_SelectOp(b, rt, nan, bc.encode_ConstantOp(b, rt, self._bytes(0, dst)), y)

    @lowers(ops.Cast)
    def op_Cast(self, op: ops.Cast, args: list[Any]) -> Any:
        bc, b = self.bc, self.b
        src = tile_type(op.operands[0]).dtype
        dst: DType = op.attrs["dtype"]
        rt = self.tid(tile_type(op.result))
        x = args[0]
        sign = bc.Signedness.Signed if src.is_signed else bc.Signedness.Unsigned
        if dst.is_bool:  # x != 0, not a truncation
            return self.nonzero(x, tile_type(op.operands[0]))
        if src.is_float and dst.is_float:
            return bc.encode_FToFOp(b, rt, x, bc.RoundingMode.NEAREST_EVEN)
        if src.is_float:
            return self._float_to_int(op, x, rt, dst)
        if dst.is_float and dst.bits == 16 and src.bits > 16:
            # through f32, as the simulator and the SIMT backend convert (sim/numerics.py):
            # an int of more than 24 bits rounds to f32 first, then to the 16-bit float
            wide = self.tid(TileType(dtypes.f32, tile_type(op.result).shape))
            x = bc.encode_IToFOp(b, wide, x, sign, bc.RoundingMode.NEAREST_EVEN)
            return bc.encode_FToFOp(b, rt, x, bc.RoundingMode.NEAREST_EVEN)
        if dst.is_float:
            return bc.encode_IToFOp(b, rt, x, sign, bc.RoundingMode.NEAREST_EVEN)
        if src.bits < dst.bits or src.is_bool:
            return bc.encode_ExtIOp(b, rt, x, sign)
        if src.bits > dst.bits:
            return bc.encode_TruncIOp(b, rt, x, bc.IntegerOverflow.NONE)
        return x  # same width, other signedness: the bits are the value

    @lowers(ops.Select)
    def op_Select(self, op: ops.Select, args: list[Any]) -> Any:
        return self.bc.encode_SelectOp(self.b, self.tid(tile_type(op.result)), *args)

    @lowers(ops.Reshape)
    def op_Reshape(self, op: ops.Reshape, args: list[Any]) -> Any:
        return self.bc.encode_ReshapeOp(self.b, self.tid(tile_type(op.result)), args[0])

    @lowers(ops.Broadcast)
    def op_Broadcast(self, op: ops.Broadcast, args: list[Any]) -> Any:
        return self.bc.encode_BroadcastOp(self.b, self.tid(tile_type(op.result)), args[0])

    @lowers(ops.Permute)
    def op_Permute(self, op: ops.Permute, args: list[Any]) -> Any:
        return self.bc.encode_PermuteOp(
            self.b, self.tid(tile_type(op.result)), args[0], list(op.attrs["perm"])
        )

    @lowers(ops.Reduce)
    def op_Reduce(self, op: ops.Reduce, args: list[Any]) -> Any:
        return reduce_tile(self, op, args[0])

    @lowers(ops.Scan)
    def op_Scan(self, op: ops.Scan, args: list[Any]) -> Any:
        return scan_tile(self, op, args[0])

    @lowers(ops.Iota)
    def op_Iota(self, op: ops.Iota, args: list[Any]) -> Any:
        return self.bc.encode_IotaOp(self.b, self.tid(tile_type(op.result)))

    @staticmethod
    def _stores(blocks: list[Block]) -> bool:
        """Whether a store (any op that makes a token: a write) happens in `blocks` or in a
        region nested in them."""
        return any(
            op.effect is Effect.WRITE or _Lowerer._stores(ops.regions(op))
            for block in blocks
            for op in block.ops
        )

    @lowers(ops.For)
    def op_For(self, op: ops.For, args: list[Any]) -> list[Any]:
        bc, tt = self.bc, self.tt
        body = op.body
        types = [self.tid(tile_type(a)) for a in body.args[1:]]
        init = list(args[3:])
        # A body that stores carries the token: each iteration's memory ops order after the
        # previous iteration's stores, and the ops after the loop after the last ones.
        carry = self._stores([body])
        if carry:
            types.append(tt.Token)
            init.append(self.token)
        nested = bc.encode_ForOp(self.b, types, args[0], args[1], args[2], init, False)
        outer_token = self.token
        with nested.new_block([self.tid(tile_type(body.args[0])), *types]) as block_args:
            for a, v in zip(body.args, block_args, strict=False):
                self.values[a] = v
            if carry:
                self.token = block_args[-1]
            nxt = self.block(body)
            bc.encode_ContinueOp(self.b, [*nxt, self.token] if carry else nxt)
        results = list(nested.done())
        self.token = results.pop() if carry else outer_token
        return results

    @lowers(ops.While)
    def op_While(self, op: ops.While, args: list[Any]) -> list[Any]:
        """`loop (carried) { if !cond(carried) { break(carried) }; continue(body(carried)) }`,
        the token carried as a For carries it when the body stores."""
        bc, tt = self.bc, self.tt
        types = [self.tid(tile_type(r)) for r in op.results]
        init = list(args)
        carry = self._stores([op.cond, op.body])
        if carry:
            types.append(tt.Token)
            init.append(self.token)
        nested = bc.encode_LoopOp(self.b, types, init)
        outer_token = self.token
        with nested.new_block(types) as block_args:
            if carry:
                self.token = block_args[-1]
            for a, v in zip(op.cond.args, block_args, strict=False):
                self.values[a] = v
            (cond,) = self.block(op.cond)
            exit_ = bc.encode_IfOp(
                self.b, [], self._not(self.tid(TileType(dtypes.bool_, ())), cond)
            )
            with exit_.new_block([]):
                bc.encode_BreakOp(self.b, list(block_args))
            with exit_.new_block([]):
                bc.encode_YieldOp(self.b, [])
            exit_.done()
            for a, v in zip(op.body.args, block_args, strict=False):
                self.values[a] = v
            nxt = self.block(op.body)
            bc.encode_ContinueOp(self.b, [*nxt, self.token] if carry else nxt)
        results = list(nested.done())
        self.token = results.pop() if carry else outer_token
        return results

    def _not(self, rt: Any, x: Any) -> Any:
        """`not x` of a bool tile of type `rt`: x ^ true."""
        return self.bc.encode_XOrIOp(self.b, rt, x, self.bc.encode_ConstantOp(self.b, rt, b"\xff"))

    @lowers(ops.If)
    def op_If(self, op: ops.If, args: list[Any]) -> list[Any]:
        bc, tt = self.bc, self.tt
        types = [self.tid(tile_type(r)) for r in op.results]
        # Branches that store yield their last token (a token made in a region cannot be used
        # after it); the ops after the if order after whichever branch ran.
        carry = self._stores([op.then_block, op.else_block])
        if carry:
            types.append(tt.Token)
        nested = bc.encode_IfOp(self.b, types, args[0])
        outer_token = self.token
        for block in (op.then_block, op.else_block):
            with nested.new_block([]):
                self.token = outer_token
                out = self.block(block)
                bc.encode_YieldOp(self.b, [*out, self.token] if carry else out)
        results = list(nested.done())
        self.token = results.pop() if carry else outer_token
        return results
