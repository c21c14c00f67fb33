"""Names bound to one array (`b = a`, `fl.asarray(a)`) are that array until one is rebound."""

import numpy as np
from mykernels import vecadd

import fearless as fl

a = fl.zeros(256, dtype=fl.f32)
x = fl.zeros(256, dtype=fl.f32)
b = a
vecadd[1, 256](a, x, b)  # error[E0502] col 22: cannot borrow `b` as mutable because
c = b
vecadd[1, 256](c, x, a)  # error[E0502] col 22: cannot borrow `a` as mutable because

host = np.zeros(256, dtype=np.float32)
wrapped = fl.asarray(host)
vecadd[1, 256](host, x, wrapped)  # error[E0502] col 25: cannot borrow `wrapped` as mutable

b = fl.empty(256, dtype=fl.f32)  # `b` is a new array now; `c` still is `a`
vecadd[1, 256](a, x, b)
vecadd[1, 256](a, c, x)
vecadd[1, 256](x, b, c)
vecadd[1, 256](a, b, c)  # error[E0502] col 22: cannot borrow `c` as mutable
