"""The Tile IR verifier: operands in scope, one terminator per block, tile-typed results, the
values each region yields, and tile.if's condition.

`tile/passes.py` runs it before and after its passes (the second time only under
FEARLESS_VERIFY=1). A failure is an InternalError: the frontend made IR it should not have.
"""

from __future__ import annotations

from ... import dtypes
from ...errors import InternalError
from ..core import Block, Function, Value
from . import ops
from .types import ArrayParamType, TileType


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
