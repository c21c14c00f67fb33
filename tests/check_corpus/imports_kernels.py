"""Kernels imported from a module next to this file, under every import spelling."""

import mykernels
import mykernels as mk
from mykernels import saxpy
from mykernels import vecadd as add

import fearless as fl

a = fl.zeros(1024, dtype=fl.f32)
y = fl.zeros(1024, dtype=fl.f32)
add[4, 256](a, y, y)  # error[E0502] col 19: cannot borrow `y` as mutable
saxpy[4, 256](2.0, a, y, a)  # error[E0502] col 26: cannot borrow `a` as mutable
mk.vecadd[4, 256](y, a, a)  # error[E0502] col 25: cannot borrow `a` as mutable
mykernels.vecadd[4, 256](a, y, y)  # error[E0502] col 32: cannot borrow `y` as mutable
mykernels.not_a_kernel(a, y, y)
saxpy[4, 256](2.0, a, a, y)
