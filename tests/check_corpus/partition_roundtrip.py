"""Partitions given back with `unpartition()`, or names rebound: every use here is fine."""

from mykernels import add

import fearless as fl

x = fl.zeros(1024, dtype=fl.f32)
y = fl.zeros(1024, dtype=fl.f32)
z = fl.empty(1024, dtype=fl.f32)
zp = z.partition((128,))
add(zp, x, y)
z = zp.unpartition()
print(z.numpy())

for _ in range(3):
    zp = z.partition((128,))
    add(zp, x, y)
    z = zp.unpartition()
print(z.numpy())

t = fl.empty(1024, dtype=fl.f32)
tp = t.partition((256,))
add(tp, x, y)
t = fl.zeros(1024, dtype=fl.f32)  # a new tensor under the old name
print(t.numpy(), [t for t in range(3)])


def step(out):
    part = out.partition((128,))
    add(part, x, y)
    out = part.unpartition()
    return out
