"""Deep copy of an IR `Function`: new blocks, ops and values, with every use remapped.

`clone_function(fn)` gives a function that prints identically to `fn` and shares nothing
mutable with it: its blocks, block arguments, ops, results, operand lists and attribute dicts
are new objects, and every operand, branch target and block reference of the copy points into
the copy. What is immutable is shared rather than copied: types (frozen dataclasses compared
by ==), locations, names and attribute values such as kinds, constants and site tuples. So a
variant of a kernel (the fast variant, which runs the passes under other assumptions) can be
derived from the IR of the frontend without lowering the Python source again:

    base = build_kernel_ir(src, hints).fn
    fast = clone_function(base)
    run_pipeline(fast, PassOptions(len_relations=assumed))

Copying is two linear walks: the first makes every block, block argument, op and result (so a
use can refer to a value defined later in block order, as a loop's header does), the second
fills the operand lists. A value or block that `fn` references without owning it (only in IR
the verifier would reject) is kept as it is, so the copy is exactly as broken as the original.
"""

from __future__ import annotations

from typing import Any

from .core import Block, Function, Op, Value

# Attribute values that are immutable and hold no IR reference: shared, never walked.
_ATOMS = frozenset([str, int, float, bool, type(None)])


def _copy_value(v: Value, owner: Op | Block) -> Value:
    c = Value.__new__(Value)
    c.type = v.type
    c.loc = v.loc
    c.name = v.name
    c.owner = owner
    c.id = v.id
    return c


def clone_function(fn: Function) -> Function:
    """A deep copy of `fn`: same text when printed, no mutable object shared with `fn`."""
    values: dict[Value, Value] = {}
    blocks: dict[Block, Block] = {}

    new_fn = Function.__new__(Function)
    new_fn.__dict__.update(fn.__dict__)  # name, loc, and anything a pass attached
    new_fn.blocks = []
    for b in fn.blocks:
        nb = Block.__new__(Block)
        nb.__dict__ = b.__dict__.copy()  # label, id
        nb.args = []
        for a in b.args:
            na = _copy_value(a, nb)
            values[a] = na
            nb.args.append(na)
        blocks[b] = nb
        new_fn.blocks.append(nb)

    def remap(x: Any) -> Any:
        if type(x) in _ATOMS:
            return x
        if isinstance(x, Value):
            return values.get(x, x)
        if isinstance(x, Block):
            return blocks.get(x, x)
        if isinstance(x, tuple):
            return tuple(remap(e) for e in x)
        if isinstance(x, list):
            return [remap(e) for e in x]
        if isinstance(x, dict):
            return {k: remap(e) for k, e in x.items()}
        if isinstance(x, set | frozenset):
            return type(x)(remap(e) for e in x)
        return x  # other immutable values (dtypes, types, locations): shared

    # First walk: every op and result, so that the second can remap a use of a value that is
    # defined further down in block order (a loop header's use of its latch's value).
    pairs: list[tuple[Op, Op]] = []
    new = object.__new__
    for b in fn.blocks:
        nb = blocks[b]
        new_ops: list[Op] = []
        for op in b.ops:
            new_op = new(type(op))
            new_op.__dict__ = op.__dict__.copy()  # loc, and any per-op extras
            new_op.block = nb
            results = []
            for r in op.results:
                nr = _copy_value(r, new_op)
                values[r] = nr
                results.append(nr)
            new_op.results = results
            new_ops.append(new_op)
            pairs.append((op, new_op))
        nb.ops = new_ops

    get = values.get
    atoms = _ATOMS
    for op, new_op in pairs:
        operands = op.operands
        new_op.operands = list(map(get, operands, operands))
        attrs = dict(op.attrs)
        for k, v in attrs.items():
            if type(v) not in atoms:
                attrs[k] = remap(v)
        new_op.attrs = attrs
    new_fn.attrs = {k: remap(v) for k, v in fn.attrs.items()}
    return new_fn
