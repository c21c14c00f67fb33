"""The kernels `fearless demo` compiles and runs, written as a user writes them (DESIGN section 2).

They live in a module of their own so that they have a real source file: the compiler reads
it, and the demo's BorrowError diagnostic points at a line of it.
No `from __future__ import annotations` here: kernel annotations are evaluated as written.
"""

import fearless as fl
from fearless import simt


@simt.kernel
def vecadd(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()  # ThreadIndex: the only key that opens a DisjointSlice
    if i < len(c):
        c[i] = a[i] + b[i]


@simt.kernel
def saxpy(alpha: fl.f32, x: simt.Slice[fl.f32], y: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(y):
        y[i] = alpha * x[i] + y[i]  # a thread may read the element it owns, then write it
