"""The Tile simulator: tile IR interpreted with NumPy, one block at a time.

It runs the IR after the Tile passes (the same IR the bytecode comes from), so it is the spec
of each tile op and the oracle GPU tests compare with. Scalar arithmetic rules (bf16 rounding,
integer wrapping, NaN-propagating min/max) are the SIMT simulator's, from `numerics.py`.

    tile.load      the tile at (index * shape); elements past the array read as the padding
    tile.store     the block's own tile; elements past the array are dropped
    tile.atomic_store_add (max, min, and, or, xor)  updates tile `index` (blocks run one
                   after another, so each element's updates land in block order: one of the
                   GPU's orders)
    tile.reduce    sum in f32 for 16-bit floats (then rounded), else in the dtype
    tile.scan      likewise, each prefix rounded once
    tile.mma       acc + a @ b with the products and sums in acc's dtype
    tile.if        runs the branch this block's condition picks

A tile the simulator cannot allocate (`tile.zeros` of 256 GiB) is a LaunchContractError at
the op's line that names the tile's size, not NumPy's MemoryError (or its ValueError for a
tile larger than an address can count).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ...dtypes import DType
from ...errors import LaunchContractError
from ...frontend.printing import c_format
from ...ir.core import Block, Value
from ...ir.registry import Registry
from ...ir.tile import ops
from ...ir.tile.kernel import TileIR
from ...ir.tile.types import ArrayParamType, TileType, tile_type
from ...runtime.arrays import ArrayInfo, nbytes_text
from ...runtime.graphs import sim_recording
from ...runtime.streams import captured, check_stream, refuse_in_sim_capture
from .. import numerics as nx
from . import indexed

# A tile's value while the simulator runs: an array, or a NumPy scalar where a reduction
# leaves no axes.
_Tile = np.ndarray | np.generic

_MATH = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos", "floor", "ceil"}
_MATH |= {"tan", "sinh", "cosh"}


class _Array:
    """A global-memory array as the simulator sees it: host storage and the element dtype."""

    def __init__(self, host: np.ndarray, dtype: DType) -> None:
        self.host = host
        self.dtype = dtype


def runner(ir: TileIR, grid: tuple[int, int, int], device: int) -> Callable[[list[Any], Any], None]:
    """The simulator's run of one prepared launch (runtime/dispatch.py's `Prepared.run`): it
    refuses a stream of another device as the GPU would (host arrays alone follow the stream),
    and inside `fl.graph` it records a run the capture takes for each replay instead of running
    now (one on another stream runs now, as on the GPU)."""

    def run(payload: list[Any], stream: Any) -> None:
        if stream is not None:
            check_stream(stream, device if _on_a_device(ir, payload) else None)
        recording = sim_recording()
        if recording is not None and captured(stream):  # inside `fl.graph`: at each replay
            _refuse_host_arrays(ir, payload)  # the GPU would copy them: refused in a capture
            recording.append(lambda: run_kernel(ir, grid, payload))
            return
        run_kernel(ir, grid, payload)

    return run


def _on_a_device(ir: TileIR, payload: list[Any]) -> bool:
    """Whether an array of the launch is on a device (an fl.Tensor's), not host memory alone."""
    for p, v in zip(ir.signature, payload, strict=True):
        info = v[1] if p.kind == "part" else v if p.kind in ("tensor", "atomic") else None
        if isinstance(info, ArrayInfo) and info.device is not None:
            return True
    return False


def _refuse_host_arrays(ir: TileIR, payload: list[Any]) -> None:
    """Inside `fl.graph`: a NumPy array argument, which a GPU launch copies to the GPU (an
    allocation the driver refuses in a capture), is refused as there."""
    for p, v in zip(ir.signature, payload, strict=True):
        host = p.kind in ("tensor", "atomic") and isinstance(getattr(v, "owner", None), np.ndarray)
        if host:
            refuse_in_sim_capture(f"copying NumPy array `{p.name}` to the GPU")


def run_kernel(ir: TileIR, grid: tuple[int, int, int], values: list[Any]) -> None:
    """Run every block of the grid, in order (blocks write disjoint tiles: order is invisible)."""
    env: dict[Value, Any] = {}
    params = iter(ir.fn.params)
    for p, v in zip(ir.signature, values, strict=True):
        if p.kind == "const":
            continue
        param = next(params)
        if p.kind == "part":
            info: ArrayInfo = v[1]
            assert info.host is not None
            env[param] = _Array(info.host, info.dtype)
        elif p.kind in ("tensor", "atomic"):
            assert v.host is not None
            env[param] = _Array(v.host.reshape(v.shape), v.dtype)
        else:
            assert p.dtype is not None
            env[param] = np.asarray(nx.constant(v, p.dtype), nx.storage_dtype(p.dtype))
    memo: dict[Any, Any] = {}  # what each op works out once a launch (`_Block.memo`)
    with np.errstate(all="ignore"):  # the GPU's IEEE results, never NumPy's warnings
        for bz in range(grid[2]):
            for by in range(grid[1]):
                for bx in range(grid[0]):
                    _Block(env, (bx, by, bz), grid, memo).run(ir.fn.entry)


# One handler per op class (ir/registry.py): a method of `_Block` taking (op, attrs, operand
# values) and returning the result (a list for several). `tile.yield` and `tile.return` have
# none: they end the block that `_Block.run` walks.
runs: Registry[Callable[..., Any]] = Registry("the Tile simulator")


class _Block:
    def __init__(
        self,
        env: dict[Value, Any],
        bid: tuple[int, int, int],
        grid: tuple[int, int, int],
        memo: dict[Any, Any],
    ) -> None:
        self.env = dict(env)
        self.bid = bid
        self.grid = grid
        # by op, shared by every block and loop trip of a launch: a constant's tile (read-only,
        # so that no handler can change it in place for the next), an op's function and dtypes
        self.memo = memo

    def run(self, block: Block) -> list[Any]:
        env = self.env
        for op in block.ops:
            if isinstance(op, ops.Yield):
                return [env[v] for v in op.operands]
            if isinstance(op, ops.Return):
                return []
            try:
                out = self.step(op, [env[v] for v in op.operands])
            except MemoryError:
                raise _too_large(op) from None
            except ValueError:  # NumPy: more bytes than an address holds
                if _tile_nbytes(op) <= sys.maxsize:
                    raise
                raise _too_large(op) from None
            if isinstance(op, ops.MULTI_RESULT):
                for r, x in zip(op.results, out, strict=True):
                    env[r] = x
            elif op.results:
                env[op.result] = out
        return []

    def step(self, op: Any, args: list[Any]) -> Any:
        """Run one op: its class's handler in `runs` gives it its meaning."""
        return runs.lookup(op)(self, op, op.attrs, args)

    @runs(ops.Constant)
    def _op_Constant(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        value = self.memo.get(op)
        if value is None:
            t = tile_type(op.result)
            value = np.full(t.shape, nx.constant(a["value"], t.dtype), nx.storage_dtype(t.dtype))
            value.flags.writeable = False
            self.memo[op] = value
        return value

    @runs(ops.BlockId)
    def _op_BlockId(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        return np.int32(self.bid[a["axis"]])

    @runs(ops.NumBlocks)
    def _op_NumBlocks(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        return np.int32(self.grid[a["axis"]])

    @runs(ops.ArrayDim)
    def _op_ArrayDim(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        return np.int32(args[0].host.shape[a["axis"]])

    @runs(ops.Load)
    def _op_Load(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        index, shape, order = [int(i) for i in args[1:]], a["shape"], a.get("order")
        if order is None:
            return _load(args[0], index, shape, a["padding"])
        # tile axis d is array axis order[d]: load the window in the array's axis order, then
        # permute its axes into the tile's (ops.Load)
        inv = [order.index(ax) for ax in range(len(order))]
        window = _load(args[0], [index[d] for d in inv], tuple(shape[d] for d in inv), a["padding"])
        return np.ascontiguousarray(np.transpose(window, order))

    @runs(ops.Store)
    def _op_Store(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        part: _Array = args[0]
        _store(part, list(self.bid[: part.host.ndim]), args[1])
        return None

    @runs(ops.StoreAt)
    def _op_StoreAt(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        _store(args[0], [int(i) for i in args[2:]], args[1])
        return None

    @runs(ops.Gather)
    def _op_Gather(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        arr: _Array = args[0]
        coords, mask = _split(args[1:], arr.host.ndim, a["masked"])
        return indexed.gather(arr.host, arr.dtype, coords, mask, a["padding"])

    @runs(ops.Scatter)
    def _op_Scatter(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        arr: _Array = args[0]
        coords, mask = _split(args[2:], arr.host.ndim, a["masked"])
        indexed.scatter(arr.host, arr.dtype, args[1], coords, mask)

    @runs(ops.AtomicRMW)
    def _op_AtomicRMW(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        arr: _Array = args[0]
        coords, mask = _split(args[2:], arr.host.ndim, a["masked"])
        return indexed.atomic(arr.host, arr.dtype, a["mode"], args[1], None, coords, mask)

    @runs(ops.AtomicStore)
    def _op_AtomicStore(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        arr: _Array = args[0]
        value = np.asarray(args[1])
        src, dst = _window(arr, [int(i) for i in args[2:]], value.shape)
        fn = nx.binary_fn(a["mode"], arr.dtype)
        arr.host[src] = nx.raw_store(
            fn(nx.raw_load(arr.host[src], arr.dtype), value[dst]), arr.dtype
        )

    @runs(ops.AtomicCAS)
    def _op_AtomicCAS(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        arr: _Array = args[0]
        coords, mask = _split(args[3:], arr.host.ndim, a["masked"])
        return indexed.atomic(arr.host, arr.dtype, "cas", args[2], args[1], coords, mask)

    @runs(ops.Print)
    def _op_Print(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        values = [np.asarray(x) for x in args]
        sys.stdout.write(c_format(a["format"], [v if v.ndim else v.item() for v in values]))
        return None

    @runs(ops.Binary)
    def _op_Binary(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        plan = self.memo.get(op)
        if plan is None:
            dt, kind = _dtype(op.operands[0]), a["kind"]
            fn = nx.math_fn(kind, dt) if kind == "atan2" else nx.zero_ordered(kind, dt)
            plan = self.memo[op] = (fn, nx.storage_dtype(dt), bool(a.get("flush_to_zero")))
        fn, storage, ftz = plan
        x, y = args
        if ftz:  # tile.truediv(..., flush_to_zero=True): f32 only
            x, y = _flush(np.asarray(x)), _flush(np.asarray(y))
        r = np.asarray(fn(x, y), storage)
        return _flush(r) if ftz else r

    @runs(ops.Compare)
    def _op_Compare(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        dt = _dtype(op.operands[0])
        return np.asarray(nx.compare_fn(a["pred"], dt)(args[0], args[1]))

    @runs(ops.Unary)
    def _op_Unary(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        plan = self.memo.get(op)
        if plan is None:
            dt, kind = _dtype(op.operands[0]), a["kind"]
            fn = nx.math_fn(kind, dt) if kind in _MATH else nx.unary_fn(kind, dt)
            plan = self.memo[op] = (fn, nx.storage_dtype(dt), bool(a.get("flush_to_zero")))
        fn, storage, ftz = plan
        if ftz:  # f32 only (the frontend checks): ex2.ftz
            return _flush(np.asarray(fn(_flush(args[0])), storage))
        return np.asarray(fn(args[0]), storage)

    @runs(ops.Cast)
    def _op_Cast(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        plan = self.memo.get(op)
        if plan is None:
            dt = _dtype(op.operands[0])
            plan = self.memo[op] = (nx.cast_fn(dt, a["dtype"]), nx.storage_dtype(a["dtype"]))
        fn, storage = plan
        return np.asarray(fn(args[0]), storage)

    @runs(ops.Select)
    def _op_Select(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        return np.where(args[0], args[1], args[2])

    @runs(ops.Reshape)
    def _op_Reshape(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        return np.reshape(args[0], a["shape"])

    @runs(ops.Extract)
    def _op_Extract(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        window = tuple(
            slice(i * s, (i + 1) * s) for i, s in zip(a["index"], a["shape"], strict=True)
        )
        return np.ascontiguousarray(args[0][window])

    @runs(ops.Cat)
    def _op_Cat(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        return np.concatenate([args[0], args[1]], axis=a["axis"])

    @runs(ops.Bitcast)
    def _op_Bitcast(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        # bf16 and the 8-bit floats run as f32 values: their bits first, and back to values
        src, dst = _dtype(op.operands[0]), a["dtype"]
        bits = nx.raw_store(args[0], src) if src.is_raw else args[0]
        if not dst.is_raw:
            return bits.view(dst.np)
        word = np.dtype(f"u{dst.bits // 8}") if dst.bits < 32 else nx.F32
        return nx.raw_load(bits.view(word), dst)

    @runs(ops.Broadcast)
    def _op_Broadcast(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        return np.ascontiguousarray(np.broadcast_to(args[0], a["shape"]))

    @runs(ops.Permute)
    def _op_Permute(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        return np.ascontiguousarray(np.transpose(args[0], a["perm"]))

    @runs(ops.Reduce)
    def _op_Reduce(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        dt = _dtype(op.operands[0])
        return _reduce(a["kind"], args[0], a["axis"], dt)

    @runs(ops.Scan)
    def _op_Scan(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        dt = _dtype(op.operands[0])
        x, axis = args[0], a["axis"]
        if a["reverse"]:
            x = np.flip(x, axis)
        wide = np.float32 if dt.name in ("f16", "bf16") else None
        run = np.cumsum if a["kind"] == "sum" else np.cumprod
        out = _round(run(x, axis=axis, dtype=wide), dt)
        return np.ascontiguousarray(np.flip(out, axis) if a["reverse"] else out)

    @runs(ops.Mma)
    def _op_Mma(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        acc_dt = _dtype(op.operands[2])
        if acc_dt.is_int:  # 8-bit products summed exactly, wrapped to i32 as the tensor cores
            prod = np.matmul(args[0].astype(np.int64), args[1].astype(np.int64))
            return (args[2].astype(np.int64) + prod).astype(np.int32)
        wide = np.float64 if acc_dt.name == "f64" else np.float32
        prod = np.matmul(args[0].astype(wide), args[1].astype(wide))
        out = args[2].astype(wide) + prod
        return _round(out, acc_dt)

    @runs(ops.Iota)
    def _op_Iota(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        return np.arange(a["n"], dtype=nx.storage_dtype(tile_type(op.result).dtype))

    @runs(ops.For)
    def _op_For(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        return self._loop(op, args)

    @runs(ops.If)
    def _op_If(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        # this block's branch; a store in the other never happens
        return self.run(op.then_block if bool(args[0]) else op.else_block)

    @runs(ops.While)
    def _op_While(self, op: Any, a: dict[str, Any], args: list[Any]) -> Any:
        carried = list(args)
        while True:
            for b, v in zip(op.cond.args, carried, strict=True):
                self.env[b] = v
            if not bool(self.run(op.cond)[0]):
                return carried
            for b, v in zip(op.body.args, carried, strict=True):
                self.env[b] = v
            carried = self.run(op.body)

    def _loop(self, op: ops.For, args: list[Any]) -> list[Any]:
        """Tile IR's `for`: from `lo` while below `hi`, by a positive `step` (the frontend
        counts the trips of any other range, tile/control.py); a step of 0 or less runs no
        iteration here."""
        lo, hi, step = (int(x) for x in args[:3])
        carried = list(args[3:])
        body = op.body
        iv = nx.storage_dtype(tile_type(body.args[0]).dtype).type
        for i in range(lo, hi, step) if step > 0 else ():
            self.env[body.args[0]] = iv(i)
            for b, v in zip(body.args[1:], carried, strict=True):
                self.env[b] = v
            carried = self.run(body)
        return carried


def _too_large(op: Any) -> LaunchContractError:
    """Op `op` made (or worked on) a tile larger than this machine could allocate."""
    t = op.results[0].type if op.results else None
    if isinstance(t, TileType):
        what = f"a tile of shape {t.shape} and {t.dtype} needs {nbytes_text(_tile_nbytes(op))}"
    else:
        what = f"`{op.opname}` needs"
    return LaunchContractError(
        f"{what}, more than this machine could allocate for the simulator",
        op.loc,
        label="this tile",
        help="use smaller tiles: a GPU keeps a block's tiles on chip (registers and shared "
        "memory, a few hundred KiB at most), so a tile this large cannot run there either",
    )


def _tile_nbytes(op: Any) -> int:
    """The bytes of the tile `op` makes (0 when its result is not a tile)."""
    t = op.results[0].type if op.results else None
    return math.prod(t.shape) * t.dtype.itemsize if isinstance(t, TileType) else 0


def _dtype(v: Value) -> DType:
    t = v.type
    assert isinstance(t, TileType | ArrayParamType)
    return t.dtype


def _round(x: _Tile, dt: DType) -> _Tile:
    if dt.is_raw or dt.name == "tf32":
        return np.asarray(nx.round_narrow(x.astype(np.float32), dt))
    return x.astype(nx.storage_dtype(dt))


def _reduce(kind: str, x: np.ndarray, axis: int, dt: DType) -> _Tile:
    if kind in ("sum", "prod"):
        wide = np.float32 if dt.name in ("f16", "bf16") else None
        total = np.sum if kind == "sum" else np.prod
        return _round(total(x, axis=axis, dtype=wide), dt)
    extreme = np.max if kind == "max" else np.min
    r = np.asarray(extreme(x, axis=axis))  # NaN wins, as in Tile IR's maxf/minf with propagation
    if dt.is_float and np.any(r == 0):  # and -0.0 < +0.0 (numerics.zero_ordered)
        signed = np.signbit(x) if kind == "min" else ~np.signbit(x)
        winner = np.any((x == 0) & signed, axis=axis)  # a zero of the extreme's sign is there
        zero = np.copysign(np.zeros((), x.dtype), 1.0 if kind == "max" else -1.0)
        r = np.where(r == 0, np.where(winner, zero, -zero), r)
    return r


def _window(
    arr: _Array, index: list[int], shape: tuple[int, ...]
) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    src, dst = [], []
    for i, s, extent in zip(index, shape, arr.host.shape, strict=True):
        start = i * s
        stop = min(start + s, extent)
        start_c = min(max(start, 0), extent)
        n = max(0, stop - start_c)
        src.append(slice(start_c, start_c + n))
        dst.append(slice(start_c - start, start_c - start + n))
    return tuple(src), tuple(dst)


def _split(args: list[Any], ndim: int, masked: bool) -> tuple[list[Any], Any]:
    """An indexed op's coordinate tiles and its mask (None when it has none)."""
    return args[:ndim], (args[ndim] if masked else None)


def _load(arr: _Array, index: list[int], shape: tuple[int, ...], padding: float) -> np.ndarray:
    store_dt = nx.storage_dtype(arr.dtype)
    fill = padding if arr.dtype.is_float else 0
    out = np.full(shape, fill, store_dt)
    src, dst = _window(arr, index, shape)
    raw = arr.host[src]
    out[dst] = nx.raw_load(raw, arr.dtype)
    return out


def _flush(x: np.ndarray) -> np.ndarray:
    """f32 subnormals as zero of the same sign (flush-to-zero)."""
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(x) < tiny, np.copysign(np.float32(0), x), x).astype(np.float32)


def _store(arr: _Array, index: list[int], value: np.ndarray) -> None:
    src, dst = _window(arr, index, value.shape)
    part = value[dst]
    arr.host[src] = nx.raw_store(part, arr.dtype)
