"""The output is also an input: the launch-time BorrowError, found without running."""

import fearless as fl
from fearless import simt


@simt.kernel(block=256)
def vecadd(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]


n = 1024
a = fl.zeros(n, dtype=fl.f32)
b = fl.zeros(n, dtype=fl.f32)
vecadd[(n + 255) // 256, 256](a, b, a)  # error[E0502] col 37: cannot borrow `a` as mutable because


def step(x, y):
    vecadd[4, 256](x, y, y)  # error[E0502] col 26: cannot borrow `y` as mutable because
    vecadd[4, 256](x, y, fl.empty(n))


class Model:
    def __init__(self):
        self.buf = fl.zeros(n)

    def forward(self, x):
        vecadd[4, 256](self.buf, x, self.buf)  # error[E0502] col 37: `self.buf` as mutable
        vecadd[4, 256](self.buf, x, self.out)
