"""A program with many launches, none of them aliased: `fearless check` must pass it."""

import numpy as np
from mykernels import casts, saxpy, vecadd

import fearless as fl

n = 1 << 16
grid = (n + 255) // 256
a = fl.asarray(np.arange(n, dtype=np.float32))
b = fl.zeros(n, dtype=fl.f32)
c = fl.empty(n, dtype=fl.f32)
vecadd[grid, 256](a, b, c)
vecadd[grid, 256](a, a, c)  # the same input twice is fine: both are read-only
saxpy[grid, 256](2.0, c, a, b)
casts[grid, 256](a, fl.empty(n, dtype=fl.i32), fl.empty(n, dtype=fl.u32))

# Ping-pong buffers: swapped every step, never the same array.
src, dst = a, c
for _ in range(10):
    vecadd[grid, 256](src, b, dst)
    src, dst = dst, src

# A new output each iteration; the previous one is read.
prev = a
for _ in range(3):
    out = fl.empty(n, dtype=fl.f32)
    vecadd[grid, 256](prev, b, out)
    prev = out

if n > 1000:
    target = fl.empty(n, dtype=fl.f32)
    print("a new output")
else:
    target = c
vecadd[grid, 256](a, b, target)


def launch_all(x, y, z):
    prep = vecadd.prepare(grid=grid, block=256)
    vecadd(prep, x, y, z)
    prep(y, x, z)


launch_all(a, b, c)
print(c.numpy()[:4])
