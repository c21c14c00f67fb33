"""Remove bounds checks that a dominating guard proves.

A check `check.bounds %i, len(%a)` holds when `%i >= 0` and a guard `%i < len(%a)` was taken
on the only way here:

    ^bb0:  %t = thread.index_1d            %c = compare lt %ti, %n     cond_br %c, ^bb1, ^bb2
    ^bb1:  check.bounds %ti, %n            <- removed: ^bb1 is reached only when %c held

Facts come from the edges of `cond_br` into blocks with a single predecessor (the true edge of
`x < n`, `n > x`, `a and b`; the false edge of `x >= n`, `n <= x`, `a or b`); they hold in
every block that edge's target dominates. Python's short-circuit `and`/`or` lowers to a join
block whose argument is the condition; the facts of its edge are those every incoming edge
that can carry the taken value proves (`x < n and y < m` proves both). Values are compared by a key that sees through `index.int`, so
the ThreadIndex and its integer value are one quantity, all `len(a)` of one array along one
axis are one, all `t.row` (`t.col`) of `index_2d()` are one, and the column of a
`block_stride` pair is its counter. A 2-D access has one
check per axis, each proved on its own: `t.row < a.shape[0]` proves the row check of `a[t]`.
`requires=` relations between lengths extend the facts: with "len(a) == len(c)" (or
"len(a) >= len(c)") a guard `i < len(c)` also proves `i < len(a)`.
Non-negativity: ThreadIndex (a grid-stride step too), `len`, constants >= 0, small quantities
(`bounded`: special registers, constants, and their sums and products that cannot wrap), and
loop counters that start >= 0 and grow by a `bounded` step that cannot wrap: a `range`
counter's (`nowrap`: simt/loops.py ends the loop before its next value would pass the stop),
or a counter stepped by hand (`k += 4 * stride`) whose every step is taken under a guard that
bounds it by a length (`while k + 3 * stride < n`), so that by induction it stays below 2^62
plus a step (`_counters`, `Small`). A counter stepped by hand with no such guard may wrap (an
i16 `k += 20000` under `k < 30000` reaches -25536), and its accesses keep their checks.

Wrapping: a guard's sides are sums computed in their dtype, so a fact is drawn only where the
parts' ranges (ir/simt/ranges.py) leave room for what the sum adds (`_exact`): `k + 1 < n`
over a counter that may reach 2^63 - 1 says nothing of k.

Strided guards: a small non-negative term may stand beside the base, `k + 3 * stride < n`
(`linear`: base k, terms {stride: 3}), and proves `k + j * stride < n` for 0 <= j <= 3, since
dropping part of a non-negative term only lowers the index; `stride = gridDim.x * blockDim.x`
is such a term (below 2^41), a parameter is not (it may be negative).

Constant offsets are followed on both sides: a guard `1 <= i < len(out) - 1` proves the
checks of `x[i - 1]`, `x[i]` and `x[i + 1]` (with `len(x) >= len(out)` from `requires=` or
the fast variant's assumption). Facts are ("lt", x, m, c): x < m + c, and ("ge", x, lo):
x >= lo, over keys of the non-constant parts; a check of `x + d` against `len(a)` holds when
some m <= len(a) has x < m + c with c + d <= 0, and x + d >= 0 is known.
"""

from __future__ import annotations

from typing import Any

from ...dtypes import int_range
from ...ir.analysis import dominators
from ...ir.core import Block, Function, ScalarType, Value
from ...ir.simt import ops
from ...ir.simt.ranges import MAX_LENGTH, MAX_STRIDE_COUNTER, REG_LIMITS, value_bounds
from .options import PassOptions

# ("lt", x, m, c, terms): x + terms < m + c, terms a frozenset of (key, coefficient) pairs of
# small non-negative quantities (`k + 3 * stride < n`: x = k, terms {(stride, 3)}); or
# ("ge", x, lo): x >= lo.
Fact = tuple[Any, ...]
# Counters stepped by hand that stay far from their dtype's end, with their ranges (`run`).
Small = dict[Value, tuple[int, int]]
_MAX_STEP = 1 << 32  # constant offsets followed by `affine`
# A loop step or a scaled term below this keeps an index that was below a length (< 2^62) from
# wrapping.
_MAX_TERM = 1 << 48


def key(v: Value) -> Any:
    op = v.owner
    if isinstance(op, ops.IndexToInt):
        return key(op.operands[0])
    if isinstance(op, ops.ThreadIndex1D):
        return ("thread.index_1d",)
    if isinstance(op, ops.ThreadIndexAxis):
        pair = op.operands[0].owner
        if isinstance(pair, ops.BlockRowIndex):  # (block, column): the column is its operand
            if op.axis == 0:
                return ("block_id",)
            return key(pair.operands[0]) if pair.width == 1 else ("chunk", pair.operands[0])
        if isinstance(pair, ops.BlockTileRow | ops.TileRow):  # a step's row is its own value;
            if op.axis == 0:  # its column is that of `block_index_2d()` / `index_2d()`
                return ("row", op.operands[0])
            block = isinstance(pair, ops.BlockTileRow)
            return ("thread.block_index_2d" if block else "thread.index_2d", 1)
        # Every `t.row` of `index_2d()` (of `block_index_2d()`) in a kernel is one quantity.
        return (pair.opname if isinstance(pair, ops.Op) else pair, op.axis)
    if isinstance(op, ops.ArrayLen):
        return ("len", op.operands[0], op.axis)
    if isinstance(op, ops.Constant):
        return ("const", op.value)
    return v


def bounded(v: Value) -> int | None:
    """An upper bound of `v` when it is a small non-negative quantity: a special register, a
    non-negative constant, and their widenings, sums and products (`gridDim.x * blockDim.x`
    is below 2^41); None otherwise."""
    op = v.owner
    if isinstance(op, ops.SpecialReg):
        return REG_LIMITS.get(op.reg, 1 << 31)
    if isinstance(op, ops.Constant):
        value = op.value
        return value if type(value) is int and value >= 0 else None
    if isinstance(op, ops.Cast):
        src = op.operands[0]
        widening = isinstance(src.type, ScalarType) and src.dtype.is_int
        return bounded(src) if widening and src.dtype.bits <= v.dtype.bits else None
    if isinstance(op, ops.Binary) and op.kind in ("add", "mul"):
        x, y = (bounded(o) for o in op.operands)
        if x is None or y is None:
            return None
        bound = x + y if op.kind == "add" else x * y
        dt = v.dtype  # the sum or product must not wrap in its own type
        return bound if bound < 1 << (dt.bits - (1 if dt.kind == "i" else 0)) else None
    return None


def nonneg(
    v: Value,
    preds: dict[Block, list[ops.Op]],
    small: Small | None = None,
    assuming: frozenset[Value] = frozenset(),
) -> bool:
    op = v.owner
    if isinstance(
        op,
        ops.IndexToInt | ops.ThreadIndex1D | ops.ThreadIndexAxis | ops.ArrayLen | ops.IndexAdvance,
    ):
        return True
    if bounded(v) is not None:
        return True
    if isinstance(op, ops.Constant):
        return not isinstance(op.value, bool) and op.value >= 0
    if isinstance(op, ops.Cast):
        src = op.operands[0]
        return src.type == v.type or (
            src.dtype.is_int
            and nonneg(src, preds, small, assuming)
            and src.dtype.bits <= v.dtype.bits
        )
    if isinstance(op, Block):
        if v in assuming:
            return True
        idx = op.args.index(v)
        terms = preds.get(op, [])
        if not terms:
            return False
        for term in terms:
            incoming = ops.branch_args(term, op)[idx]
            if incoming is v:
                continue
            inc_op = incoming.owner
            if _step(incoming, v) is not None:
                if isinstance(inc_op, ops.Binary) and (inc_op.nowrap or v in (small or {})):
                    continue  # a step by a non-negative amount that cannot wrap
                return False  # `k += step` by hand may wrap past the dtype's end
            if not nonneg(incoming, preds, small, assuming | {v}):
                return False
        return True
    return False


def affine(v: Value) -> tuple[Any, Value | None, int]:
    """(key of the non-constant part, that part, constant offset) of an integer value."""
    op = v.owner
    if isinstance(op, ops.Constant) and not isinstance(op.value, bool | float):
        return None, None, int(op.value)
    if isinstance(op, ops.IndexToInt):
        return affine(op.operands[0])
    if isinstance(op, ops.Binary) and op.kind in ("add", "sub"):
        x, y = op.operands
        if isinstance(y.owner, ops.Constant) and not isinstance(y.owner.value, bool | float):
            k, base, c = affine(x)
            if k is not None and abs(int(y.owner.value)) < _MAX_STEP:
                return (
                    k,
                    base,
                    c + (int(y.owner.value) if op.kind == "add" else -int(y.owner.value)),
                )
    return key(v), v, 0


def linear(v: Value) -> tuple[Any, Value | None, int, frozenset[tuple[Any, int]]]:
    """`affine(v)` with small non-negative terms split off: `k + 2 * stride + 1` is (key(k), k,
    1, {(key(stride), 2)}); each term is `bounded`, so dropping one only lowers the value."""
    op = v.owner
    if isinstance(op, ops.IndexToInt):
        return linear(op.operands[0])
    if isinstance(op, ops.Binary) and op.kind == "add":
        x, y = op.operands
        term = _scaled_term(y)
        if term is not None:
            k, base, c, terms = linear(x)
            if k is not None:
                merged = dict(terms)
                merged[term[0]] = merged.get(term[0], 0) + term[1]
                return k, base, c, frozenset(merged.items())
    k, base, c = affine(v)
    return k, base, c, frozenset()


def _scaled_term(v: Value) -> tuple[Any, int] | None:
    """(key of s, c) when `v` is s or c * s (s * c) for a constant c >= 0 and a `bounded` s
    whose scaled bound stays below _MAX_TERM; None otherwise."""
    op = v.owner
    coef, s = 1, v
    if isinstance(op, ops.Binary) and op.kind == "mul":
        for a, b in (op.operands, op.operands[::-1]):
            if isinstance(a.owner, ops.Constant) and type(a.owner.value) is int:
                coef, s = a.owner.value, b
                break
    bound = bounded(s)
    if isinstance(s.owner, ops.Constant) or bound is None or coef < 0:
        return None
    return (key(s), coef) if _small(bound * max(coef, 1)) else None


def _small(bound: int | None) -> bool:
    return bound is not None and bound < _MAX_TERM


def edge_facts(cond: Value, taken: bool, small: Small | None = None) -> list[Fact]:
    op = cond.owner
    if isinstance(op, ops.Binary) and op.kind == "and" and taken:
        return edge_facts(op.operands[0], True, small) + edge_facts(op.operands[1], True, small)
    if not isinstance(op, ops.Compare):
        return []
    a, b = op.operands
    if not (a.type == b.type and getattr(a.type, "dtype", None) is not None and a.dtype.is_int):
        return []
    pred = op.pred if taken else {"ge": "lt", "le": "gt", "lt": "ge", "gt": "le"}.get(op.pred)
    if pred in ("gt", "ge"):  # a > b is b < a
        a, b, pred = b, a, {"gt": "lt", "ge": "le"}[pred]
    if pred not in ("lt", "le"):
        return []
    ka, base_a, ca, terms = linear(a)
    kb, base_b, cb = affine(b)
    if not (_exact(a, base_a, ca, terms, small) and _exact(b, base_b, cb, frozenset(), small)):
        return []  # the compare saw a wrapped sum: it says nothing of the parts
    slack = 0 if pred == "lt" else 1  # a <= b is a < b + 1
    if ka is not None and kb is not None:
        return [("lt", ka, kb, cb - ca + slack, terms)]
    if ka is None and kb is not None:  # constant < b: b >= constant + 1
        return [("ge", kb, ca - cb + 1 - slack)]
    return []


def _exact(
    v: Value,
    base: Value | None,
    c: int,
    terms: frozenset[tuple[Any, int]],
    small: Small | None = None,
) -> bool:
    """Whether `v`, computed as base + c + terms in v's dtype, cannot have wrapped: nothing is
    added to the base, or the base's range (ir/simt/ranges.py) leaves room for what is (each
    term is below _MAX_TERM). A guard `k + 1 < len(x)` over a counter that may reach the
    dtype's end proves nothing of k."""
    if base is None or (c == 0 and not terms):
        return True
    lo, hi = _range(base, small)
    d_lo, d_hi = int_range(v.dtype)
    return lo + min(c, 0) >= d_lo and hi + max(c, 0) + len(terms) * _MAX_TERM <= d_hi


def proves(
    op: ops.BoundsCheck,
    known: set[Fact],
    terms: dict[Block, list[ops.Op]],
    small: Small | None = None,
) -> bool:
    """Whether the facts known here prove the single check `op`."""
    idx, n = op.operands
    ki, base, d, scaled = linear(idx)
    if ki is None:
        return False
    kn = key(n)
    upper = any(
        f[0] == "lt" and f[1] == ki and f[2] == kn and f[3] + d <= 0 and _within(scaled, f[4])
        for f in known
    )
    if not upper:
        return False
    if d >= 0 and base is not None and nonneg(base, terms, small):
        return True
    return any(f[0] == "ge" and f[1] == ki and f[2] + d >= 0 for f in known)


def _within(terms: frozenset[tuple[Any, int]], bound: frozenset[tuple[Any, int]]) -> bool:
    """Whether each term's coefficient is at most the bound's (terms are non-negative)."""
    limit = dict(bound)
    return all(c <= limit.get(k, 0) for k, c in terms)


def run(fn: Function, options: PassOptions) -> None:
    preds = fn.predecessors()
    terms = {b: [p.terminator for p in ps if p.terminator is not None] for b, ps in preds.items()}
    doms = dominators(fn)
    wider = _length_order(fn, options.len_relations)
    order = fn.reverse_postorder()
    position = {b: i for i, b in enumerate(order)}

    def facts_on_entry(small: Small) -> dict[Block, list[Fact]]:
        """Facts established on entry to each block with a single predecessor. Reverse
        postorder: a short-circuit condition reads the facts of the blocks before its join."""
        entry_facts: dict[Block, list[Fact]] = {}

        def known_at(b: Block) -> set[Fact]:
            return {f for d in doms.get(b, ()) for f in entry_facts.get(d, ())}

        def branch_facts(cond: Value, taken: bool, b: Block) -> list[Fact]:
            """What `cond == taken` at the end of `b` proves; sees through `and`/`or` joins."""
            if cond.owner is not b:
                return edge_facts(cond, taken, small)
            # `x and y` lowers to a join whose argument is `y` from the edge where `x` held and
            # False from the other: each incoming edge that can carry `taken` proves what its
            # value proves plus what held in its block; the join proves what all of them do.
            slot = b.args.index(cond)
            proved: set[Fact] | None = None
            for p in preds[b]:
                term = p.terminator
                assert term is not None
                v = ops.branch_args(term, b)[slot]
                if isinstance(v.owner, ops.Constant) and v.owner.value is not taken:
                    continue  # this edge never carries `taken`
                if position.get(p, len(order)) >= position[b]:
                    return []  # a back edge: its values belong to another iteration
                facts = set(edge_facts(v, taken, small)) | known_at(p)
                proved = facts if proved is None else proved & facts
            return list(proved or ())

        for b in order:
            term = b.terminator
            if isinstance(term, ops.CondBr) and term.if_true is not term.if_false:
                for succ, taken in ((term.if_true, True), (term.if_false, False)):
                    if len(preds[succ]) == 1:
                        entry_facts[succ] = branch_facts(term.cond, taken, b)
        return entry_facts

    def known_in(b: Block, entry_facts: dict[Block, list[Fact]]) -> set[Fact]:
        known: set[Fact] = set()
        for d in doms.get(b, ()):
            for f in entry_facts.get(d, ()):
                if f[0] == "lt":  # x + terms < m + c, and m <= each length wider than it
                    known.update(("lt", f[1], m2, *f[3:]) for m2 in wider.get(f[2], {f[2]}))
                else:
                    known.add(f)
        return known

    # Hand-stepped counters (`while k + 3 * stride < n: ...; k += 4 * stride`) are assumed to
    # stay far from the dtype's end, the facts are drawn under that assumption, and a counter
    # keeps it only where each of its steps is taken under a fact that bounds it by a length
    # (so, by induction over the iterations, it never passes 2^62 + one step); until no
    # counter loses it.
    counters = _counters(fn, preds)
    small: Small = {v: bounds for v, (bounds, _) in counters.items()}
    while True:
        entry_facts = facts_on_entry(small)
        lost = [
            v
            for v in small
            if not all(
                _bounded_by_length(v, known_in(p, entry_facts), small) for p in counters[v][1]
            )
        ]
        if not lost:
            break
        for v in lost:
            del small[v]
    for b in fn.blocks:
        known = known_in(b, entry_facts)
        if not known:
            continue
        kept = []
        for op in b.ops:
            if (
                isinstance(op, ops.BoundsCheck)
                and len(op.sites) == 1
                and proves(op, known, terms, small)
            ):
                options.checks_removed += 1
                continue
            kept.append(op)
        b.ops = kept


def _range(v: Value, small: Small | None = None) -> tuple[int, int]:
    """(lo, hi) of an integer value: a small counter's, a `bounded` quantity's, or what its
    definition says (ir/simt/ranges.py)."""
    if small and v in small:
        return small[v]
    b = bounded(v)
    return (0, b) if b is not None else value_bounds(v)


def _step(incoming: Value, k: Value) -> int | None:
    """The bound of the step when `incoming` is `k + step` for a `bounded` step below
    _MAX_TERM; None otherwise."""
    op = incoming.owner
    if isinstance(op, ops.Binary) and op.kind == "add" and op.operands[0] is k:
        bound = bounded(op.operands[1])
        return bound if _small(bound) else None
    return None


def _counters(
    fn: Function, preds: dict[Block, list[Block]]
) -> dict[Value, tuple[tuple[int, int], list[Block]]]:
    """Block arguments stepped by hand: each edge into the block passes either the argument
    plus a small non-negative step (a back edge, whose block is listed) or a start in a range
    far from the dtype's end. For each: (the range it keeps if every step is taken below a
    length, the blocks of its steps)."""
    shapes: dict[Value, tuple[list[Value], list[Block]]] = {}  # k: (starts, step blocks)
    for b in fn.blocks:
        for idx, k in enumerate(b.args):
            if not (isinstance(k.type, ScalarType) and k.dtype.is_int and k.dtype.bits == 64):
                continue
            starts: list[Value] = []
            steps: list[Block] = []
            ok = True
            for p in preds.get(b, []):
                term = p.terminator
                assert term is not None
                incoming = ops.branch_args(term, b)[idx]
                if incoming is k:
                    continue
                if _step(incoming, k) is None:
                    starts.append(incoming)
                elif isinstance(incoming.owner, ops.Binary) and incoming.owner.nowrap:
                    ok = False  # a `range` counter: its own guard keeps it
                else:
                    steps.append(p)
            if ok and steps:
                shapes[k] = (starts, steps)
    hi = MAX_STRIDE_COUNTER + _MAX_STEP + 2 * _MAX_TERM
    out = {k: ((-MAX_LENGTH, hi), steps) for k, (_, steps) in shapes.items()}
    changed = True
    while changed:  # a counter may start where another ended (the loop after a strided one)
        changed = False
        for k, (starts, _) in shapes.items():
            if k not in out:
                continue
            ranges = [out[s][0] if s in out else _range(s) for s in starts]
            if not all(lo >= -MAX_LENGTH and h <= hi for lo, h in ranges):
                del out[k]
                changed = True
                continue
            lo = min([0, *(lo for lo, _ in ranges)])
            if out[k][0][0] != lo:
                out[k] = ((lo, hi), out[k][1])
                changed = True
    return out


def _bounded_by_length(k: Value, known: set[Fact], small: Small) -> bool:
    """Whether a fact known here says k (plus non-negative terms) < m + c for an m far below
    the dtype's end (a length, a small constant or register, a small counter) and c < 2^32."""
    kk = key(k)
    for f in known:
        if f[0] == "lt" and f[1] == kk and f[3] < _MAX_STEP and _key_hi(f[2], small) < MAX_LENGTH:
            return True
    return False


def _key_hi(k: Any, small: Small) -> int:
    """An upper bound of the quantity a fact's key names (ranges.py's, or a small counter's)."""
    if isinstance(k, Value):
        return _range(k, small)[1]
    if k[0] == "len":
        return MAX_LENGTH - 1
    if k[0] == "const":
        return int(k[1]) if type(k[1]) is int else MAX_LENGTH
    return MAX_STRIDE_COUNTER  # thread indices, rows, columns and block ids


def _length_order(fn: Function, relations: list[tuple[str, str, str]]) -> dict[Any, set[Any]]:
    """For each `len(p)` key, the length keys known to be >= it (itself included)."""
    by_name = {p.name: p for p in fn.params}
    le: dict[Any, set[Any]] = {}
    for a, op, b in relations:
        ka, kb = ("len", by_name[a], 0), ("len", by_name[b], 0)
        if op in ("==", ">=", ">"):
            le.setdefault(kb, {kb}).add(ka)
        if op in ("==", "<=", "<"):
            le.setdefault(ka, {ka}).add(kb)
    changed = True
    while changed:  # transitive closure; kernels have a handful of arrays
        changed = False
        for ups in le.values():
            more = set().union(*(le.get(u, {u}) for u in ups)) - ups
            if more:
                ups |= more
                changed = True
    return le
