"""`break` and `continue` in Tile loops, as two hidden 0-d bool flags in the environment.

A loop whose body jumps lowers to the structured ops it would have without jumps (`tile.for`,
`tile.while`, `tile.if`); the jumps become data:

    break       sets the loop's break flag, which the loop carries. A `for` runs its body
                under `if not break:` (the remaining iterations do nothing); a `while` adds
                `and not break` to its condition, so it exits at the next test. `while True:`
                with a `break` is a loop on the flag alone.
    continue    sets the iteration's continue flag, false again at the top of each iteration.

After a statement that may have jumped (an `if` whose branch breaks, say), the rest of the
block runs under `if not (break or continue):`, as a `tile.if` that carries what the rest
assigns. Statements after a `break` or `continue` in the same block are unreachable and not
lowered. The flags' names cannot be written in Python, so they never meet a user's name; each
loop saves and restores the enclosing loop's flags, so a jump leaves its innermost loop only.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .. import dtypes
from ..errors import Location
from ..frontend.loops import Jumps, jumps_in
from ..ir.core import Value
from ..ir.tile import ops

if TYPE_CHECKING:
    from .rules import TileRules

BREAK = "<break>"
CONTINUE = "<continue>"


def flag(lw: TileRules, value: bool, loc: Location) -> Value:
    return lw.const(value, dtypes.bool_, loc)


def not_broken(lw: TileRules, loc: Location) -> Value:
    """`not break` of the innermost loop: the test that keeps it running."""
    return lw.emit(ops.Unary("not", lw.env[BREAK], loc))


def not_jumped(lw: TileRules, loc: Location) -> Value:
    """`not (break or continue)` of the innermost loop's flags."""
    names = [n for n in (BREAK, CONTINUE) if isinstance(lw.env.get(n), Value)]
    jumped = lw.env[names[0]]
    for name in names[1:]:
        jumped = lw.binary("or", jumped, lw.env[name], loc)
    return lw.emit(ops.Unary("not", jumped, loc))


@contextmanager
def loop_scope(lw: TileRules, jumps: Jumps, loc: Location) -> Iterator[None]:
    """Lower one loop with `jumps` as the innermost loop's: a break flag (false) before the
    loop when it breaks, the enclosing loop's flags put back after it."""
    saved = {n: lw.env.get(n) for n in (BREAK, CONTINUE)}
    outer = lw.jumps
    for name in (BREAK, CONTINUE):
        lw.env.pop(name, None)
    if jumps.breaks:
        lw.env[BREAK] = flag(lw, False, loc)
    lw.jumps = jumps
    try:
        yield
    finally:
        lw.jumps = outer
        for name, value in saved.items():
            if value is None:
                lw.env.pop(name, None)
            else:
                lw.env[name] = value


def lower_jumping_body(
    lw: TileRules,
    stmts: Sequence[ast.stmt],
    lower_stmt: Callable[[ast.stmt], None],
    lower_if: Callable[[ast.If, Value], None],
) -> None:
    """Lower a block of a loop body that jumps: each statement, and once one may have jumped,
    the rest under `if not (break or continue):` (through `lower_if`, control.py's)."""
    for i, stmt in enumerate(stmts):
        loc = lw.loc(stmt)
        if isinstance(stmt, ast.Break | ast.Continue):
            lw.env[BREAK if isinstance(stmt, ast.Break) else CONTINUE] = flag(lw, True, loc)
            return  # the rest of the block is unreachable
        lower_stmt(stmt)
        rest = stmts[i + 1 :]
        if rest and jumps_in([stmt]):
            lower_if(guarded(rest), not_jumped(lw, lw.loc(rest[0])))
            return


def guarded(stmts: Sequence[ast.stmt]) -> ast.If:
    """An `if` (its test given apart, as a value) around `stmts`, at their place."""
    guard = ast.If(test=ast.Constant(True), body=list(stmts), orelse=[])
    return ast.copy_location(guard, stmts[0])
