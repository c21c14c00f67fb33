"""Prepared and configured launches held in variables."""

from mykernels import vecadd

import fearless as fl

a = fl.zeros(1024, dtype=fl.f32)
b = fl.zeros(1024, dtype=fl.f32)
c = fl.empty(1024, dtype=fl.f32)

prep = vecadd.prepare(grid=4, block=256)
vecadd(prep, a, b, c)
vecadd(prep, a, b, a, stream=None)  # error[E0502] col 20: cannot borrow `a` as mutable because
prep(a, c, c)  # error[E0502] col 12: cannot borrow `c` as mutable
vecadd.prepare(4, 256)(b, b, b)  # error[E0502] col 30: cannot borrow `b` as mutable

launch = vecadd[4, 256]
launch(a, b, c)
launch(b, a, b)  # error[E0502] col 14: cannot borrow `b` as mutable
launch = None
