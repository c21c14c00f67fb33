"""Cooperative groups: `simt.cg.this_grid().sync()`, numba's grid-wide barrier.

    g = simt.cg.this_grid()      # the launch's grid (numba: `cuda.cg.this_grid()`)
    g.sync()                     # every thread of every block waits here

A kernel that calls `sync()` is a *cooperative* kernel: the launcher starts it with
cuLaunchCooperativeKernel and refuses a grid larger than the GPU holds at once
(`runtime/cooperative.py`), since a block that is not resident never arrives. The rules here
are what one call shows; `grid_check.py` checks on the CFG that every thread of the grid
reaches each sync and which reads of other threads' elements the syncs make safe.
"""

from __future__ import annotations

from typing import NoReturn

from ..frontend.intrinsics import Call
from ..frontend.values import Operand, PyObj
from ..ir.simt import ops
from .ssa import SsaLowerer
from .types import host_call


def _grid_sync() -> NoReturn:
    """`simt.cg.this_grid().sync()`: wait until every thread of the grid arrives."""
    host_call("simt.cg.this_grid().sync()")


class GridGroup:
    """`simt.cg.this_grid()`: the whole grid of a cooperative launch (numba's `GridGroup`)."""

    sync = staticmethod(_grid_sync)  # one function object, so the intrinsic table finds it

    def __repr__(self) -> str:
        return "simt.cg.this_grid()"


GRID = GridGroup()


class _CooperativeGroups:
    """`simt.cg`: numba's `cuda.cg`, meaningful only inside kernels."""

    def this_grid(self) -> GridGroup:
        """`simt.cg.this_grid()`: the launch's grid, whose `sync()` is a grid-wide barrier."""
        host_call("simt.cg.this_grid()")

    def __repr__(self) -> str:
        return "simt.cg"


cg = _CooperativeGroups()


def this_grid_rule(lw: SsaLowerer, call: Call) -> Operand:
    """`simt.cg.this_grid()`: a compile-time object; only its `sync()` emits anything."""
    return PyObj(GRID, "simt.cg.this_grid()")


def grid_sync_rule(lw: SsaLowerer, call: Call) -> Operand:
    """`g.sync()`: a `grid.sync`; from here on a read of another thread's element of a
    DisjointSlice or AtomicSlice is lowered (`access.py`), for `grid_check.py` to judge."""
    lw.em.emit(ops.GridSync(call.loc))
    lw.ctx.grid_synced = True
    return PyObj(None, "None")
