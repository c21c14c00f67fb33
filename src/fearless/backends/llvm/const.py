"""SIMT constant arrays -> LLVM: `const.array`, a module-level NumPy array baked into the kernel.

The handler is registered with `registry.lowers` and runs on `lower.py`'s `_KernelLowering`
(`lw`: its module and the `arrays` map).

    %t = const.array {name='LUT', data='0000803f...'} : Const[f32, 4]
        ->  @__const_LUT_1f2e3d4c5b6a7988 = internal addrspace(4) constant [16 x i8]
                c"\\00\\00\\80?...", align 16
            (a load of %t indexes it as a read-only array parameter: a GEP on the global by
            element, the static extents as `len`; PTX `ld.const`)

The global holds the bytes as they are (C order, little-endian, as the simulator reads them),
and is named after the user's array and a hash of its bytes: the variants of one kernel (plain,
coarsened, fast), which share a module, share one global per array.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from llvmlite import ir

from ...ir.simt import ops
from .registry import lowers
from .shared import SharedArray
from .types import I8, I64

CONSTANT_ADDRSPACE = 4  # NVPTX's constant memory (`.const`)


@lowers(ops.ConstArray)
def lower_const_array(lw: Any, op: ops.ConstArray) -> None:
    raw = op.raw()
    symbol = re.sub(r"[^A-Za-z0-9_]", "_", op.name) or "array"
    name = f"__const_{symbol}_{hashlib.sha256(raw).hexdigest()[:16]}"
    g = lw.module.globals.get(name)
    if g is None:
        storage = ir.ArrayType(I8, len(raw))
        g = ir.GlobalVariable(lw.module, storage, name, addrspace=CONSTANT_ADDRSPACE)
        g.linkage = "internal"
        g.global_constant = True
        g.initializer = ir.Constant(storage, bytearray(raw))
        g.align = 16
    extents = tuple(ir.Constant(I64, d) for d in op.shape)
    lw.arrays[op.result] = SharedArray(g, extents, readonly=True)
