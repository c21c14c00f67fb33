"""The LLVM lowering's handlers, one per SIMT op class (`ir/registry.py` gives the rules).

A handler takes the `lower._KernelLowering` that runs it (`lw`: its builder, module, support
and the `values` / `arrays` maps) and the op, and returns nothing:

    @lowers(ops.AtomicRMW)
    def lower_rmw(lw, op): ...

`lower.py` registers the scalar, memory and control-flow ops as methods (decorated in the
class body) and imports every family module that registers the rest, so `lowers` is complete
once `lower.py` is imported.
"""

from __future__ import annotations

from collections.abc import Callable

from ...ir.registry import Registry

lowers: Registry[Callable[..., None]] = Registry("the LLVM lowering")
