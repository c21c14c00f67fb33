"""The Tile track's pass pipeline over tile IR: verify, remove dead ops, verify again.

Passes are plain functions `run(fn) -> None`, listed in order in `PIPELINE`. Ownership needs
no pass: `tile.store` has no index operand (ops.py), so a block can only write its own tile.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import config, dtypes
from ..errors import InternalError
from ..ir import tile_ops as ops
from ..ir.core import Block, Effect, Function, Value
from ..ir.tile_types import ArrayParamType, TileType


def verify(fn: Function) -> None:
    """Operands are defined before use, in scope; each block ends with one terminator."""
    defined: set[Value] = set(fn.params)

    def walk(block: Block, scope: set[Value]) -> None:
        scope = set(scope) | set(block.args)
        for i, op in enumerate(block.ops):
            for v in op.operands:
                if v not in scope:
                    raise InternalError(f"{op.opname} at {op.loc} uses an undefined value {v}")
            if op.is_terminator and i != len(block.ops) - 1:
                raise InternalError(f"{op.opname} at {op.loc} is not the last op of its block")
            for r in op.results:
                if not isinstance(r.type, TileType | ArrayParamType):
                    raise InternalError(f"{op.opname} at {op.loc} makes a non-tile {r.type}")
            for region in ops.regions(op):
                walk(region, scope)
                term = region.terminator
                if isinstance(op, ops.For):
                    want = [a.type for a in op.body.args[1:]]
                elif isinstance(op, ops.While) and region is op.cond:
                    want = [TileType(dtypes.bool_, ())]
                else:
                    want = [r.type for r in op.results]
                if not isinstance(term, ops.Yield) or [v.type for v in term.operands] != want:
                    raise InternalError(f"{op.opname} at {op.loc} yields the wrong values")
            if isinstance(op, ops.If):
                t = op.operands[0].type
                if not (isinstance(t, TileType) and t.shape == () and t.dtype.is_bool):
                    raise InternalError(f"tile.if at {op.loc} branches on a {t}")
                if op.then_block.args or op.else_block.args:
                    raise InternalError(f"tile.if at {op.loc} has block arguments")
            scope.update(op.results)
        if not block.ops or not block.ops[-1].is_terminator:
            raise InternalError(f"block {block.label} has no terminator")

    walk(fn.entry, defined)


def dce(fn: Function) -> None:
    """Remove pure and read-only ops whose results nobody uses (innermost first, to a fixpoint).

    %1 = tile.constant {value=0} : tile<f32>     <- a retried loop's discarded init

    Loops and ifs stay (they may store), and so do the values their blocks yield.
    """

    def used_in(block: Block, used: set[Value]) -> None:
        for op in block.ops:
            used.update(op.operands)
            for region in ops.regions(op):
                used_in(region, used)

    def sweep(block: Block, used: set[Value]) -> bool:
        changed = False
        keep = []
        for op in block.ops:
            for region in ops.regions(op):
                changed |= sweep(region, used)
            dead = op.effect in (Effect.PURE, Effect.READ) and not any(
                r in used for r in op.results
            )
            if dead:
                changed = True
            else:
                keep.append(op)
        block.ops = keep
        return changed

    while True:
        used: set[Value] = set()
        used_in(fn.entry, used)
        if not sweep(fn.entry, used):
            return


PIPELINE: list[Callable[[Function], None]] = [verify, dce, verify]


def run_pipeline(fn: Function) -> None:
    """Run `PIPELINE`: the frontend's IR is always verified (the first entry); the verifier's
    later runs, after each pass, only under FEARLESS_VERIFY=1."""
    for i, p in enumerate(PIPELINE):
        if p is verify and i > 0 and not config.verify_each_pass():
            continue
        p(fn)
