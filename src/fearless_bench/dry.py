"""The dry run's building block: compile a fearless case, run it on the simulator, check it.

`--dry-run` needs no GPU and no peer: for every fearless implementation of every case it
compiles the kernels as the GPU run would (SIMT: PTX, and a cubin where ptxas is found; Tile:
a cubin through tileiras), runs them on the CPU simulator at tiny sizes, and compares with a
NumPy float64 reference. Records carry the relative error; `time` is the wall-clock seconds
the compile and the simulation took.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from . import check
from .harness import not_ok
from .model import FEARLESS_SIMT, FEARLESS_TILE, Record


def dry_record(
    case: str, family: str, impl: str, check_dtype: str, body: Callable[[], float], **params: Any
) -> Record:
    """Run `body` (compile, simulate, return the relative error) into a record."""
    t0 = time.perf_counter()
    try:
        err = body()
    except Exception as exc:
        return not_ok(case, family, impl, exc, **params)
    rec = Record(case, family, impl, "ok", params=params, rel_err=err)
    rec.time, rec.time_unit, rec.metric = time.perf_counter() - t0, "s", "s"
    rec.value = rec.time
    why = check.verdict(err, check_dtype)
    if why is not None:
        rec.status, rec.reason = "failed", f"wrong result on the simulator: {why}"
    return rec


def fearless_records(
    case: str,
    family: str,
    check_dtype: str,
    simt: Callable[[], float],
    tile: Callable[[], float],
    **params: Any,
) -> list[Record]:
    """The records of a case's two fearless implementations: `simt` run first, then `tile`."""
    return [
        dry_record(case, family, FEARLESS_SIMT, check_dtype, simt, **params),
        dry_record(case, family, FEARLESS_TILE, check_dtype, tile, **params),
    ]


def compile_simt(arch: str, *kernels: Any) -> None:
    """Compile SIMT kernels for the GPU (PTX; a cubin where ptxas is found): no GPU needed."""
    for k in kernels:
        k.compile(arch)


def grid(n: int, block: int = 256) -> int:
    return max(1, (n + block - 1) // block)
