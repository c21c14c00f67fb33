"""A warning for reductions that take in padding which changes their result.

`tile.load(..., padding=p)` reads `p` past the tensor's end. A reduction over such a tile is
right only when `p` is the reduction's identity: 0 for `tile.sum`, -inf for `tile.max`, inf for
`tile.min`. A softmax over rows loaded with the default `padding=0` takes `max(row, 0)`: silently
wrong for rows of negative numbers whose length is not a multiple of the tile's.

After the frontend, `warn_padded_reductions` follows each loaded tile's padding value through
elementwise ops (the value a padded element holds: `exp(-inf - m)` is 0 for any finite `m`),
and warns (`PaddedReductionWarning`, at the reduction's line) when a reduction's axis may hold
padding that is not its identity. An axis may hold padding unless the specialisation's facts
(`TileParam.align`: the power of two dividing each extent) show that the tile's extent divides
the tensor's. A padded value the check cannot follow (a `tile.where`, a reshape, a value that
depends on the other operand) is not warned about: the check only speaks when it is sure of
the padded value.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import PaddedReductionWarning
from ..ir import tile_ops as ops
from ..ir.core import Block, Value
from ..ir.tile_kernel import TileIR
from ..ir.tile_types import TileType

# A padded tile: (the value its padded elements hold, which axes may be padded).
Fact = tuple[float, tuple[bool, ...]]

_UNARY: dict[str, Callable[[Any], Any]] = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "floor": np.floor,
    "ceil": np.ceil,
}
_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "max": np.maximum,
    "min": np.minimum,
    "pow": np.power,
}
_SAMPLES = (-2.5, 0.5, 3.0)  # stand-ins for the other operand's value, unless a constant
_IDENTITY = {"sum": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf}
# what to write for each reduction; a load pads with 0, -0.0, inf, -inf or nan only
_FIX = {
    "sum": "load the tile with `padding=0` (the identity of `sum`)",
    "prod": "replace the padding with 1.0 first, e.g. `tile.where(cols < n, v, 1.0)` with "
    "`cols = tile.arange(BN)` (a load cannot pad with 1.0)",
    "max": "load the tile with `padding=-math.inf` (the identity of `max`)",
    "min": "load the tile with `padding=math.inf` (the identity of `min`)",
}


def warn_padded_reductions(ir: TileIR) -> None:
    """Warn at each reduction that may take in padding other than its identity."""
    aligns: dict[Value, tuple[int, ...]] = {}
    params = [p for p in ir.signature if p.kind != "const"]
    for v, p in zip(ir.fn.entry.args, params, strict=False):
        if p.is_array:
            aligns[v] = p.align[1 : 1 + p.ndim]
    _walk(ir.fn.entry, {}, aligns)


def _walk(block: Block, facts: dict[Value, Fact], aligns: dict[Value, tuple[int, ...]]) -> None:
    for op in block.ops:
        for inner in ops.regions(op):
            _walk(inner, facts, aligns)
        fact = _fact(op, facts, aligns)
        if fact is not None and op.results:
            facts[op.results[0]] = fact


def _fact(op: Any, facts: dict[Value, Fact], aligns: dict[Value, tuple[int, ...]]) -> Fact | None:
    if isinstance(op, ops.Load):
        align = aligns.get(op.operands[0], ())
        shape = op.attrs["shape"]
        order = op.attrs.get("order", range(len(shape)))  # tile axis k is array axis order[k]
        may = tuple(
            t > 1 and not (a < len(align) and align[a] % t == 0)
            for a, t in zip(order, shape, strict=True)
        )
        return (float(op.attrs["padding"]), may) if any(may) else None
    if isinstance(op, ops.Cast):
        f = facts.get(op.operands[0])
        to = op.results[0].type
        if f is None or not isinstance(to, TileType):
            return None
        return f if to.dtype.is_float or math.isfinite(f[0]) else None
    if isinstance(op, ops.Unary):
        f = facts.get(op.operands[0])
        fn = _UNARY.get(op.attrs["kind"])
        return None if f is None or fn is None else (_eval(fn, f[0]), f[1])
    if isinstance(op, ops.Binary):
        return _binary(op, facts)
    if isinstance(op, ops.Reduce):
        _check(op, facts.get(op.operands[0]))
    return None


def _eval(fn: Callable[..., Any], *args: float) -> float:
    with np.errstate(all="ignore"):
        return float(fn(*(np.float64(a) for a in args)))


def _binary(op: Any, facts: dict[Value, Fact]) -> Fact | None:
    fn = _BINARY.get(op.attrs["kind"])
    fa, fb = facts.get(op.operands[0]), facts.get(op.operands[1])
    if fn is None or (fa is None and fb is None):
        return None
    if fa is not None and fb is not None:
        return (_eval(fn, fa[0], fb[0]), fa[1]) if fa[1] == fb[1] else None
    pad, axes = fa if fa is not None else fb  # type: ignore[misc]
    other = op.operands[1 if fa is not None else 0].owner
    while isinstance(other, ops.Reshape | ops.Broadcast):  # a literal is splat, then shaped
        other = other.operands[0].owner
    samples = (float(other.attrs["value"]),) if isinstance(other, ops.Constant) else _SAMPLES
    results = {repr(_eval(fn, pad, y) if fa is not None else _eval(fn, y, pad)) for y in samples}
    return (float(results.pop()), axes) if len(results) == 1 else None


def _check(op: Any, fact: Fact | None) -> None:
    if fact is None:
        return
    pad, may = fact
    kind, axis = op.attrs["kind"], op.attrs["axis"]
    if kind not in _IDENTITY or not may[axis] or pad == _IDENTITY[kind]:
        return
    loc = op.loc
    text = "nan" if math.isnan(pad) else repr(pad).replace("inf", "math.inf")
    warnings.warn_explicit(
        f"{loc}: `tile.{kind}` takes in padding {text} where the tensor's extent is not a "
        f"multiple of the tile's, which changes its result; {_FIX[kind]}",
        PaddedReductionWarning,
        loc.file,
        loc.line,
    )
