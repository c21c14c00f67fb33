"""Calls inside kernels: builtins, dtype conversions, math, thread intrinsics, device functions.

Every callable a SIMT kernel may use is declared once in `INTRINSICS` (frontend/intrinsics.py):
its name, its rule, the IR ops it introduces and its arity. Python's `math` and `fl.math`
functions are declared from the one list of IR math functions (ir/simt/ops.MATH_FNS) under each name
the modules define (`math.round` does not exist; the `round` builtin is not a math function).

Device functions (`@simt.device`) are inlined at the call site (device_calls.py).
"""

from __future__ import annotations

import ast
import math as pymath
import sys
from collections.abc import Callable
from typing import Any, cast

from .. import dtypes
from .. import math as flmath
from ..dtypes import DType
from ..errors import CompileError, KernelTypeError, Location
from ..frontend.intrinsics import Call, IntrinsicTable, host_function_error, kernel_launch_error
from ..frontend.printing import print_call
from ..frontend.values import Operand, PyObj, Weak
from ..ir.core import ArrayType, Value
from ..ir.simt import ops
from .access import DEVICE_HELP
from .atomics import atomic_cas, atomic_rmw
from .chunks import chunk_width
from .collectives import block, reduce_rule, shuffle_rule, string_literal, vote_rule, warp
from .cooperative import GRID, cg, grid_sync_rule, this_grid_rule
from .coords import block_thread_count, grid, grid_rule, gridsize, gridsize_rule, read
from .device_calls import inline
from .leader import block_id_rule
from .printing import print_rule
from .regions import unsafe
from .shared import (
    block_index_rule,
    local,
    local_array_rule,
    shared,
    shared_array_rule,
    syncthreads,
    syncthreads_rule,
)
from .ssa import SsaLowerer
from .types import DeviceFunction, atomic, thread

# The SIMT track's intrinsics: every host object a kernel may call, with its rule and the IR
# ops the rule introduces (frontend/intrinsics.py). Device functions are inlined, not
# intrinsics; anything else a kernel calls is refused as a host function.
INTRINSICS: IntrinsicTable[SsaLowerer] = IntrinsicTable("simt")


def _math_form(name: str) -> str | None:
    """What a kernel calls instead of NumPy's `name` (E0605's help), if fl.math has it."""
    if name.startswith("_") or not callable(getattr(flmath, name, None)):
        return None
    return f"`fl.math.{name}(...)` (or `math.{name}(...)`)"


# What a kernel writes instead of a Python builtin or `math` function it cannot call.
_INSTEAD: dict[Any, str] = {
    round: "`math.floor(x + 0.5)` (halves up), `math.trunc(x)`, `math.floor(x)` or "
    "`math.ceil(x)`, and `int(...)` of it for an integer",
    divmod: "`a // b` and `a % b`",
    pow: "`x ** y` or `math.pow(x, y)`",
    sum: "a loop that adds into a variable",
    pymath.isnan: "`x != x`, which is True only for NaN",
    pymath.isinf: "`abs(x) == math.inf`",
    pymath.isfinite: "`abs(x) < math.inf`, which is False for inf and NaN",
    pymath.isclose: "`abs(a - b) <= tol`",
    pymath.radians: "`x * (math.pi / 180.0)`",
    pymath.degrees: "`x * (180.0 / math.pi)`",
}
_KERNEL_BUILTINS = "`len`, `range`, `min`, `max`, `abs`, `int`, `float`, `bool` and `print`"


def _library_of(obj: Any) -> str | None:
    """ "builtins" or the standard-library module `obj` comes from (`math`, `random`), if any."""
    module = getattr(obj, "__module__", None) or getattr(
        type(getattr(obj, "__self__", None)), "__module__", None
    )
    if not isinstance(module, str):
        return None
    root = module.partition(".")[0]
    return module if root == "builtins" or root in sys.stdlib_module_names else None


def python_library_error(obj: Any, fname: str, loc: Location) -> CompileError | None:
    """E0605 for a call of a Python builtin (`round`) or standard-library function
    (`math.gamma`) a kernel has no form of, naming what to write instead; None for anything
    else (a user's function: `@simt.device`)."""
    library = _library_of(obj)
    if library is None:
        return None
    try:
        instead = _INSTEAD.get(obj)
    except TypeError:  # an unhashable object
        instead = None
    if library == "builtins":
        what = "a Python builtin"
        help = f"kernels call the builtins {_KERNEL_BUILTINS}"
    elif library == "math":
        what = "a function of Python's `math`"
        names = ", ".join(
            n
            for n in ops.MATH_FNS
            if any(INTRINSICS.lookup(getattr(m, n, None)) for m in (pymath, flmath))
        )
        help = (
            "kernels call these math functions, as `math.<name>` or `fl.math.<name>` "
            f"(whichever module has it): {names}"
        )
    else:
        what = f"a function of Python's `{library}`"
        help = "compute it on the host and pass the result to the kernel as a parameter"
    if instead is not None:
        help = f"write {instead}"
    return CompileError(
        f"`{fname}` is not supported in kernels: it is {what}",
        loc,
        code="E0605",
        label="not supported in kernels",
        help=help,
    )


def math_attribute_error(base: PyObj, attr: str, loc: Location) -> CompileError | None:
    """E0433 for `math.fmin` and the other names Python's `math` lacks and `fl.math` has:
    the help names `fl.math`'s function; None for any other missing attribute."""
    if base.obj is not pymath or attr.startswith("_") or not callable(getattr(flmath, attr, None)):
        return None
    return CompileError(
        f"`{base.name}` has no attribute `{attr}`",
        loc,
        code="E0433",
        help=f"Python's `math` has no `{attr}`; in a kernel call `fl.math.{attr}(...)`",
    )


def lower_call(lw: SsaLowerer, node: ast.Call) -> Operand:
    """A call in a kernel: an inlined device function or an intrinsic. An intrinsic that gives
    no value (`print`, `simt.sync_threads()`) gives Python's None, so that a use of it (`t +
    print(t)`) is the "not a value" error at its line."""
    result = _lower_call(lw, node)
    return PyObj(None, "None") if result is None else result


def _lower_call(lw: SsaLowerer, node: ast.Call) -> Operand | None:
    loc = lw.loc(node)
    callee = lw.expr(node.func)
    fname = ast.unparse(node.func)
    if not isinstance(callee, PyObj):
        raise CompileError(f"`{fname}` is not callable", loc, code="E0605")
    obj = callee.obj
    if isinstance(obj, DeviceFunction):
        if node.keywords:
            raise CompileError("device functions take positional arguments only", loc, code="E0061")
        return inline(lw, obj, node, loc)
    intrinsic = INTRINSICS.lookup(obj)
    if obj is print and intrinsic is not None:  # its arguments are printed pieces
        return INTRINSICS.call(lw, intrinsic, print_call(node, lw.expr, lw.loc))  # type: ignore[no-any-return]
    if intrinsic is None:
        raise (
            kernel_launch_error(obj, fname, loc, DEVICE_HELP)
            or python_library_error(obj, fname, loc)
            or host_function_error(
                fname,
                loc,
                "decorate it with `@simt.device` to call it from kernels",
                kernel_form=_math_form,
            )
        )
    if node.keywords:  # before the arguments are lowered, as every SIMT intrinsic is positional
        raise CompileError(
            f"`{fname}` does not take keyword arguments in kernels", loc, code="E0061"
        )
    # A tuple literal (the shape of `simt.shared.array`) is a Python tuple of operands.
    # A string literal (a collective's operation, "sum") is a compile-time object.
    args = [
        tuple(lw.expr(e) for e in a.elts)
        if isinstance(a, ast.Tuple)
        else string_literal(a.value)
        if isinstance(a, ast.Constant) and isinstance(a.value, str)
        else lw.expr(a)
        for a in node.args
    ]
    for a, v in zip(node.args, args, strict=True):  # `simt.atomic.add(s, ...)`: name `s`
        named = isinstance(v, Value) and bool(v.name)
        if isinstance(a, ast.Name) and isinstance(v, Value) and not named:
            alloc = v.owner
            if isinstance(alloc, ops.SharedAlloc):
                alloc.name_array(a.id)
    call = Call(fname, obj, args, {}, loc, [lw.loc(a) for a in node.args])
    return INTRINSICS.call(lw, intrinsic, call)  # type: ignore[no-any-return]


@INTRINSICS.declare(
    [thread.index_1d, thread.index_2d],
    "simt.thread.index_1d/index_2d",
    ops=(ops.ThreadIndex1D, ops.ThreadIndex2D),
    arity=0,
)
def _thread_index_rule(lw: SsaLowerer, call: Call) -> Value:
    return thread_index(lw, call.callee.__name__, call.loc)


# The intrinsics whose rules live beside their ops (atomics, printing, memory, collectives):
# the functions, the intrinsic's name, the IR ops its rule emits, its arity, the rule.
_BESIDE_THEIR_OPS: list[tuple[list[Any], str, tuple[type, ...], int | None, Any]] = [
    (
        [
            atomic.add,
            atomic.sub,
            atomic.max,
            atomic.min,
            atomic.exch,
            atomic.and_,
            atomic.or_,
            atomic.xor,
            atomic.inc,
            atomic.dec,
        ],
        "simt.atomic.add/sub/max/min/exch/and_/or_/xor/inc/dec",
        (ops.AtomicRMW,),
        3,
        atomic_rmw,
    ),
    ([atomic.cas], "simt.atomic.cas", (ops.AtomicCAS,), 4, atomic_cas),
    ([print], "print", (ops.Print, ops.IndexToInt), None, print_rule),
    ([local.array], "simt.local.array", (ops.LocalAlloc,), 2, local_array_rule),
    ([shared.array], "simt.shared.array", (ops.SharedAlloc,), 2, shared_array_rule),
    (
        [thread.block_index_1d],
        "simt.thread.block_index_1d",
        (ops.BlockIndex1D,),
        0,
        block_index_rule,
    ),
    ([thread.block_id], "simt.thread.block_id", (ops.BlockId,), 0, block_id_rule),
    ([syncthreads], "simt.syncthreads", (ops.Barrier,), 0, syncthreads_rule),
    ([cg.this_grid], "simt.cg.this_grid", (), 0, this_grid_rule),
    ([GRID.sync], "simt.cg.this_grid().sync", (ops.GridSync,), 0, grid_sync_rule),
    (
        [warp.shfl, warp.shfl_down, warp.shfl_xor],
        "simt.warp.shfl/shfl_down/shfl_xor",
        (ops.WarpShuffle, ops.Cast, ops.Constant),
        2,
        shuffle_rule,
    ),
    ([warp.all, warp.any, warp.ballot], "simt.warp.all/any/ballot", (ops.WarpVote,), 1, vote_rule),
    (
        [warp.reduce, block.reduce, block.scan],
        "simt.warp.reduce/block.reduce/block.scan",
        (ops.WarpReduce, ops.BlockReduce, ops.BlockScan),
        2,
        reduce_rule,
    ),
]
for _objs, _name, _ops, _arity, _rule in _BESIDE_THEIR_OPS:
    INTRINSICS.declare(_objs, _name, ops=_ops, arity=_arity)(_rule)


@INTRINSICS.declare(
    [grid, gridsize],
    "simt.grid/gridsize",
    ops=(ops.SpecialReg, ops.Cast, ops.Binary),
    arity=1,
)
def _grid(lw: SsaLowerer, call: Call) -> Operand:
    """numba's `cuda.grid(ndim)` / `cuda.gridsize(ndim)`: plain integers (coords.py)."""
    rule = grid_rule if call.callee is grid else gridsize_rule
    # grid(2) is a Python tuple of two values, which lower.py unpacks or indexes.
    return cast(Operand, rule(lw, call))


@INTRINSICS.declare([unsafe], "simt.unsafe")
def _unsafe(lw: SsaLowerer, call: Call) -> Operand:
    raise CompileError(
        "simt.unsafe() opens a region: use it as `with simt.unsafe():`",
        call.loc,
        code="E0620",
        help="put the writes at any index in the body of `with simt.unsafe():`",
    )


@INTRINSICS.declare([thread.grid_stride, thread.block_stride], "simt.thread.grid/block_stride")
def _stride_loop(lw: SsaLowerer, call: Call) -> Operand:
    name = call.callee.__name__
    raise CompileError(
        f"simt.thread.{name}() can only be used as the iterable of a `for` loop",
        call.loc,
        help=stride_loop_help(name),
    )


def stride_loop_help(name: str) -> str:
    """How to write the `grid_stride` / `block_stride` loop (the help of their errors)."""
    stop = "len(out)" if name == "grid_stride" else "out.shape[1]"
    return f"write `for i in simt.thread.{name}({stop}):`"


@INTRINSICS.declare(
    [thread.block_column],
    "simt.thread.block_column",
    ops=(ops.BlockIndex1D, ops.BlockStep, ops.BlockRowIndex),
    arity=(1, 2),
)
def _block_column(lw: SsaLowerer, call: Call) -> Operand:
    """The pair (block, t + k * T): step k of `simt.thread.block_stride`, any k >= 0; with a
    width W, (block, W * (t + k * T)), the first column of the thread's k-th chunk of W."""
    em = lw.em
    step = _step(lw, call)
    width = chunk_width(call) if len(call.args) == 2 else 1
    claim_index(lw, "block_column", call.loc)
    start = em.emit(ops.BlockIndex1D(call.loc)).result
    column = em.emit(ops.BlockStep(start, step, block_thread_count(em, call.loc), call.loc))
    return em.emit(ops.BlockRowIndex(column.result, call.loc, width)).result


def _step(lw: SsaLowerer, call: Call) -> Value:
    """The step number `k` of `block_column(k)`, `block_index_2d(k)` or `tile_index_2d(k, ..)`
    as an i64 value."""
    em = lw.em
    k = em.scalar(call.args[0], call.arg_loc(0), f"{call.callee.__name__}() step")
    if (isinstance(k, Value) and not k.dtype.is_int) or (
        isinstance(k, Weak) and type(k.value) is not int
    ):
        raise KernelTypeError(
            f"simt.thread.{call.callee.__name__}() needs an integer step",
            call.arg_loc(0),
            help="pass the step number, e.g. `k` of `for k in range(4)`",
        )
    return em.cast(em.as_value(k, call.loc, dtypes.i64), dtypes.i64, call.loc)  # type: ignore[no-any-return]


@INTRINSICS.declare(
    [thread.block_index_2d],
    "simt.thread.block_index_2d",
    ops=(ops.BlockIndex2D, ops.BlockTileRow),
    arity=(0, 1),
)
def _block_index_2d(lw: SsaLowerer, call: Call) -> Value:
    """(row, col) of the thread in its block; with a step k, its k-th row of the block's tile,
    (row + k * R, col), R the block's row count."""
    pair = lw.em.emit(ops.BlockIndex2D(call.loc)).result
    return pair if not call.args else _block_tile_row(lw, call, pair)


def _block_tile_row(lw: SsaLowerer, call: Call, pair: Value) -> Value:
    em, loc = lw.em, call.loc
    step = _step(lw, call)
    row = em.emit(ops.ThreadIndexAxis(pair, 0, loc)).result
    rows = em.emit(ops.Binary("mul", read(em, "ntid.y", loc), read(em, "ntid.z", loc), loc))
    return em.emit(ops.BlockTileRow(row, step, rows.result, loc)).result  # type: ignore[no-any-return]


@INTRINSICS.declare(
    [thread.tile_index_2d],
    "simt.thread.tile_index_2d",
    ops=(ops.BlockIndex2D, ops.BlockTileRow, ops.TileRow),
    arity=2,
)
def _tile_index_2d(lw: SsaLowerer, call: Call) -> Value:
    """Step k of a block's tile of `rows` rows: (by * rows + r + k * R, bx * B + tx), (r, tx)
    the thread in its block of R rows and B columns; a row past any array once r + k * R
    reaches `rows`."""
    em, loc = lw.em, call.loc
    rows = call.args[1]
    if not (isinstance(rows, Weak) and type(rows.value) is int and rows.value >= 1):
        raise CompileError(
            "simt.thread.tile_index_2d() needs the tile's row count as a constant",
            call.arg_loc(1),
            code="E0602",
            label="not a constant positive int",
            help="pass an int constant, e.g. `TILE = 32` at module level and "
            "`simt.thread.tile_index_2d(k, TILE)`",
        )
    claim_index(lw, "tile_index_2d", loc, tile_rows=rows.value)
    local = _block_tile_row(lw, call, em.emit(ops.BlockIndex2D(loc)).result)
    row = em.emit(ops.ThreadIndexAxis(local, 0, loc)).result
    count = em.const(rows.value, dtypes.i64, loc)
    pair = ops.TileRow(row, count, read(em, "ctaid.y", loc), loc)
    return em.emit(pair).result  # type: ignore[no-any-return]


@INTRINSICS.declare([len], "len", ops=(ops.ArrayLen,), arity=1)
def _len(lw: SsaLowerer, call: Call) -> Value:
    """The extent of an array's first axis (a 2-D array's len is shape[0], as NumPy's)."""
    a = call.args[0]
    if not (isinstance(a, Value) and isinstance(a.type, ArrayType)):
        raise KernelTypeError("len() takes an array", call.loc)
    return lw.em.emit(ops.ArrayLen(a, call.loc)).result


@INTRINSICS.declare([range], "range")
def _range(lw: SsaLowerer, call: Call) -> Operand:
    raise CompileError("range() can only be used as the iterable of a `for` loop", call.loc)


@INTRINSICS.declare([min, max], "min/max", ops=(ops.Binary,), arity=(2, 1 << 16))
def _min_max(lw: SsaLowerer, call: Call) -> Operand:
    kind = "min" if call.callee is min else "max"
    result = call.args[0]
    for a in call.args[1:]:
        result = lw.em.minmax(kind, result, a, call.loc)
    return result


@INTRINSICS.declare([abs], "abs", ops=(ops.Unary,), arity=1)
def _abs(lw: SsaLowerer, call: Call) -> Operand:
    return lw.em.unary("abs", call.args[0], call.loc)


_BUILTIN_TYPES = {int: dtypes.i64, float: dtypes.f64, bool: dtypes.bool_}


@INTRINSICS.declare(list(_BUILTIN_TYPES), "int/float/bool", ops=(ops.Cast, ops.Compare), arity=1)
def _builtin_conversion(lw: SsaLowerer, call: Call) -> Operand:
    """`int(x)`, `float(x)`, `bool(x)`: conversions to i64, f64 and bool."""
    return _convert(lw, call.args[0], _BUILTIN_TYPES[call.callee], call.loc)


@INTRINSICS.declare_kind(
    lambda obj: isinstance(obj, DType), "fl.<dtype>", ops=(ops.Cast, ops.Compare), arity=1
)
def _dtype_conversion(lw: SsaLowerer, call: Call) -> Operand:
    """`fl.f32(x)` and every other dtype: an explicit conversion (none to an 8-bit float)."""
    if call.callee.mma_only:
        raise CompileError(
            f"SIMT kernels have no {call.callee.name}",
            call.loc,
            help="8-bit floats are for the Tile track (`x.astype(...)` in a tile kernel)",
        )
    return _convert(lw, call.args[0], call.callee, call.loc)


def _math_rule(fn: str) -> Callable[[SsaLowerer, Call], Value]:
    def rule(lw: SsaLowerer, call: Call) -> Value:
        return _math(lw, fn, call.name, call.args, call.loc)

    rule.__doc__ = f"`math.{fn}` (and `fl.math.{fn}`) on f32 and f64."
    return rule


for _fn, _n in ops.MATH_FNS.items():
    _objs = [getattr(m, _fn) for m in (pymath, flmath) if hasattr(m, _fn)]
    if _objs:
        INTRINSICS.declare(_objs, f"math.{_fn}", ops=(ops.MathCall,), arity=_n)(_math_rule(_fn))


def thread_index(lw: SsaLowerer, which: str, loc: Location) -> Value:
    """`simt.thread.index_1d()` / `index_2d()`: the witness, and the launch's index dimensions."""
    claim_index(lw, which, loc)
    if which == "index_2d":
        return lw.em.emit(ops.ThreadIndex2D(loc)).result
    return lw.em.emit(ops.ThreadIndex1D(loc)).result


def claim_index(lw: SsaLowerer, which: str, loc: Location, tile_rows: int = 0) -> None:
    """Record that the kernel uses the thread index `which`, refusing a second kind.

    One kernel uses `index_2d()`, `tile_index_2d(k, rows)` (one `rows` throughout) or the
    others: a 1-D index in a 2-D launch is the same for every row, so it would not tell the
    threads apart (and the launch contract can ask for only one shape); the pairs (block,
    column) of `block_stride` and `block_column`, the pairs of `index_2d()` and those of
    tiles of different heights could name one element of one 2-D DisjointSlice from two
    threads.
    """
    ctx = lw.ctx
    two_d = "tile_index_2d" if ctx.tile_rows else "index_2d" if ctx.uses_index_2d else ""
    if which in ("index_2d", "tile_index_2d"):
        other = "index_1d" if ctx.uses_index_1d else "block_stride" if ctx.uses_block_rows else ""
        if not other and two_d and (two_d != which or ctx.tile_rows != tile_rows):
            other = two_d
    else:
        other = two_d
    if other == which == "tile_index_2d":
        raise CompileError(
            f"this kernel's tiles have {ctx.tile_rows} rows, not {tile_rows}",
            loc,
            code="E0602",
            label="a second tile height",
            help="pass the same row count to every `simt.thread.tile_index_2d(k, rows)` "
            "of a kernel: tiles of two heights overlap",
        )
    if other:
        help = (
            "use one kind of thread index per kernel: `index_2d()` for 2-D launches "
            "(its `t.row` and `t.col` are plain integers), `index_1d()` for 1-D ones"
        )
        if "tile_index_2d" in (which, other):
            help = (
                "a kernel walks its 2-D outputs by one kind of index: "
                "`simt.thread.tile_index_2d(k, rows)` (a tile of `rows` rows per block), "
                "`index_2d()` (a thread each) or `block_stride(n)` (a row per block)"
            )
        elif {"block_stride", "block_column"} & {which, other}:
            help = (
                "a kernel walks its 2-D outputs either by `simt.thread.index_2d()` or by "
                "`simt.thread.block_stride(n)` / `block_column(k)` (a row per block), not both"
            )
        raise CompileError(
            f"`simt.thread.{which}()` cannot be used in a kernel that also uses "
            f"`simt.thread.{other}()`",
            loc,
            code="E0602",
            label="second kind of thread index",
            help=help,
        )
    if which in ("index_2d", "tile_index_2d"):
        ctx.uses_index_2d = True
        ctx.tile_rows = tile_rows
    elif which == "index_1d":
        ctx.uses_index_1d = True
    else:
        ctx.uses_block_rows = True


def _convert(lw: SsaLowerer, x: Operand, to: DType, loc: Location) -> Operand:
    em = lw.em
    v = em.scalar(x, loc, "value to convert")
    if isinstance(v, Weak):
        return em.const(_converted_literal(v.value, to, loc), to, loc)
    if to.is_bool and not v.dtype.is_bool:
        zero = em.const(0, v.dtype, loc)
        return em.emit(ops.Compare("ne", v, zero, loc)).result
    return em.cast(v, to, loc)


def _converted_literal(value: bool | int | float, to: DType, loc: Location) -> bool | int | float:
    """`fl.i32(2.7)`, `int(1e3)`, `fl.f32(True)` of a literal, at compile time: what the
    run-time conversion gives (a float truncated toward zero, a bool as 0 or 1), or E0308
    where the literal has no value of `to` (the run-time conversion would saturate)."""
    if to.is_bool:
        return bool(value)
    if isinstance(value, bool):
        value = int(value)
    shown = value
    if to.is_int and isinstance(value, float):
        if not pymath.isfinite(value):
            lo, hi = dtypes.int_range(to)
            raise KernelTypeError(
                f"`{value!r}` does not fit in {to.name}",
                loc,
                label=f"{'NaN' if value != value else 'an infinity'} has no integer value",
                help=f"{to.name} holds the integers {lo} to {hi}: write the integer meant",
            )
        value = int(value)  # toward zero, as the run-time conversion
    if dtypes.literal_fits(value, to):
        return value
    if to.is_int:
        lo, hi = dtypes.int_range(to)
        raise KernelTypeError(
            f"`{shown!r}` does not fit in {to.name}",
            loc,
            label=f"outside {to.name}",
            help=f"{to.name} holds the integers {lo} to {hi} (a float literal is truncated "
            "toward zero first): write a literal in that range, or convert to a wider type",
        )
    raise KernelTypeError(
        f"`{shown!r}` does not fit in {to.name}",
        loc,
        label=f"outside {to.name}",
        help=f"{to.name} holds magnitudes up to {dtypes.float_max(to):.6g}: write a literal in "
        "that range, or convert to a wider type",
    )


def _math(lw: SsaLowerer, fn: str, fname: str, args: list[Operand], loc: Location) -> Value:
    em = lw.em
    scalars = [em.scalar(a, loc, "argument") for a in args]
    strong = sorted((s for s in scalars if isinstance(s, Value)), key=em.is_weak)
    dt = strong[0].dtype if strong else dtypes.f32
    if strong and em.is_weak(strong[0]):  # only `float`/`int` parameters: Python's float
        dt = dtypes.f64
    for s in strong:
        if not s.dtype.is_float:
            raise KernelTypeError(
                f"`{fname}` needs a float argument, found {s.dtype.name}",
                loc,
                help=f"convert it first: `{fname}(fl.f32(x))`",
            )
        if s.dtype != dt:
            em.unify(strong[0], s, loc, f"`{fname}`")
    if dt.bits < 32:
        raise KernelTypeError(
            f"`{fname}` on {dt.name} is not supported yet", loc, help="convert to fl.f32 first"
        )
    vals = [em.as_value(s, loc, dt) for s in scalars]
    return em.emit(ops.MathCall(fn, vals, loc)).result


def resolve_annotation(lw: SsaLowerer, node: ast.expr) -> DType:
    """A local variable annotation: must name a scalar dtype."""
    obj = lw.expr(node)
    if isinstance(obj, PyObj):
        dt = obj.obj if isinstance(obj.obj, DType) else dtypes.from_python_type(obj.obj)
        if dt is not None:
            return dt
    raise CompileError(
        f"`{ast.unparse(node)}` is not a scalar type",
        lw.loc(node),
        code="E0599",
        help="annotate with a dtype such as `fl.f32`",
    )
