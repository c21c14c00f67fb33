import fearless as fl

from . import kernels
from .kernels import double


def run(x):
    double[4, 256](x, x)  # error[E0502] col 23: cannot borrow `x` as mutable
    kernels.double[4, 256](x, x)  # error[E0502] col 31: cannot borrow `x` as mutable
    out = fl.empty(1024, dtype=fl.f32)
    double[4, 256](x, out)
    return out
