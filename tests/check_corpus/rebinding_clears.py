"""Rebinding a name ends its aliasing: every launch here is clean."""

from mykernels import vecadd

import fearless as fl

a = fl.zeros(1024, dtype=fl.f32)
x = fl.zeros(1024, dtype=fl.f32)
b = a
a = fl.empty(1024, dtype=fl.f32)
vecadd[4, 256](b, x, a)
vecadd[4, 256](x, b, a)


def refresh(a, x):
    b = a
    a = fl.empty(1024, dtype=fl.f32)
    vecadd[4, 256](b, x, a)
    b = x
    x = fl.zeros(1024, dtype=fl.f32)
    vecadd[4, 256](a, b, x)
