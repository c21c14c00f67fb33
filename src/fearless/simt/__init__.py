"""The SIMT track: one function per thread, writes only through a `DisjointSlice` (or
`simt.atomic` on an `AtomicSlice`).

@simt.kernel
def vecadd(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]
"""

from .api import Kernel, PreparedLaunch, device, kernel
from .collectives import block, warp
from .cooperative import cg
from .coords import WARP_SIZE as warpsize
from .coords import blockDim, blockIdx, grid, gridDim, gridsize, laneid, threadIdx
from .regions import unsafe
from .shared import local, shared, syncthreads
from .types import AtomicSlice, DeviceFunction, DisjointSlice, Slice, atomic, thread

__all__ = [
    "AtomicSlice",
    "DeviceFunction",
    "DisjointSlice",
    "Kernel",
    "PreparedLaunch",
    "Slice",
    "atomic",
    "block",
    "blockDim",
    "blockIdx",
    "cg",
    "device",
    "grid",
    "gridDim",
    "gridsize",
    "kernel",
    "laneid",
    "local",
    "shared",
    "syncthreads",
    "thread",
    "threadIdx",
    "unsafe",
    "warp",
    "warpsize",
]
