"""The Tile track: one function per block of tiles, like cuTile (DESIGN section 2).

    @tile.kernel
    def add(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
        z.store(tile.load_like(x, z) + tile.load_like(y, z))

Modules: types.py (annotations), api.py (in-kernel functions), frontend.py, control.py and
lower_api.py (Python -> tile IR; random.py: `tile.rand` and its family), passes.py,
compiler.py (the stages), kernel.py (specialisation and launch), fastpath.py (warm
launches), launch_gpu.py, aot.py (`Spec`: launches described without data, compiled ahead of
time). The tile IR itself is in ir/tile_*.py, its bytecode lowering in
backends/tileir_lower.py, the simulator in sim/tile.py and the host `Partition` in
runtime/partition.py.
"""

from __future__ import annotations

from ..runtime.partition import Grouped, Partition, grouped
from .aot import PartSpec, Spec
from .api import (
    abs_,
    arange,
    astype,
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_xchg,
    atomic_xor,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    block_id,
    broadcast_to,
    cdiv,
    ceil,
    cos,
    exp,
    exp2,
    expand_dims,
    floor,
    full,
    gather,
    load,
    load_like,
    log,
    log2,
    max,
    maximum,
    min,
    minimum,
    mma,
    num_blocks,
    num_tiles,
    permute,
    philox,
    rand,
    randint,
    randint4x,
    randn,
    reshape,
    rsqrt,
    scatter,
    sigmoid,
    sin,
    sqrt,
    sum,
    tanh,
    transpose,
    where,
    zeros,
)
from .helpers import function
from .kernel import Kernel, kernel
from .regions import unsafe
from .types import Atomic, Const, Part, Tensor

abs = abs_

__all__ = [
    "Atomic",
    "Const",
    "Grouped",
    "Kernel",
    "Part",
    "PartSpec",
    "Partition",
    "Spec",
    "Tensor",
    "abs",
    "arange",
    "astype",
    "atomic_add",
    "atomic_and",
    "atomic_cas",
    "atomic_max",
    "atomic_min",
    "atomic_or",
    "atomic_xchg",
    "atomic_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "block_id",
    "broadcast_to",
    "cdiv",
    "ceil",
    "cos",
    "exp",
    "exp2",
    "expand_dims",
    "floor",
    "full",
    "function",
    "gather",
    "grouped",
    "kernel",
    "load",
    "load_like",
    "log",
    "log2",
    "max",
    "maximum",
    "min",
    "minimum",
    "mma",
    "num_blocks",
    "num_tiles",
    "permute",
    "philox",
    "rand",
    "randint",
    "randint4x",
    "randn",
    "reshape",
    "rsqrt",
    "scatter",
    "sigmoid",
    "sin",
    "sqrt",
    "sum",
    "tanh",
    "transpose",
    "unsafe",
    "where",
    "zeros",
]  # fmt: skip
