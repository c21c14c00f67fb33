"""The grid of a Tile launch: from its Partitions' tile counts (which must agree), or as the host
chooses it for `kernel.launch(grid, ...)`; past three axes a partition's leading axes fold into
grid x (tile/order.py unfolds them), and every axis keeps within CUDA's limits.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ..abi import Signature
from ..errors import LaunchContractError
from ..runtime.location import user_location

GRID_LIMITS = (2**31 - 1, 65535, 65535)


def fold_grid(name: str, grid: tuple[int, ...]) -> tuple[int, int, int]:
    """The CUDA grid of a partition's tile counts: up to 3 axes as they are; past 3, the leading
    axes fold row-major into grid x (which takes the most blocks) and the last two are y and z
    (order.own_index unfolds them)."""
    lead = len(grid) - 2
    dims = (math.prod(grid[:lead]), *grid[lead:]) if lead > 1 else (*grid, 1, 1, 1)[:3]
    for axis, (d, limit) in enumerate(zip(dims, GRID_LIMITS, strict=True)):
        if d > limit:
            folded = (
                f" (the tile counts of axes 2..{len(grid) - 1})"
                if axis == 2 and len(grid) > 3
                else ""
            )
            raise LaunchContractError(
                f"`{name}` would need {d} blocks on grid axis {axis}{folded}, but CUDA allows "
                f"at most {limit}",
                user_location(),
                help="use larger tiles on that axis, or put the long axis first (grid x takes "
                f"up to {GRID_LIMITS[0]} blocks); a persistent kernel (`{name}.launch(grid, ...)` "
                "with `for t in out.tiles()`) takes any number of tiles",
            )
    return (int(dims[0]), int(dims[1]), int(dims[2]))


def partition_grid(kernel: str, signature: Signature, values: list[Any]) -> tuple[int, int, int]:
    """The grid of a launch: the tile counts of its Partitions, which must agree (a trailing
    axis of one tile aside), folded into CUDA's three axes."""
    grid: tuple[int, ...] | None = None
    first = ""
    for p, v in zip(signature, values, strict=True):
        if p.kind != "part":
            continue
        g = v[0].grid
        if grid is None:
            grid, first = g, p.name
        elif _without_trailing_ones(g) == _without_trailing_ones(grid):
            # (1024, 1) and (1024,) tiles are one grid: a block's index on a trailing
            # axis of one tile is 0 (issue 11)
            if fold_grid(kernel, g) != fold_grid(kernel, grid):
                raise LaunchContractError(
                    f"`{first}` ({len(grid)} axes) and `{p.name}` ({len(g)} axes) have the "
                    "same tiles but number them differently: past 3 axes a partition folds "
                    "its leading axes into grid x",
                    user_location(),
                    help="give both outputs the same number of axes (`reshape` the "
                    "smaller one before partitioning it)",
                )
            grid = g if len(g) > len(grid) else grid
        else:
            raise LaunchContractError(
                f"the partitions disagree on the grid: `{first}` has {grid} tiles, "
                f"`{p.name}` has {g}",
                user_location(),
                help="partition every output so that both have the same number of tiles per axis",
            )
    if grid is None:
        raise LaunchContractError(
            f"`{kernel}` gets no `tile.Part` (none is declared, or every optional one is "
            "None), so there is no grid to run",
            user_location(),
            help="declare the output `tile.Part[...]` and pass `out.partition(tile_shape)`, "
            f"or choose the grid: `{kernel}.launch(grid, ...)` (kernels whose outputs are "
            "`tile.Atomic`)",
        )
    return fold_grid(kernel, grid)


def check_host_grid(name: str, grid: Any) -> tuple[int, int, int]:
    """The grid of `kernel.launch(grid, ...)`: an integer (Python's, NumPy's, anything
    `operator.index` takes, never a bool) or a tuple of 1 to 3 of them, as (x, y, z)."""
    given = grid if isinstance(grid, tuple | list) else (grid,)
    try:
        if not 1 <= len(given) <= 3 or any(isinstance(d, bool | np.bool_) for d in given):
            raise TypeError
        dims = tuple(operator.index(d) for d in given)
    except TypeError:
        raise LaunchContractError(
            f"`{name}.launch(grid, ...)` takes a grid of 1 to 3 ints, not {grid!r}",
            user_location(),
            help=f"e.g. `{name}.launch(132, ...)`: one block per SM of an H200 (a count "
            "computed with `/` is a float: use `//`)",
        ) from None
    for axis, (d, limit) in enumerate(zip(dims, GRID_LIMITS, strict=False)):
        if not 1 <= d <= limit:
            raise LaunchContractError(
                f"grid axis {axis} of `{name}.launch` is {d}, outside 1..{limit}",
                user_location(),
                help="a persistent grid is usually the SM count (132 on an H200) or a multiple",
            )
    full = (*dims, 1, 1)[:3]
    return (full[0], full[1], full[2])


def _without_trailing_ones(grid: tuple[int, ...]) -> tuple[int, ...]:
    end = len(grid)
    while end > 1 and grid[end - 1] == 1:
        end -= 1
    return grid[:end]
