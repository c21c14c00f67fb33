"""SIMT atomic kernels ported from Numba's tests (2-D, u64 counters, histograms): shared by
tests/test_simt_atomics_numba.py and tests/gpu/test_simt_atomics_gpu.py."""

from __future__ import annotations

import fearless as fl
from fearless import simt


@simt.kernel
def counters_u64(
    idx: simt.Slice[fl.i64],
    lim: simt.Slice[fl.u64],
    c: simt.AtomicSlice[fl.u64],
    d: simt.AtomicSlice[fl.u64],
    old_inc: simt.DisjointSlice[fl.u64],
    old_dec: simt.DisjointSlice[fl.u64],
):
    i = simt.thread.index_1d()
    if i < len(idx):
        old_inc[i] = simt.atomic.inc(c, idx[i], lim[i])
        old_dec[i] = simt.atomic.dec(d, idx[i], lim[i])


@simt.kernel
def hist2d(
    r: simt.Slice[fl.i32],
    c: simt.Slice[fl.i32],
    h: simt.AtomicSlice[fl.i32, 2],
    old: simt.DisjointSlice[fl.i32],
):
    i = simt.thread.index_1d()
    if i < len(r):
        old[i] = simt.atomic.add(h, (r[i], c[i]), 1)


@simt.kernel
def int_ops_2d(
    col: simt.Slice[fl.i64],
    x: simt.Slice[fl.u64],
    a: simt.AtomicSlice[fl.u64, 2],
    old_inc: simt.DisjointSlice[fl.u64],
    old_cas: simt.DisjointSlice[fl.u64],
):
    """Every integer atomic on a 2-D AtomicSlice, one row per operation."""
    i = simt.thread.index_1d()
    if i < len(x):
        j = col[i]
        v = x[i]
        simt.atomic.add(a, (0, j), v)
        simt.atomic.sub(a, (1, j), v)
        simt.atomic.max(a, (2, j), v)
        simt.atomic.min(a, (3, j), v)
        simt.atomic.exch(a, (4, j), v)
        simt.atomic.and_(a, (5, j), v)
        simt.atomic.or_(a, (6, j), v)
        simt.atomic.xor(a, (7, j), v)
        old_inc[i] = simt.atomic.inc(a, (8, j), v % 7)
        simt.atomic.dec(a, (9, j), v % 5)
        old_cas[i] = simt.atomic.cas(a, (10, j), v % 3, v % 4)


@simt.kernel
def witness_2d(h: simt.AtomicSlice[fl.i64, 2], g: simt.AtomicSlice[fl.i64, 2]):
    """The 2-D ThreadIndex and `simt.grid(2)` ((x, y): x on axis 0, as numba) as indices."""
    t = simt.thread.index_2d()
    if t.row < h.shape[0] and t.col < h.shape[1]:
        simt.atomic.add(h, t, t.row * 100 + t.col)
        x, y = simt.grid(2)
        if x < g.shape[0] and y < g.shape[1]:
            simt.atomic.max(g, simt.grid(2), x * 10 + y)
