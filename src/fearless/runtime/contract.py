"""Launch configurations and the launch contract, checked before anything runs.

Shared by the GPU launcher (with the device's limits) and the simulator (with the limits of a
compute-capability-9.0 device), so both refuse the same launches with the same messages.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..abi import Dim3, LaunchContract, ParamSpec, Requirement
from ..errors import LaunchContractError
from .location import user_location


@dataclass(frozen=True)
class Limits:
    max_threads_per_block: int
    max_block_dims: Dim3
    max_grid_dims: Dim3
    # When the kernel allows fewer threads per block than the device (registers), and why.
    kernel_max_threads: int | None = None
    kernel_limit_reason: str = ""


# What the simulator enforces: the limits of an sm_90 device.
SIM_LIMITS = Limits(1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535))


def normalize_dims(value: Any, what: str) -> Dim3:
    """An int or a 1-3 tuple of ints (NumPy ints too) as (x, y, z); else a LaunchContractError."""
    dims = value if isinstance(value, tuple | list) else (value,)
    try:
        if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) for d in dims):
            raise TypeError
        x, y, z = (*(operator.index(d) for d in dims), 1, 1)[:3]
    except TypeError:
        raise LaunchContractError(
            f"the {what} must be an int or a tuple of 1 to 3 ints, not {value!r}",
            user_location(),
            help=f"e.g. {what}=256 or {what}=(16, 16); compute counts with `//`",
        ) from None
    return (x, y, z)


def check_launch(name: str, contract: LaunchContract, g: Dim3, b: Dim3, limits: Limits) -> None:
    """Raise LaunchContractError unless grid `g` and block `b` satisfy contract and limits."""
    if contract.block is not None and b != tuple(contract.block):
        raise _error(
            f"`{name}` must be launched with block={contract.block}, not block={b}",
            f"launch with block={contract.block} (the `block=` of the kernel's decorator)",
        )
    for what, dims, maxima in (
        ("grid", g, limits.max_grid_dims),
        ("block", b, limits.max_block_dims),
    ):
        for axis, extent, limit in zip("xyz", dims, maxima, strict=True):
            if extent <= 0:
                raise _error(
                    f"the {what} has {extent} along {axis}: every dimension must be at least 1",
                    "size the grid from the data with a ceiling division, and skip the "
                    "launch when there is nothing to do",
                )
            if extent > limit:
                raise _error(
                    f"the {what} has {extent} along {axis}, above the device's limit of {limit}",
                    f"keep the {what}'s {axis} dimension at most {limit}",
                )
    threads = b[0] * b[1] * b[2]
    if contract.launch_bounds is not None and threads > contract.launch_bounds:
        raise _error(
            f"a block of {threads} threads exceeds `{name}`'s launch_bounds={contract.launch_bounds}",
            f"use at most {contract.launch_bounds} threads per block",
        )
    limit = limits.max_threads_per_block
    why = f"the device allows {limit}"
    if limits.kernel_max_threads is not None and limits.kernel_max_threads < limit:
        limit, why = limits.kernel_max_threads, limits.kernel_limit_reason
    if threads > limit:
        raise _error(
            f"a block of {threads} threads is too large: {why}",
            f"use at most {limit} threads per block",
        )
    if contract.block_1d and (b[1], b[2]) != (1, 1):
        raise _error(
            f"`{name}` writes one value per block under `if simt.threadIdx.x == 0:`, which one "
            f"thread per block takes only in a 1-D block, but the block is {b}",
            "launch with an int block, e.g. `[blocks, 256]`, or guard with "
            "`if simt.thread.block_index_1d() == 0:`, which any block shape allows",
        )
    # A kernel indexing its threads in fewer dimensions than the launch has would give two
    # threads one index, and two writers to one DisjointSlice element.
    unused = (g[1], g[2], b[1], b[2]) if contract.index_dims == 1 else (g[2], b[2])
    if contract.index_dims < 3 and unused != (1,) * len(unused):
        fn = "index_1d" if contract.index_dims == 1 else "index_2d"
        raise _error(
            f"`{name}` uses simt.thread.{fn}(), which needs a {contract.index_dims}-D launch, "
            f"but the launch is grid={g}, block={b}",
            "launch with an int grid and block, e.g. `[(n + 255) // 256, 256]`"
            if contract.index_dims == 1
            else "launch with 2-D grid and block tuples, e.g. `[(gx, gy), (16, 16)]`",
        )


def _error(message: str, help: str) -> LaunchContractError:
    return LaunchContractError(message, user_location(), help=help)


def requires_values(args: Sequence[Any], lengths: Sequence[int | None]) -> dict[str, Any]:
    """The placeholders of a Requirement's template for one launch (Python numbers)."""
    env: dict[str, Any] = {}
    for i, (a, n) in enumerate(zip(args, lengths, strict=True)):
        if n is not None:
            env[f"__len_{i}"] = n
        elif isinstance(a, numbers.Integral):  # NumPy integers too: Python ints never overflow
            env[f"__arg_{i}"] = int(a)
        elif isinstance(a, numbers.Real):
            env[f"__arg_{i}"] = float(a)
    return env


def holds(requires: Sequence[Requirement], env: dict[str, Any]) -> bool:
    """Whether every relation holds for one launch's values (see `requires_values`)."""
    return all(eval(r.template, {"__builtins__": {}}, env) for r in requires)


def check_requires(
    name: str,
    params: Sequence[ParamSpec],
    requires: Sequence[Requirement],
    args: Sequence[Any],
    lengths: Sequence[int | None],
) -> None:
    """Evaluate each `requires=` relation; the slow, general path (the simulator's)."""
    if not requires:
        return
    env = requires_values(args, lengths)
    for req in requires:
        if not eval(req.template, {"__builtins__": {}}, env):
            raise requires_error(name, params, req, env)


def requires_error(
    name: str, params: Sequence[ParamSpec], req: Requirement, env: dict[str, Any]
) -> LaunchContractError:
    parts = []
    for i, p in enumerate(params):
        if f"__len_{i}" in req.template and f"__len_{i}" in env:
            parts.append(f"len({p.name}) = {env[f'__len_{i}']}")
        if f"__arg_{i}" in req.template and f"__arg_{i}" in env:
            parts.append(f"{p.name} = {env[f'__arg_{i}']!r}")
    return LaunchContractError(
        f"this launch breaks `{name}`'s contract `{req.text}`",
        user_location(),
        notes=[f"here {', '.join(parts)}"] if parts else [],
        help=f"pass arguments for which `{req.text}` holds, or change the kernel's `requires=`",
    )
