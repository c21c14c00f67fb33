"""Remove bounds checks that a dominating guard proves.

A check `check.bounds %i, len(%a)` holds when `%i >= 0` and a guard `%i < len(%a)` was taken
on the only way here:

    ^bb0:  %t = thread.index_1d            %c = compare lt %ti, %n     cond_br %c, ^bb1, ^bb2
    ^bb1:  check.bounds %ti, %n            <- removed: ^bb1 is reached only when %c held

Facts come from the edges of `cond_br` into blocks with a single predecessor (the true edge of
`x < n`, `n > x`, `a and b`; the false edge of `x >= n`, `n <= x`); they hold in every block
that edge's target dominates. Values are compared by a key that sees through `index.int`, so
the ThreadIndex and its integer value are one quantity, and all `len(a)` of one array are one.
`requires=` relations between lengths extend the facts: with "len(a) == len(c)" (or
"len(a) >= len(c)") a guard `i < len(c)` also proves `i < len(a)`.
Non-negativity: ThreadIndex, `len`, constants >= 0, and loop counters that start >= 0 and grow
by a small constant step.
"""

from __future__ import annotations

from typing import Any

from ...ir import ops
from ...ir.analysis import dominators
from ...ir.core import Block, Function, Value
from .options import PassOptions

Fact = tuple[Any, Any]  # key(x) < key(m)
_MAX_STEP = 1 << 32


def key(v: Value) -> Any:
    op = v.owner
    if isinstance(op, ops.IndexToInt):
        return key(op.operands[0])
    if isinstance(op, ops.ThreadIndex1D):
        return ("thread.index_1d",)
    if isinstance(op, ops.ArrayLen):
        return ("len", op.operands[0])
    if isinstance(op, ops.Constant):
        return ("const", op.value)
    return v


def nonneg(
    v: Value, preds: dict[Block, list[ops.Op]], assuming: frozenset[Value] = frozenset()
) -> bool:
    op = v.owner
    if isinstance(op, ops.IndexToInt | ops.ThreadIndex1D | ops.ArrayLen):
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


def edge_facts(cond: Value, taken: bool) -> list[Fact]:
    op = cond.owner
    if isinstance(op, ops.Binary) and op.kind == "and" and taken:
        return edge_facts(op.operands[0], True) + edge_facts(op.operands[1], True)
    if not isinstance(op, ops.Compare):
        return []
    a, b = op.operands
    pred = op.pred if taken else {"ge": "lt", "le": "gt", "lt": "ge", "gt": "le"}.get(op.pred)
    if pred == "lt":
        return [(key(a), key(b))]
    if pred == "gt":
        return [(key(b), key(a))]
    return []


def run(fn: Function, options: PassOptions) -> None:
    preds = fn.predecessors()
    terms = {b: [p.terminator for p in ps if p.terminator is not None] for b, ps in preds.items()}
    doms = dominators(fn)
    wider = _length_order(fn, options.len_relations)
    # Facts established on entry to each block with a single predecessor.
    entry_facts: dict[Block, list[Fact]] = {}
    for b in fn.blocks:
        term = b.terminator
        if isinstance(term, ops.CondBr) and term.if_true is not term.if_false:
            for succ, taken in ((term.if_true, True), (term.if_false, False)):
                if len(preds[succ]) == 1:
                    entry_facts[succ] = edge_facts(term.cond, taken)
    for b in fn.blocks:
        known: set[Fact] = set()
        for d in doms.get(b, ()):
            for x, m in entry_facts.get(d, ()):
                known.update((x, m2) for m2 in wider.get(m, {m}))
        if not known:
            continue
        kept = []
        for op in b.ops:
            if isinstance(op, ops.BoundsCheck):
                idx, n = op.operands
                if (key(idx), key(n)) in known and nonneg(idx, terms):
                    options.checks_removed += 1
                    continue
            kept.append(op)
        b.ops = kept


def _length_order(fn: Function, relations: list[tuple[str, str, str]]) -> dict[Any, set[Any]]:
    """For each `len(p)` key, the length keys known to be >= it (itself included)."""
    by_name = {p.name: p for p in fn.params}
    le: dict[Any, set[Any]] = {}
    for a, op, b in relations:
        ka, kb = ("len", by_name[a]), ("len", by_name[b])
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
