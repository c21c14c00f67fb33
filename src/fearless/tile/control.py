"""Structured control flow for the Tile frontend: `for i in range(...)` and `if` on scalars.

Both lower to ops with nested blocks (ir/tile/ops.py) and carry the variables they assign as results:

    for     `tile.for` carries the names the body assigns that exist before the loop. A name
            that starts as a literal (`acc = 0`) takes the type the body gives it: the loop is
            lowered again with that type from the start (frontend/loops.py), also when an `if`
            inside the body is what gives it the type. A `range` whose step is not a positive
            literal (or `tile.num_blocks`) counts its trips (`lower_for`); the loop variable
            has no value after the loop (`Undefined`, E0381 at a use).
    a if c else b   (`lower_ifexp`) as cuTile Python: `tile.where(c, a, b)`, elementwise, for
            a bool tile or 0-d condition that is known only at run time (both arms are
            evaluated: kernel expressions have no effects); a compile-time condition picks
            one arm (frontend/core.py).
    if      a compile-time condition (a literal, a `tile.Const`) picks one branch statically.
            A run-time one must be a 0-d bool tile (`k < n`, `tile.block_id(0) == 0`); it
            becomes `tile.if`, whose two blocks yield the names either branch assigns that
            live after it: those that existed before, and those both branches assign. A name
            only one branch assigns is `Undefined` after the `if` (E0381 where it is used).
            Both branches must give a carried name one type; a literal takes the other's.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .. import dtypes
from ..errors import CompileError, KernelTypeError, Location
from ..frontend.core import unsupported
from ..frontend.loops import Jumps, LoopRetry, Token, assigned_names, jumps_in
from ..frontend.values import PyObj, Undefined, Weak
from ..ir.core import Block, Value
from ..ir.tile import ops
from ..ir.tile.types import TileType, tile_type
from .jumps import BREAK, CONTINUE, flag, guarded, loop_scope, not_broken
from .rules import TileRules


def assign_loc(
    lw: TileRules, stmts: Sequence[ast.stmt], name: str, last: bool = False
) -> Location | None:
    """Where `stmts` assign `name` (the first assignment, or the last); None if they do not."""
    found: list[ast.stmt] = []
    for stmt in stmts:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Assign | ast.AugAssign):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                names = (t for tgt in targets for t in ast.walk(tgt))
                if any(isinstance(t, ast.Name) and t.id == name for t in names):
                    found.append(n)
    if not found:
        return None
    found.sort(key=lambda n: (n.lineno, n.col_offset))
    return lw.loc(found[-1] if last else found[0])


# ----------------------------------------------------------------------------------- for


def lower_for(lw: TileRules, node: ast.For, target: str, bounds: list[ast.expr]) -> None:
    """`for i in range(...)`. A step that is a positive literal (or Const), or
    `tile.num_blocks(axis)` (a grid-stride loop), is Tile IR's `for` as it is; any other
    step (negative, or known only at run time) counts the trips, `for t in range(0, trips)`
    with `i = lo + t * step`, since Tile IR's `for` takes a positive step only (it stops at
    its upper bound). A literal step of 0 is an error, as Python's ValueError; a run-time
    step of 0 runs no iteration."""
    counted: list[Value] = []  # (lo, step) of a loop that counts its trips

    def range_bounds() -> tuple[Value, Value, Value]:
        loc = lw.loc(node)
        raw: list[Any] = []
        values: list[Value] = []
        for a in bounds:  # each bound's ops, then its conversion, in order
            raw.append(lw.expr(a))
            values.append(lw.index(raw[-1], lw.loc(a)))
        if len(values) == 1:
            values.insert(0, lw.const(0, dtypes.i32, loc))
        if len(values) == 2:
            values.append(lw.const(1, dtypes.i32, loc))
        lo, hi, step = values
        known = raw[2] if len(raw) == 3 and isinstance(raw[2], Weak) else None
        if known is not None and known.value == 0:
            raise CompileError(
                "range() step must not be zero",
                lw.loc(bounds[2]),
                label="a step of 0",
                help="step by a nonzero number, e.g. `range(n - 1, -1, -1)` to count down",
            )
        counted.clear()
        if len(raw) < 3 or (known is not None and known.value > 0) or _grid_extent(step):
            return lo, hi, step
        counted.extend((lo, step))
        trips = _trips(lw, lo, hi, step, known, loc)
        zero, one = (lw.const(c, dtypes.i64, loc) for c in (0, 1))
        return zero, trips, one

    def bind(t: Value) -> Value:
        if not counted:
            return t
        lo, step = counted
        loc = lw.loc(node.target)
        t32 = lw.emit(ops.Cast(t, dtypes.i32, loc))  # wraps, as `lo + t * step` then does,
        i = lw.binary("add", lo, lw.binary("mul", t32, step, loc), loc)  # to the i32 value
        assert isinstance(i, Value)
        return i

    lower_loop(lw, node, target, range_bounds, bind)


def _grid_extent(v: Value) -> bool:
    """Whether `v` is `tile.num_blocks(axis)`, 1 or more: a grid-stride loop's step."""
    return isinstance(v.owner, ops.NumBlocks)


def _trips(
    lw: TileRules, lo: Value, hi: Value, step: Value, known: Weak | None, loc: Location
) -> Value:
    """The iterations of `range(lo, hi, step)` (i32 bounds), `max(0, ceil((hi - lo) /
    step))` in i64 (2**32 - 1 at most), for either sign of `step`; 0 when `step` is 0 (an
    integer `x // 0` and `x % 0` are 0)."""
    lo64, hi64 = (lw.emit(ops.Cast(v, dtypes.i64, loc)) for v in (lo, hi))
    step64 = (
        lw.const(known.value, dtypes.i64, loc)
        if known is not None
        else lw.emit(ops.Cast(step, dtypes.i64, loc))
    )
    d = lw.binary("sub", hi64, lo64, loc)
    trips = lw.binary("max", lw.ceil_div(d, step64, loc), Weak(0), loc)
    assert isinstance(trips, Value)
    return trips


def lower_loop(
    lw: TileRules,
    node: ast.For,
    target: str,
    bounds: Callable[[], tuple[Value, Value, Value]],
    bind: Callable[[Value], Any] | None = None,
) -> None:
    """A `tile.for` over `bounds()` (lo, hi, step; emitted before the loop), its body
    `node.body` seeing `target` as the induction variable, or as `bind(iv)` (emitted at the
    top of the body): `range` loops, and `part.tiles()` (persistent.py)."""
    lw.lower_retrying(node, lambda token: _lower_for(lw, node, token, target, bounds, bind))


def _lower_for(
    lw: TileRules,
    node: ast.For,
    token: Token,
    target: str,
    bounds: Callable[[], tuple[Value, Value, Value]],
    bind: Callable[[Value], Any] | None,
) -> None:
    loc = lw.loc(node)
    lo, hi, step = bounds()
    jumps = jumps_in(node.body)
    with loop_scope(lw, jumps, loc):
        carried, init, weak_init, dropped = _carried(lw, node.body, token, target, loc, jumps)
        body = Block("for.body")
        iv = body.add_arg(TileType(tile_type(lo).dtype), lw.loc(node.target), target)
        args = _carried_args(lw, body, carried, init, weak_init, token, loc)
        outer_block, outer_env = lw.block, lw.env
        lw.block = body
        lw.env = {**outer_env, **dropped}
        lw.env[target] = bind(iv) if bind is not None else iv
        lw.env.update(zip(carried, args, strict=True))
        _lower_loop_body(lw, node.body, jumps, loc, is_for=True)
        body.append(ops.Yield(_next_values(lw, node.body, carried, args, loc, token), loc))
        lw.block, lw.env = outer_block, outer_env
    op = ops.For(lo, hi, step, init, body, loc)
    lw.block.append(op)
    _bind_results(lw, carried, op.results)
    lw.env.update(dropped)
    # Python keeps the last value of the loop variable (or, after no iteration, the one
    # before); a tile `for` does not carry it: after the loop it has no value (E0381 at a use).
    lw.env[target] = Undefined(
        target,
        loc,
        f"`{target}` is the variable of the `for` at line {loc.line}: tile kernels do not "
        "keep it after the loop (Python keeps its last value); compute what you need from "
        "the bounds, e.g. `last = n - 1`",
    )


def _bind_results(lw: TileRules, carried: list[str], results: Sequence[Value]) -> None:
    """The loop's carried names after it; its own break flag stays inside (loop_scope has put
    the enclosing loop's back)."""
    for name, r in zip(carried, results, strict=True):
        if name != BREAK:
            lw.env[name] = r


def _lower_loop_body(
    lw: TileRules, stmts: list[ast.stmt], jumps: Jumps, loc: Location, *, is_for: bool
) -> None:
    """An iteration: its continue flag false at the top; a `for` that breaks runs it under
    `if not break:` (a `while` tests the flag in its condition instead)."""
    if jumps.continues:
        lw.env[CONTINUE] = flag(lw, False, loc)
    if jumps.breaks and is_for:
        lower_if(lw, guarded(stmts), not_broken(lw, loc))
    else:
        lw.lower_body(stmts)


def _carried(
    lw: TileRules,
    stmts: list[ast.stmt],
    token: Token,
    target: str | None,
    loc: Location,
    jumps: Jumps,
) -> tuple[list[str], list[Value], set[str], dict[str, Undefined]]:
    """The names a loop body assigns that exist before it (carried through the loop), their
    values before it, and those that start as literals (typed by the loop's retry); the break
    flag first when the body breaks. Last, those a retry found the body leaves without a
    value (the variable of a `for` inside): not carried, and without a value in the loop
    (from its second iteration on, Python's would be the inner loop's last) and after it."""
    carried: list[str] = []
    init: list[Value] = []
    weak_init: set[str] = set()
    dropped: dict[str, Undefined] = {}
    for name in [BREAK] * jumps.breaks + list(assigned_names(stmts)):
        if name == target or not lw.defined(name):
            continue
        v = lw.env[name]
        hint = lw.loop_types.hint(token, name)
        if isinstance(hint, Undefined):
            dropped[name] = hint
            continue
        if isinstance(v, Weak):
            weak_init.add(name)
            t = hint or TileType(dtypes.tile_literal_default(v.value))
            v = lw.emit(ops.Constant(lw.literal(v, t.dtype, loc), t, loc))
        elif not isinstance(v, Value) or not isinstance(v.type, TileType):
            raise unsupported(f"reassigning `{name}` (a compile-time value) inside a loop", loc)
        carried.append(name)
        init.append(v)
    return carried, init, weak_init, dropped


def _carried_args(
    lw: TileRules,
    block: Block,
    carried: list[str],
    init: list[Value],
    weak_init: set[str],
    token: Token,
    loc: Location,
) -> list[Value]:
    """`block`'s arguments for the carried values (a literal's type marked as a guess)."""
    args = [block.add_arg(v.type, loc, n) for n, v in zip(carried, init, strict=True)]
    for name, a in zip(carried, args, strict=True):
        if name in weak_init:
            lw.loop_types.guessed(a, token, name)
    return args


def _next_values(
    lw: TileRules,
    stmts: list[ast.stmt],
    carried: list[str],
    args: list[Value],
    loc: Location,
    token: Token,
) -> list[Value]:
    """The carried values at the end of an iteration, each of its argument's type; a name
    the iteration leaves without a value lowers the loop again without it (`_carried`)."""
    nxt: list[Value] = []
    for name, a in zip(carried, args, strict=True):
        v = lw.env[name]
        if isinstance(v, Undefined):
            raise LoopRetry(token, name, v)
        if isinstance(v, Weak):
            at = tile_type(a)
            v = lw.emit(ops.Constant(lw.literal(v, at.dtype, loc), at, loc))
        if not isinstance(v, Value) or v.type != a.type:
            got = v.type if isinstance(v, Value) else type(v).__name__
            if isinstance(got, TileType):
                lw.loop_types.retry_if_guessed(a, got)
            raise KernelTypeError(
                f"`{name}` changes type in the loop: {a.type} before, {got} after an iteration",
                assign_loc(lw, stmts, name) or loc,
                help=f"give `{name}` its final type before the loop, e.g. "
                f"`{name} = tile.zeros(shape, dtype)` or `.astype(...)`",
            )
        nxt.append(v)
    return nxt


# --------------------------------------------------------------------------------- while


def lower_while(lw: TileRules, node: ast.While) -> None:
    """`while cond:` on a run-time 0-d bool, carrying the names the body assigns (as `for`
    does); the condition is evaluated before each iteration with the carried values."""
    if node.orelse:
        raise unsupported("`while ... else`", lw.loc(node), help="put the `else` part after")
    lw.lower_retrying(node, lambda token: _lower_while(lw, node, token))


def _lower_while(lw: TileRules, node: ast.While, token: Token) -> None:
    loc = lw.loc(node)
    jumps = jumps_in(node.body)
    with loop_scope(lw, jumps, loc):
        carried, init, weak_init, dropped = _carried(lw, node.body, token, None, loc, jumps)
        cond, body = Block("while.cond"), Block("while.body")
        cond_args = _carried_args(lw, cond, carried, init, weak_init, token, loc)
        args = _carried_args(lw, body, carried, init, weak_init, token, loc)
        outer_block, outer_env = lw.block, lw.env
        try:
            outer = {**outer_env, **dropped}
            lw.block, lw.env = cond, {**outer, **dict(zip(carried, cond_args, strict=True))}
            cond.append(ops.Yield([_while_condition(lw, node, jumps)], loc))
            lw.block, lw.env = body, {**outer, **dict(zip(carried, args, strict=True))}
            _lower_loop_body(lw, node.body, jumps, loc, is_for=False)
            body.append(ops.Yield(_next_values(lw, node.body, carried, args, loc, token), loc))
        finally:
            lw.block, lw.env = outer_block, outer_env
    op = ops.While(init, cond, body, loc)
    lw.block.append(op)
    _bind_results(lw, carried, op.results)
    lw.env.update(dropped)


def _while_condition(lw: TileRules, node: ast.While, jumps: Jumps) -> Value:
    """The test, `and not break` when the body breaks; `while True:` needs a `break`."""
    loc = lw.loc(node.test)
    test = lw.expr(node.test)
    if not isinstance(test, Value):
        if not (jumps.breaks and isinstance(test, Weak) and test.value):
            raise unsupported(
                "a `while` whose condition is known at compile time",
                loc,
                help="loop while a run-time scalar holds, e.g. `while k < n:`, or write "
                "`while True:` with a `break` in the body",
            )
        return not_broken(lw, loc)
    c = _condition(lw, test, node.test)
    if jumps.breaks:
        c = lw.binary("and", c, not_broken(lw, loc), loc)
    assert isinstance(c, Value)
    return c


# ------------------------------------------------------------------------------------ if


def lower_if(lw: TileRules, node: ast.If, cond: Any) -> None:
    """An `if` on a run-time condition (a compile-time one picked its branch already)."""
    c = _condition(lw, cond, node.test)
    loc = lw.loc(node)
    outer_block, outer_env = lw.block, lw.env
    branches: list[tuple[Block, dict[str, Any]]] = []
    lw.branch_depth += 1
    try:
        for stmts, label in ((node.body, "if.then"), (node.orelse, "if.else")):
            block = Block(label)
            lw.block, lw.env = block, dict(outer_env)
            lw.lower_body(stmts)
            branches.append((block, lw.env))
    finally:
        lw.branch_depth -= 1
        lw.block, lw.env = outer_block, outer_env
    (then_block, then_env), (else_block, else_env) = branches
    names: list[str] = []
    types: list[TileType] = []
    yields: tuple[list[Value], list[Value]] = ([], [])
    for name in dict.fromkeys([*outer_env, *then_env, *else_env]):
        before = outer_env.get(name)
        if isinstance(before, Undefined):
            before = None
        t, e = then_env.get(name), else_env.get(name)
        if t is before and e is before:
            continue  # neither branch assigns it
        if _undefined(t) or _undefined(e):
            # Assigned in one branch only (it did not exist before): not a value after the `if`.
            lw.env[name] = Undefined(
                name, loc, f"only one branch of the `if` at line {loc.line} assigns it"
            )
            continue
        if _same_static(t, e):
            lw.env[name] = t  # the same compile-time value either way: it stays one
            continue
        if not _carriable(t) or not _carriable(e):
            if before is None:
                lw.env[name] = Undefined(
                    name,
                    loc,
                    f"the branches of the `if` at line {loc.line} give it different "
                    "compile-time values",
                )
                continue
            raise unsupported(
                f"reassigning `{name}` (a compile-time value) inside an `if` on a runtime value",
                assign_loc(lw, [*node.body, *node.orelse], name) or loc,
                help="only tiles can differ between the branches: assign it before the `if`",
            )
        rt = _merge_type(lw, node, name, t, e)
        for (block, _), stmts, v, out in zip(
            branches, (node.body, node.orelse), (t, e), yields, strict=True
        ):
            if isinstance(v, Weak):  # a literal takes the other branch's type
                at = assign_loc(lw, stmts, name, last=True) or loc
                v = block.append(ops.Constant(lw.literal(v, rt.dtype, at), rt, at)).result
            assert isinstance(v, Value)
            out.append(v)
        names.append(name)
        types.append(rt)
    then_block.append(ops.Yield(yields[0], loc))
    else_block.append(ops.Yield(yields[1], loc))
    op = ops.If(c, types, then_block, else_block, loc)
    lw.block.append(op)
    for name, r in zip(names, op.results, strict=True):
        lw.env[name] = r


def _undefined(v: Any) -> bool:
    return v is None or isinstance(v, Undefined)


def _same_static(a: Any, b: Any) -> bool:
    """Whether two compile-time values are the same (then the name needs no carrying)."""
    if isinstance(a, Weak) and isinstance(b, Weak):
        return type(a.value) is type(b.value) and a.value == b.value
    if isinstance(a, PyObj) and isinstance(b, PyObj):
        return a.obj is b.obj
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(
            x is y or _same_static(x, y) for x, y in zip(a, b, strict=True)
        )
    return False


def _carriable(v: Any) -> bool:
    return isinstance(v, Weak) or (isinstance(v, Value) and isinstance(v.type, TileType))


def _condition(lw: TileRules, cond: Any, test: ast.expr) -> Value:
    """The `if`'s condition as a 0-d bool tile, or an error that says how to write one."""
    loc = lw.loc(test)
    src = ast.unparse(test)
    if isinstance(cond, Value) and isinstance(cond.type, TileType):
        t = cond.type
        if t.shape != ():
            raise KernelTypeError(
                f"an `if` condition must be a scalar, but `{src}` is a {t}",
                loc,
                label="a tile, not one value",
                help="an `if` takes one path for the whole block: choose per element with "
                "`tile.where(cond, x, y)`, or reduce the tile to one value first "
                "(`tile.max(...)`, `tile.sum(...)`)",
            )
        if not t.dtype.is_bool:
            raise KernelTypeError(
                f"a condition must be bool, found {t.dtype.name}",
                loc,
                label=f"this is {t.dtype.name}",
                help=f"compare it: `if {src} != 0:`",
            )
        return cond
    what = f"the array `{cond.name}`" if isinstance(cond, Value) else "this value"
    raise KernelTypeError(
        f"an `if` condition must be a bool scalar, found {what}",
        loc,
        help="compare scalars, e.g. `if k < n:`",
    )


def _merge_type(lw: TileRules, node: ast.If, name: str, t: Any, e: Any) -> TileType:
    """The type `name` has after the `if`, given its value at the end of each branch."""
    if isinstance(t, Weak) and isinstance(e, Weak):
        return TileType(lw.unify(t, e, lw.loc(node), f"the branches of `{name}`"))
    if isinstance(t, Weak) or isinstance(e, Weak):
        v = e if isinstance(t, Weak) else t
        return tile_type(v)
    if t.type == e.type:
        return tile_type(t)
    # A loop variable that started as a literal takes the type this branch gives it.
    for v, other in ((t, e), (e, t)):
        lw.loop_types.retry_if_guessed(v, tile_type(other))
    then_loc = assign_loc(lw, node.body, name, last=True)
    else_loc = assign_loc(lw, node.orelse, name, last=True)
    if then_loc is not None and else_loc is not None:
        where, got = else_loc, e.type
        note = f"it is {t.type} at the end of the `if` branch (line {then_loc.line})"
    elif else_loc is None:
        where, got = then_loc or lw.loc(node), t.type
        note = f"it is {e.type} before the `if`, and stays so when the branch is not taken"
    else:
        where, got = else_loc, e.type
        note = f"it is {t.type} before the `if`, and stays so when the `else` is not taken"
    _mismatch(name, t.type, e.type, where, got, note)


def _mismatch(name: str, a: Any, b: Any, loc: Location, got: Any, note: str) -> NoReturn:
    raise KernelTypeError(
        f"`{name}` has a different type in each branch of the `if`: {a} and {b}",
        loc,
        label=f"this is {got}",
        notes=[note],
        help=f"give `{name}` one type on both paths, e.g. with `.astype(...)` or "
        "`tile.broadcast_to(...)`",
    )


def lower_ifexp(lw: TileRules, node: ast.IfExp, cond: Any) -> Value:
    """`a if c else b` on a run-time `c`: an elementwise select, as `tile.where(c, a, b)`."""
    loc = lw.loc(node)
    c_loc = lw.loc(node.test)
    if not (isinstance(cond, Value) and isinstance(cond.type, TileType)):
        what = f"the array `{cond.name}`" if isinstance(cond, Value) else "this value"
        raise KernelTypeError(
            f"the condition of a conditional expression must be a bool tile, found {what}",
            c_loc,
            help="compare tiles, e.g. `x if x > 0 else 0.0`",
        )
    if not cond.type.dtype.is_bool:
        raise KernelTypeError(
            f"a condition must be bool, found {cond.type.dtype.name}",
            c_loc,
            label=f"this is {cond.type.dtype.name}",
            help=f"compare it: `... if {ast.unparse(node.test)} != 0 else ...`",
        )
    arms = [lw.expr(node.body), lw.expr(node.orelse)]
    for arm, n in zip(arms, (node.body, node.orelse), strict=True):
        if not (
            isinstance(arm, Weak) or (isinstance(arm, Value) and isinstance(arm.type, TileType))
        ):
            raise KernelTypeError(
                f"both arms of a conditional expression must be tiles or numbers, but "
                f"`{ast.unparse(n)}` is not one",
                lw.loc(n),
                help="choose between two tiles (or numbers): `x if c else y`",
            )
    dt = lw.unify(arms[0], arms[1], loc, "the arms of a conditional expression")
    body, orelse = (
        lw.tile_value(a, lw.loc(n), dt) for a, n in zip(arms, (node.body, node.orelse), strict=True)
    )
    c, vx, vy = lw.operands([cond, body, orelse], dt, loc)
    return lw.emit(ops.Select(c, vx, vy, loc))
