"""The Tile IR bytecode lowering's handlers, one per tile op class (`ir/registry.py` gives the
rules).

A handler takes the `lower._Lowerer` that runs it (`lw`: its encoders `bc`, builder `b`, type
table `tt`, the `values` map and the token chain), the op and its operands' bytecode values,
and returns the result's value (a list for a multi-result op, None for none):

    @lowers(ops.Mma)
    def mma(lw, op, args): ...

`lower.py` registers most ops as methods of `_Lowerer` (decorated in the class body) and
imports `arith.py` and `indexed.py`, which register the rest, so `lowers` is complete once
`lower.py` is imported. `tile.yield` and `tile.return` have no handler: they end the block
that `_Lowerer.block` walks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...ir.registry import Registry

lowers: Registry[Callable[..., Any]] = Registry("the Tile IR bytecode lowering")
