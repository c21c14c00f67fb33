"""The Tile track's intrinsics: every function a tile kernel may call, declared in one table.

Each `tile.*` function is three pieces, found here by its name: the host stub in api.py (the
signature calls bind against, and the docstring that is its reference), the rule in
lower_api.py (`api_<name>`: checks the arguments, emits tile IR) and, below, the IR op classes
the rule introduces (`OPS`). Python's `abs`, `min`, `max`, `len` and the dtypes (`fl.f32(x)`)
are declared too. tests/test_intrinsics.py checks that every declared op has a bytecode lowering
(backends/tileir/lower.py) and a simulator meaning (sim/tile/interpreter.py).

To add a tile op: a stub in api.py (and `tile/__init__.py`), its rule in lower_api.py, its line
in `OPS`, and, if it needs a new op class, the class in ir/tile/ops.py with its lowering
(`@lowers(ops.<Class>)`, backends/tileir/registry.py) and its simulation
(`@runs(ops.<Class>)`, sim/tile/interpreter.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from ..dtypes import DType
from ..errors import CompileError, Location
from ..frontend.intrinsics import Call, IntrinsicTable, host_function_error
from ..frontend.values import PyObj, Weak
from ..ir.tile import ops
from .api import KERNEL_FUNCTIONS
from .indexed import HANDLERS as INDEXED
from .lower_api import HANDLERS
from .printing import print_rule
from .pymath import math_functions, math_rule
from .rules import Operand, TileRules

# The IR op classes each tile function's rule introduces (operand coercions may add Constant,
# Cast, Broadcast and Reshape ops, which every backend runs anyway), the functions grouped by
# the ops they emit.
_BY_OPS: list[tuple[tuple[str, ...], tuple[type, ...]]] = [
    # a padding Tile IR has no padding value for: a mask of iota < extent and a select
    (
        ("load", "load_like"),
        (ops.Load, ops.Iota, ops.ArrayDim, ops.Binary, ops.Compare, ops.Select),
    ),
    (("block_id",), (ops.BlockId,)),
    (("num_blocks",), (ops.NumBlocks,)),
    (("num_tiles",), (ops.ArrayDim, ops.Binary)),
    (("zeros", "full", "ones"), (ops.Constant,)),
    (("arange",), (ops.Iota, ops.Cast)),
    (("exp", "exp2", "log", "log2", "sqrt", "rsqrt"), (ops.Unary,)),
    (("tanh", "sin", "cos", "abs", "floor", "ceil"), (ops.Unary,)),
    (("sigmoid",), (ops.Unary, ops.Binary)),
    (("erf",), (ops.Binary, ops.Cast)),  # special.py: a rational approximation
    (("tan", "sinh", "cosh", "negative"), (ops.Unary,)),
    (("bitwise_not",), (ops.Unary, ops.Binary)),
    (("isnan",), (ops.Compare, ops.Constant)),
    (("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"), (ops.Compare,)),
    (("atan2",), (ops.Binary,)),
    (("matmul",), (ops.Mma,)),
    (("bid",), (ops.BlockId,)),
    (("add", "sub", "mul", "floordiv", "mod", "pow", "truediv", "cdiv"), (ops.Binary,)),
    (("maximum", "minimum"), (ops.Binary,)),
    (
        ("bitwise_lshift", "bitwise_rshift", "bitwise_and", "bitwise_or", "bitwise_xor"),
        (ops.Binary,),
    ),
    (("where",), (ops.Select,)),
    (("sum", "prod", "max", "min"), (ops.Reduce,)),
    (("cumsum", "cumprod"), (ops.Scan,)),
    (("argmax", "argmin"), (ops.Reduce, ops.Compare, ops.Binary, ops.Iota, ops.Select)),
    (("mma",), (ops.Mma,)),
    (("transpose", "permute"), (ops.Permute,)),
    (("item", "reshape", "expand_dims"), (ops.Reshape,)),
    (("cat",), (ops.Cat,)),
    (("extract",), (ops.Extract,)),
    (("bitcast",), (ops.Bitcast,)),
    (("static_assert", "static_iter"), ()),
    (("broadcast_to",), (ops.Broadcast,)),
    (("astype",), (ops.Cast,)),
    # random numbers (random.py): Philox4x32 from integer ops, then float conversions
    (("philox", "randint", "randint4x"), (ops.Binary, ops.Cast)),
    (("rand",), (ops.Binary, ops.Cast, ops.Compare, ops.Select)),
    (("randn",), (ops.Binary, ops.Cast, ops.Compare, ops.Select, ops.Unary)),
    (("gather",), (ops.Gather,)),
    (("scatter",), (ops.Scatter,)),
    (("atomic_add", "atomic_max", "atomic_min", "atomic_xchg"), (ops.AtomicRMW,)),
    (("atomic_and", "atomic_or", "atomic_xor"), (ops.AtomicRMW,)),
    (("atomic_cas",), (ops.AtomicCAS,)),
    (("atomic_store_add", "atomic_store_max", "atomic_store_min"), (ops.AtomicStore,)),
    (("atomic_store_and", "atomic_store_or", "atomic_store_xor"), (ops.AtomicStore,)),
]
OPS: dict[str, tuple[type, ...]] = {name: made for names, made in _BY_OPS for name in names}

INTRINSICS: IntrinsicTable[TileRules] = IntrinsicTable("tile")
HOST_HELP = "tile kernels call `tile.*` functions, dtypes (`fl.f32(x)`) and `range`"


def bound_rule(name: str) -> Callable[[TileRules, Call], Operand]:
    """The rule of `tile.<name>`: bind the call to the stub's signature (its defaults become
    weak literals), then run the handler with each argument's location at hand."""
    sig = inspect.signature(KERNEL_FUNCTIONS[name].__wrapped__)  # type: ignore[attr-defined]
    handler = HANDLERS[name] if name in HANDLERS else INDEXED[name]
    params = list(sig.parameters)

    def rule(lw: TileRules, call: Call) -> Operand:
        try:
            bound = sig.bind(*call.args, **call.kwargs)
        except TypeError as exc:
            raise CompileError(f"`tile.{name}`: {exc}", call.loc, code="E0061") from None
        bound.apply_defaults()
        for k, v in bound.arguments.items():  # the stub's own defaults are plain Python values
            if v is None:
                bound.arguments[k] = PyObj(None, "None")
            elif isinstance(v, bool | int | float):
                bound.arguments[k] = Weak(v)
        locs = dict(zip(params, call.arg_locs, strict=False)) | call.kwarg_locs

        def loc_of(param: str) -> Location:
            return locs.get(param, call.loc)

        return handler(lw, loc_of, **bound.arguments)

    return rule


for _name, _stub in KERNEL_FUNCTIONS.items():
    INTRINSICS.declare([_stub], f"tile.{_name}", ops=OPS[_name], keywords=True)(bound_rule(_name))

_ABS, _MAXIMUM, _MINIMUM = bound_rule("abs"), bound_rule("maximum"), bound_rule("minimum")

# Python's `math`: folded on compile-time numbers, the tile function on tiles (pymath.py)
for _fn, _obj, _tile_name in math_functions():
    _made = OPS[_tile_name] if _tile_name else ()
    _tile_rule = bound_rule(_tile_name) if _tile_name else None
    INTRINSICS.declare([_obj], f"math.{_fn}", ops=_made)(math_rule(_fn, _tile_rule))


@INTRINSICS.declare([abs], "abs", ops=(ops.Unary,), keywords=True)
def _abs(lw: TileRules, call: Call) -> Operand:
    return _ABS(lw, call)


@INTRINSICS.declare([min, max], "min/max", ops=(ops.Binary,), keywords=True)
def _min_max(lw: TileRules, call: Call) -> Operand:
    """Python's min/max: folded on literals, else `tile.minimum`/`tile.maximum`."""
    if all(isinstance(a, Weak) for a in call.args) and not call.kwargs:
        return Weak(call.callee(*(a.value for a in call.args)))
    return (_MINIMUM if call.callee is min else _MAXIMUM)(lw, call)


INTRINSICS.declare([print], "print", ops=(ops.Print,))(print_rule)


@INTRINSICS.declare([len], "len")
def _len(lw: TileRules, call: Call) -> Operand:
    """`len` of a static tuple (a shape): a compile-time int."""
    if len(call.args) == 1 and isinstance(call.args[0], tuple) and not call.kwargs:
        return Weak(len(call.args[0]))
    raise host_function_error(call.name, call.loc, HOST_HELP, tile_form)


def tile_form(name: str) -> str | None:
    """What a Tile kernel calls instead of NumPy's `name` (E0605's help), if tile has it."""
    return f"`tile.{name}(...)`" if name in KERNEL_FUNCTIONS else None


@INTRINSICS.declare_kind(lambda obj: isinstance(obj, DType), "fl.<dtype>", ops=(ops.Cast,))
def _dtype_conversion(lw: TileRules, call: Call) -> Operand:
    """`fl.f32(x)` and every other dtype: a conversion."""
    if len(call.args) != 1 or call.kwargs:
        raise CompileError(f"`{call.name}(x)` takes one value", call.loc, code="E0061")
    return lw.cast(call.args[0], call.callee, call.loc)
