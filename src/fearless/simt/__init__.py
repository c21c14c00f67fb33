"""The SIMT track: one function per thread, writes only through a `DisjointSlice`.

@simt.kernel
def vecadd(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]
"""

from .api import Kernel, PreparedLaunch, device, kernel
from .types import DeviceFunction, DisjointSlice, Slice, thread

__all__ = [
    "DeviceFunction",
    "DisjointSlice",
    "Kernel",
    "PreparedLaunch",
    "Slice",
    "device",
    "kernel",
    "thread",
]
