"""A warning for reductions that take in padding which changes their result.

`tile.load(..., padding=p)` reads `p` past the tensor's end. A reduction over such a tile is
right only when `p` is the reduction's identity: 0 for `tile.sum`, -inf for `tile.max`, inf for
`tile.min`. A softmax over rows loaded with the default `padding=0` takes `max(row, 0)`: silently
wrong for rows of negative numbers whose length is not a multiple of the tile's.

After the frontend, `warn_padded_reductions` follows each loaded tile's padding value through
elementwise ops (the value a padded element holds: `exp(-inf - m)` is 0 for any finite `m`)
and `tile.mma` (a zero-padded row or column of an operand leaves the accumulator's constant
there: the scores of padded keys are 0),
and warns (`PaddedReductionWarning`, at the reduction's line) when a reduction's axis may hold
padding that is not its identity. It follows comparisons too (`v < 5.0` of a zero-padded `v`
is True there) and `tile.where` whose condition it follows (the chosen operand's padded value
or constant: `tile.where(v < 5.0, 1.0, 0.0)` counts the padding; `tile.where(v == 0.0,
math.inf, v)` masks it away), and a reshape to the same shape (`tile.argmin`'s first step is a
`tile.min`). An axis may hold padding unless the specialisation's facts (`TileParam.align`:
the power of two dividing each extent) show that the tile's extent divides the tensor's. A
constant a `tile.where` puts in the padding warns under a sum or product only: under a max or
min it is a sentinel the user chose (an argmin's index N past every column). A `padding=`
Tile IR lacks (`padding=1.0`) is emulated by a `tile.where` on the load's in-bounds mask, which
the check recognises (`_emulated`) and reads as a chosen constant. A padded value the check
cannot follow (a reshape to another shape, another condition computed from positions, a value
carried round a loop, a value that depends on the other operand) is not warned about: the check
only speaks when it is sure of the padded value.

The specialisation knows each extent's power-of-two divisor only up to 16 bytes (4 f32), so a
tile of 32 on an extent of 32 is undecided when the kernel compiles. `padded_reductions` keeps,
for each reduction that may take in padding, the (argument, axis, tile extent) conditions
under which it does; a reduction whose padding is certain (the extent's divisor is exact and
smaller than the tile) warns when the kernel compiles, the others at each launch that prepares
a new key (`warn_at_launch`, with the arguments' actual extents).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from ..abi import ALIGN_BYTES
from ..errors import Location, PaddedReductionWarning
from ..ir.core import Block, Value
from ..ir.tile import ops
from ..ir.tile.kernel import TileIR
from ..ir.tile.types import TileType, tile_type
from ..sim.numerics import compare_fn

# A tile axis may be padded when, for one of its conditions (entry argument, array axis, tile
# extent), the argument's extent along that axis is not a multiple of the tile's.
Cond = tuple[int, int, int]
# A padded tile: (the value its padded elements hold, each axis's conditions (none: unpadded),
# whether that value is a constant a `tile.where` chose: a sentinel, such as an argmin's
# out-of-range index, which a max or min reduction is meant to take in).
Fact = tuple[float, tuple[frozenset[Cond], ...], bool]


@dataclass(frozen=True)
class Suspect:
    """A reduction that takes in padding `pad` (not its identity) when one of `conds` holds;
    `certain`: one holds whatever the extents (the compile warned)."""

    loc: Location
    kind: str
    pad: float
    conds: frozenset[Cond]
    certain: bool
    op: Any = dataclasses.field(default=None, compare=False, repr=False)  # the reduction


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
    "tan": np.tan,
    "sinh": np.sinh,
    "cosh": np.cosh,
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
    "max": "load the tile with `padding=-math.inf` (the identity of `max`), or mask the padded "
    "elements first, e.g. `tile.where(cols < n, v, -math.inf)` with `cols = tile.arange(BN)` "
    "(the scores of a `tile.mma` with padded keys)",
    "min": "load the tile with `padding=math.inf` (the identity of `min`), or mask the padded "
    "elements first, e.g. `tile.where(cols < n, v, math.inf)`",
}
_FIX["argmax"], _FIX["argmin"] = _FIX["max"], _FIX["min"]
_FIX["cumsum"] = _FIX["sum"]
_FIX["cumprod"] = _FIX["prod"]


def padded_reductions(ir: TileIR) -> tuple[Suspect, ...]:
    """Each reduction that may take in padding other than its identity, with its conditions;
    those certain to warn when the kernel compiles."""
    aligns: dict[Value, tuple[int, tuple[int, ...], int]] = {}
    for i, (v, p) in enumerate(zip(ir.fn.entry.args, ir.runtime_params, strict=True)):
        if p.is_array and p.dtype is not None:
            aligns[v] = (i, p.align[1 : 1 + p.ndim], max(1, ALIGN_BYTES // p.dtype.itemsize))
    found: list[Suspect] = []
    _walk(ir.fn.entry, {}, aligns, found)
    found = [dataclasses.replace(s, op=None) for s in found]  # the ops were for _walk only
    for s in found:
        if s.certain:
            _warn(s)
    return tuple(found)


def warn_at_launch(ir: TileIR, signature: Sequence[Any], values: Sequence[Any]) -> None:
    """Warn for `ir`'s undecided suspects that this launch's extents pad (`values` as
    `Kernel.signature_of` gives them: a Part's is (partition, its array))."""
    if not ir.padded_reductions:
        return
    params = [(p, v) for p, v in zip(signature, values, strict=True) if p.kind != "const"]
    shapes = {
        i: (v[1] if p.kind == "part" else v).shape for i, (p, v) in enumerate(params) if p.is_array
    }
    for s in ir.padded_reductions:
        if not s.certain and any(shapes[a][axis] % t for a, axis, t in s.conds if a in shapes):
            _warn(s)


def _walk(block: Block, facts: dict[Value, Fact], aligns: Any, found: list[Suspect]) -> None:
    for op in block.ops:
        for inner in ops.regions(op):
            _walk(inner, facts, aligns, found)
        if isinstance(op, ops.Reduce):
            _check(op, facts.get(op.operands[0]), aligns, found)
            continue
        if isinstance(op, ops.Scan) and op.attrs["reverse"]:
            _check(op, facts.get(op.operands[0]), aligns, found)
        if isinstance(op, ops.Compare):
            _name_arg_reduce(op, found)
        fact = _fact(op, facts, aligns)
        if fact is not None and op.results:
            facts[op.results[0]] = fact


def _name_arg_reduce(op: Any, found: list[Suspect]) -> None:
    """`tile.argmax`'s `v == max(v)` (lower_api.py `_arg_reduce`): its reduction's warning
    names `tile.argmax` (`tile.argmin`), which the user wrote."""
    if op.attrs["pred"] != "eq":
        return
    v, m = op.operands
    while isinstance(m.owner, ops.Broadcast | ops.Reshape):
        m = m.owner.operands[0]
    red = m.owner
    if not (isinstance(red, ops.Reduce) and red.operands[0] is v):
        return
    for i, s in enumerate(found):
        if s.op is red and s.kind in ("max", "min"):
            found[i] = dataclasses.replace(s, kind="arg" + s.kind)


def _fact(op: Any, facts: dict[Value, Fact], aligns: Any) -> Fact | None:
    if isinstance(op, ops.Load):
        if op.operands[0] not in aligns:
            return None
        arg, align, _ = aligns[op.operands[0]]
        shape = op.attrs["shape"]
        order = op.attrs.get("order", range(len(shape)))  # tile axis k is array axis order[k]
        conds = tuple(
            frozenset({(arg, a, t)})
            if t > 1 and not (a < len(align) and align[a] % t == 0)
            else frozenset()
            for a, t in zip(order, shape, strict=True)
        )
        return (float(op.attrs["padding"]), conds, False) if any(conds) else None
    if isinstance(op, ops.Cast):
        f = facts.get(op.operands[0])
        to = op.results[0].type
        if f is None or not isinstance(to, TileType):
            return None
        return f if to.dtype.is_float or math.isfinite(f[0]) else None
    if isinstance(op, ops.Unary):
        f = facts.get(op.operands[0])
        fn = _UNARY.get(op.attrs["kind"])
        return None if f is None or fn is None else (_eval(fn, f[0]), f[1], f[2])
    if isinstance(op, ops.Binary):
        return _binary(op, facts)
    if isinstance(op, ops.Compare):
        return _binary(op, facts, compare_fn(op.attrs["pred"], dtypes.f64))  # the simulator's
    if isinstance(op, ops.Select):
        return _select(op, facts)
    if isinstance(op, ops.Reshape | ops.Broadcast | ops.Permute | ops.Extract | ops.Scan):
        f = facts.get(op.operands[0])
        return None if f is None else _moved(op, f)
    if isinstance(op, ops.Cat):
        return _cat(op, facts)
    if isinstance(op, ops.Mma):
        return _mma(op, facts)
    return None


def _mma(op: Any, facts: dict[Value, Fact]) -> Fact | None:
    """`acc + a @ b` with a constant `acc` (`tile.zeros`): a zero-padded row of `a` or column of
    `b` adds nothing, so that row or column of the result holds `acc`'s value (the scores of an
    attention's padded keys are 0, which a row's `tile.max` takes in). Zero padding along the
    contracted axis adds nothing either; other padding there, a padded batch axis, a padded
    row or column of another value, or an `acc` that is no constant is not followed."""
    a, b, acc = op.operands
    fa, fb = facts.get(a), facts.get(b)
    value = _constant(acc)
    if (fa is None and fb is None) or value is None:
        return None
    nd = len(tile_type(acc).shape)
    axes = [frozenset[Cond]() for _ in range(nd)]
    for f, own, contracted in ((fa, nd - 2, nd - 1), (fb, nd - 1, nd - 2)):
        if f is None:
            continue
        pad, conds, _ = f
        if any(conds[: nd - 2]) or ((conds[own] or conds[contracted]) and pad != 0.0):
            return None
        axes[own] = conds[own]
    return (value, tuple(axes), False) if any(axes) else None


def _moved(op: Any, f: Fact) -> Fact | None:
    """The padding of a shape op's (or a scan's) result, from its operand's: each axis's
    conditions follow the elements (None where the check cannot follow them)."""
    pad, conds, chosen = f
    if isinstance(op, ops.Permute):
        return (pad, tuple(conds[p] for p in op.attrs["perm"]), chosen)
    if isinstance(op, ops.Broadcast):  # stretches extent-1 axes, which hold no padding
        return f
    if isinstance(op, ops.Reshape):
        axes = _regrouped(tile_type(op.operands[0]).shape, op.attrs["shape"], conds)
        return None if axes is None else (pad, axes, chosen)
    if isinstance(op, ops.Extract):
        # padding sits at the end of an axis: the last window of a padded axis holds it when
        # the tile does; an earlier window may or may not, which the check leaves
        full = tile_type(op.operands[0]).shape
        kept = tuple(
            c if (i + 1) * n == d else frozenset()
            for c, i, n, d in zip(conds, op.attrs["index"], op.attrs["shape"], full, strict=True)
        )
        return (pad, kept, chosen) if any(kept) else None
    # a scan: padded elements of the identity stay it, unless the scan runs from the
    # in-bounds elements into the padding (forward, along a padded axis)
    kind, axis = op.attrs["kind"], op.attrs["axis"]
    if pad != _IDENTITY[kind] or (conds[axis] and not op.attrs["reverse"]):
        return None
    return f


def _regrouped(
    src: tuple[int, ...], dst: tuple[int, ...], conds: tuple[frozenset[Cond], ...]
) -> tuple[frozenset[Cond], ...] | None:
    """The axes' conditions after a reshape from `src` to `dst` that only merges adjacent
    axes and adds or drops extent-1 ones (a merged axis holds padding where any of its parts
    did); None for a reshape that splits a padded axis."""
    out: list[frozenset[Cond]] = []
    i = 0
    for d in dst:
        group: frozenset[Cond] = frozenset()
        size = 1
        while size < d and i < len(src):
            size *= src[i]
            group |= conds[i]
            i += 1
        if size != d:
            return None
        out.append(group)
    if any(conds[i:]):  # only extent-1 axes, which hold no padding, may be left
        return None
    return tuple(out)


def _cat(op: Any, facts: dict[Value, Fact]) -> Fact | None:
    """`tile.cat((a, b), axis)`: the padding of either part (their elements keep their
    padded values); both parts' conditions when they pad with one value."""
    fa, fb = (facts.get(v) for v in op.operands)
    if fa is not None and fb is not None and fa[0] == fb[0]:
        axes = tuple(x | y for x, y in zip(fa[1], fb[1], strict=True))
        return (fa[0], axes, fa[2] or fb[2])
    return fa if fa is not None else fb


def _select(op: Any, facts: dict[Value, Fact]) -> Fact | None:
    """`where(cond, a, b)` where `cond`'s padded elements hold a known bool: the padded
    elements take the chosen operand's padded value, or its constant. Also a `padding=` Tile
    IR lacks (`_emulated`)."""
    fc = facts.get(op.operands[0])
    if fc is None:
        return _emulated(op, facts)
    chosen = op.operands[1 if fc[0] else 2]
    if (fx := facts.get(chosen)) is not None:
        axes = _joined(fc[1], fx[1])
        return None if axes is None else (fx[0], axes, fx[2])
    value = _constant(chosen)
    return None if value is None else (value, fc[1], True)


def _emulated(op: Any, facts: dict[Value, Fact]) -> Fact | None:
    """`tile.load(x, ..., padding=c)` for a constant c Tile IR cannot pad with (load_padding.py):
    a zero-padded load, then `where(in_bounds, loaded, c)` with the mask compared against x's
    extents, so its padded elements hold c. A constant a `tile.where` chose, as the user did:
    it warns under a sum or product, not under a max or min."""
    loaded, fill = op.operands[1], op.operands[2]
    load = loaded.owner
    f, value = facts.get(loaded), _constant(fill)
    if f is None or value is None or not isinstance(load, ops.Load):
        return None
    return (value, f[1], True) if _bounds_of(op.operands[0], load.operands[0]) else None


def _bounds_of(mask: Value, arr: Value) -> bool:
    """Whether `mask` is made only of comparisons joined by `and` (and reshaped or broadcast),
    at least one of them with an extent of array `arr`: load_padding.py's in-bounds mask."""
    stack, extent = [mask], False
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, ops.Broadcast | ops.Reshape):
            stack.append(owner.operands[0])
        elif isinstance(owner, ops.Binary) and owner.attrs["kind"] == "and":
            stack.extend(owner.operands)
        elif isinstance(owner, ops.Compare):
            extent = extent or any(_is_extent(x, arr) for x in owner.operands)
        else:
            return False
    return extent


def _is_extent(v: Value, arr: Value) -> bool:
    """Whether `v` is an extent of array `arr` (`tile.dim`), reshaped or broadcast."""
    while isinstance(v.owner, ops.Broadcast | ops.Reshape):
        v = v.owner.operands[0]
    return isinstance(v.owner, ops.ArrayDim) and v.owner.operands[0] is arr


def _constant(v: Value) -> float | None:
    """The value of a splat constant (`ops.splat_value`) as a float, else None."""
    value = ops.splat_value(v)
    return None if value is None else float(value)


def _joined(
    a: tuple[frozenset[Cond], ...], b: tuple[frozenset[Cond], ...]
) -> tuple[frozenset[Cond], ...] | None:
    """The axes' conditions of two padded operands of one elementwise op, each axis's joined;
    None where one is padded along an axis the other is not (their padded elements differ)."""
    if [bool(c) for c in a] != [bool(c) for c in b]:
        return None
    return tuple(x | y for x, y in zip(a, b, strict=True))


def _eval(fn: Callable[..., Any], *args: float) -> float:
    with np.errstate(all="ignore"):
        return float(fn(*(np.float64(a) for a in args)))


def _binary(op: Any, facts: dict[Value, Fact], fn: Callable[..., Any] | None = None) -> Fact | None:
    """An elementwise op of two operands (`fn`: a comparison's, else the op kind's), one or
    both of them padded: the value its padded elements hold, where the other operand's value
    (a constant's, else a few samples) does not change it."""
    fn = fn or _BINARY.get(op.attrs["kind"])
    fa, fb = facts.get(op.operands[0]), facts.get(op.operands[1])
    if fn is None or (fa is None and fb is None):
        return None
    if fa is not None and fb is not None:
        axes = _joined(fa[1], fb[1])
        return None if axes is None else (_eval(fn, fa[0], fb[0]), axes, fa[2] or fb[2])
    pad, axes, chosen = fa if fa is not None else fb  # type: ignore[misc]
    constant = _constant(op.operands[1 if fa is not None else 0])
    samples = _SAMPLES if constant is None else (constant,)
    results = {repr(_eval(fn, pad, y) if fa is not None else _eval(fn, y, pad)) for y in samples}
    return (float(results.pop()), axes, chosen) if len(results) == 1 else None


def _check(op: Any, fact: Fact | None, aligns: Any, found: list[Suspect]) -> None:
    if fact is None:
        return
    pad, conds, chosen = fact
    kind, axis = op.attrs["kind"], op.attrs["axis"]
    if kind not in _IDENTITY or not conds[axis] or pad == _IDENTITY[kind]:
        return
    if isinstance(op, ops.Scan):  # a reverse scan runs from the padding into every element
        kind = "cum" + kind
    if chosen and kind in ("max", "min"):  # a where's sentinel, which such a reduction takes
        return  # in by design (`tile.min(tile.where(v == m, cols, N))`); a sum adds it
    exact = {arg: (align, cap) for arg, align, cap in aligns.values()}

    def certain(c: Cond) -> bool:  # the extent's divisor is exact (under the cap) and < tile
        arg, a, t = c
        align, cap = exact[arg]
        return a < len(align) and align[a] < cap and align[a] < t

    found.append(Suspect(op.loc, kind, pad, conds[axis], any(map(certain, conds[axis])), op))


def _warn(s: Suspect) -> None:
    text = "nan" if math.isnan(s.pad) else repr(s.pad).replace("inf", "math.inf")
    warnings.warn_explicit(
        f"{s.loc}: `tile.{s.kind}` takes in padding {text} where the tensor's extent is not a "
        f"multiple of the tile's, which changes its result; {_FIX[s.kind]}",
        PaddedReductionWarning,
        s.loc.file,
        s.loc.line,
    )
