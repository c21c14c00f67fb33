"""SIMT atomic kernels (add, bit ops, compare-and-swap, exchange): run on the simulator by
tests/test_simt_atomics.py and on the GPU by tests/gpu/test_simt_atomics_gpu.py."""

from __future__ import annotations

import fearless as fl
from fearless import simt


@simt.kernel
def add_old(
    x: simt.Slice[fl.i32], counts: simt.AtomicSlice[fl.i32], old: simt.DisjointSlice[fl.i32]
):
    i = simt.thread.index_1d()
    if i < len(x):
        old[i] = simt.atomic.add(counts, x[i], 1)


@simt.kernel
def int_ops(x: simt.Slice[fl.i64], a: simt.AtomicSlice[fl.i64], u: simt.AtomicSlice[fl.u32]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.max(a, 0, x[i])
        simt.atomic.min(a, 1, x[i])
        simt.atomic.sub(a, 2, x[i])
        simt.atomic.add(u, 0, fl.u32(x[i]))
        simt.atomic.sub(u, 1, 3)


@simt.kernel
def bit_ops(x: simt.Slice[fl.u32], b: simt.AtomicSlice[fl.u32], old: simt.DisjointSlice[fl.u32]):
    """numba's bitwise atomics and the wrapping counters inc and dec."""
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.and_(b, 0, x[i])
        simt.atomic.or_(b, 1, x[i])
        simt.atomic.xor(b, 2, x[i])
        old[i] = simt.atomic.inc(b, 3, 4)
        simt.atomic.dec(b, 4, 6)


@simt.kernel
def cas_max(x: simt.Slice[fl.i32], m: simt.AtomicSlice[fl.i32]):
    """A lock-free max out of compare-and-swap: retry until no other thread got in between."""
    i = simt.thread.index_1d()
    if i < len(x):
        v = x[i]
        cur = simt.atomic.cas(m, 0, 0, 0)  # reads m[0] (stores 0 only where it already is 0)
        while cur < v:
            seen = simt.atomic.cas(m, 0, cur, v)
            if seen == cur:
                break
            cur = seen


@simt.kernel
def exch_chain(last: simt.AtomicSlice[fl.i64], old: simt.DisjointSlice[fl.i64]):
    i = simt.thread.index_1d()
    if i < len(old):
        old[i] = simt.atomic.exch(last, 0, int(i))
