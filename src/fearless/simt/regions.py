"""`with simt.unsafe():` regions: writes to outputs at any index, still bounds-checked.

Inside the region the witness rule of simt/access.py is off: a `DisjointSlice` may be read and
written at any integer index (`out[simt.grid(1)] = v`, `out[i + 1] = v`). Every access keeps
its device bounds check, and the check's site says it stands in the region, so a
KernelIndexError names it. The kernel is reported unsafe: `kernel.inspect()` (and
`fearless inspect`) print one line per region. This is the region form of the kernel-level
`unsafe=True`, which also drops the device checks (docs/design.md §1.2). A ThreadIndex still
cannot be stored (E0602); AtomicSlices are still only touched through `simt.atomic`.
"""

from __future__ import annotations

import ast
from typing import NoReturn

from ..frontend.regions import lower_unsafe
from .ssa import SsaLowerer
from .types import host_call


def unsafe() -> NoReturn:
    """`with simt.unsafe():` inside a kernel: writes at any index (still bounds-checked)."""
    host_call("with simt.unsafe():", "used")


def lower_with(lw: SsaLowerer, node: ast.With) -> None:
    """`with simt.unsafe(): body`, the only `with` a SIMT kernel has."""
    lower_unsafe(lw, node, unsafe, "simt", lw.ctx)
