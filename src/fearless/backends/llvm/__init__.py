"""The SIMT backend: SIMT IR -> LLVM IR (llvmlite) -> PTX.

lower.py      the visitor: SIMT IR -> one llvmlite module with the kernel ABI
registry.py   `lowers`: the handler of each op class (complete once lower.py is imported)
ptx.py        LLVM IR -> PTX: libdevice, O3, NVPTX, the ptxas check
arith.py, atomics.py, chunks.py, collectives.py, const.py, coords.py, grid.py, loops.py,
print.py, shared.py   the lowering of one family of ops each
support.py    intrinsics, libdevice prototypes, __fearless_report_oob
types.py      LLVM types and constants

This package's `__init__` imports nothing: its modules import each other by name.
"""
