"""Warnings only (exit status 0): views of one array, and aliasing on some paths."""

from mykernels import vecadd

import fearless as fl

a = fl.zeros(2048, dtype=fl.f32)
x = fl.zeros(1024, dtype=fl.f32)
vecadd[4, 256](a, x, a[0:1024])  # warning[E0502] col 22: `a[0:1024]` may overlap `a`
vecadd[4, 256](a[1024:], x, a[:1024])  # warning[E0502] col 29: `a[:1024]` may overlap `a[1024:]`
v = a.reshape(2, 1024)
vecadd[4, 256](a, x, v)  # warning[E0502] col 22: `v` may overlap `a`


def pick(flag):
    out = fl.empty(1024, dtype=fl.f32)
    if flag:
        out = x
    vecadd[4, 256](x, x, out)  # warning[E0502] col 26: `out` may be the same array as `x`
