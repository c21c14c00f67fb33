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
Non-negativity: ThreadIndex (a grid-stride step too), `len`, constants >= 0, and loop counters that start >= 0 and grow
by a small constant step.

Constant offsets are followed on both sides: a guard `1 <= i < len(out) - 1` proves the
checks of `x[i - 1]`, `x[i]` and `x[i + 1]` (with `len(x) >= len(out)` from `requires=` or
the fast variant's assumption). Facts are ("lt", x, m, c): x < m + c, and ("ge", x, lo):
x >= lo, over keys of the non-constant parts; a check of `x + d` against `len(a)` holds when
some m <= len(a) has x < m + c with c + d <= 0, and x + d >= 0 is known.
"""

from __future__ import annotations

from typing import Any

from ...ir import ops
from ...ir.analysis import dominators
from ...ir.core import Block, Function, Value
from .options import PassOptions

Fact = tuple[Any, ...]  # ("lt", x, m, c): x < m + c, or ("ge", x, lo): x >= lo
_MAX_STEP = 1 << 32


def key(v: Value) -> Any:
    op = v.owner
    if isinstance(op, ops.IndexToInt):
        return key(op.operands[0])
    if isinstance(op, ops.ThreadIndex1D):
        return ("thread.index_1d",)
    if isinstance(op, ops.ThreadIndexAxis):
        pair = op.operands[0].owner
        if isinstance(pair, ops.BlockRowIndex):  # (block, column): the column is its operand
            return ("block_id",) if op.axis == 0 else key(pair.operands[0])
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


def nonneg(
    v: Value, preds: dict[Block, list[ops.Op]], assuming: frozenset[Value] = frozenset()
) -> bool:
    op = v.owner
    if isinstance(
        op,
        ops.IndexToInt | ops.ThreadIndex1D | ops.ThreadIndexAxis | ops.ArrayLen | ops.IndexAdvance,
    ):
        return True
    if isinstance(op, ops.Constant):
        return not isinstance(op.value, bool) and op.value >= 0
    if isinstance(op, ops.Cast):
        src = op.operands[0]
        return src.type == v.type or (
            src.dtype.is_int and nonneg(src, preds, assuming) and src.dtype.bits <= v.dtype.bits
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
            if (
                isinstance(inc_op, ops.Binary)
                and inc_op.kind == "add"
                and inc_op.operands[0] is v
                and isinstance(inc_op.operands[1].owner, ops.Constant)
                and 0 <= inc_op.operands[1].owner.value < _MAX_STEP
            ):
                continue
            if not nonneg(incoming, preds, assuming | {v}):
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


def edge_facts(cond: Value, taken: bool) -> list[Fact]:
    op = cond.owner
    if isinstance(op, ops.Binary) and op.kind == "and" and taken:
        return edge_facts(op.operands[0], True) + edge_facts(op.operands[1], True)
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
    ka, _, ca = affine(a)
    kb, _, cb = affine(b)
    slack = 0 if pred == "lt" else 1  # a <= b is a < b + 1
    if ka is not None and kb is not None:
        return [("lt", ka, kb, cb - ca + slack)]
    if ka is None and kb is not None:  # constant < b: b >= constant + 1
        return [("ge", kb, ca - cb + 1 - slack)]
    return []


def proves(op: ops.BoundsCheck, known: set[Fact], terms: dict[Block, list[ops.Op]]) -> bool:
    """Whether the facts known here prove the single check `op`."""
    idx, n = op.operands
    ki, base, d = affine(idx)
    if ki is None:
        return False
    kn = key(n)
    upper = any(f[0] == "lt" and f[1] == ki and f[2] == kn and f[3] + d <= 0 for f in known)
    if not upper:
        return False
    if d >= 0 and base is not None and nonneg(base, terms):
        return True
    return any(f[0] == "ge" and f[1] == ki and f[2] + d >= 0 for f in known)


def run(fn: Function, options: PassOptions) -> None:
    preds = fn.predecessors()
    terms = {b: [p.terminator for p in ps if p.terminator is not None] for b, ps in preds.items()}
    doms = dominators(fn)
    wider = _length_order(fn, options.len_relations)
    order = fn.reverse_postorder()
    position = {b: i for i, b in enumerate(order)}
    # Facts established on entry to each block with a single predecessor. Reverse postorder:
    # a short-circuit condition reads the facts of the blocks before its join.
    entry_facts: dict[Block, list[Fact]] = {}

    def known_at(b: Block) -> set[Fact]:
        return {f for d in doms.get(b, ()) for f in entry_facts.get(d, ())}

    def branch_facts(cond: Value, taken: bool, b: Block) -> list[Fact]:
        """What `cond == taken` at the end of `b` proves; sees through `and`/`or` joins."""
        if cond.owner is not b:
            return edge_facts(cond, taken)
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
            facts = set(edge_facts(v, taken)) | known_at(p)
            proved = facts if proved is None else proved & facts
        return list(proved or ())

    for b in order:
        term = b.terminator
        if isinstance(term, ops.CondBr) and term.if_true is not term.if_false:
            for succ, taken in ((term.if_true, True), (term.if_false, False)):
                if len(preds[succ]) == 1:
                    entry_facts[succ] = branch_facts(term.cond, taken, b)
    for b in fn.blocks:
        known: set[Fact] = set()
        for d in doms.get(b, ()):
            for f in entry_facts.get(d, ()):
                if f[0] == "lt":  # x < m + c, and m <= each length wider than it
                    known.update(("lt", f[1], m2, f[3]) for m2 in wider.get(f[2], {f[2]}))
                else:
                    known.add(f)
        if not known:
            continue
        kept = []
        for op in b.ops:
            if isinstance(op, ops.BoundsCheck) and len(op.sites) == 1 and proves(op, known, terms):
                options.checks_removed += 1
                continue
            kept.append(op)
        b.ops = kept


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
