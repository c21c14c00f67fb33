"""One array passed as two DisjointSlice outputs."""

from mykernels import casts

import fearless as fl

x = fl.zeros(512, dtype=fl.f32)
out = fl.empty(512, dtype=fl.i32)
casts[2, 256](x, out, out)  # error[E0502] col 23: `out` as mutable more than once
other = fl.empty(512, dtype=fl.u32)
casts[2, 256](x, out, other)
