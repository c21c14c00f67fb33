"""`print(...)` in Tile kernels: the pieces of frontend/printing.py as one `tile.print` op.

Each block that runs the call prints one line (`print_tko` in Tile IR, a printf). A field is a
scalar tile (shape `()`: a reduction's result, `tile.block_id`, a scalar parameter) or a
compile-time constant, which Python formats when the kernel compiles. A tile of more than one
element is refused (E0640): reduce it, or store it and print it on the host.
"""

from __future__ import annotations

from ..dtypes import DType
from ..frontend.intrinsics import Call
from ..frontend.printing import Field, format_and_values, print_error
from ..frontend.values import PyObj
from ..ir import tile_ops as ops
from ..ir.core import Value
from ..ir.tile_types import TileType
from .rules import TileRules


def print_rule(lw: TileRules, call: Call) -> PyObj:
    def scalar(f: Field) -> tuple[Value, DType]:
        v = f.value
        if not (isinstance(v, Value) and isinstance(v.type, TileType)):
            what = f"`{v.name}`" if isinstance(v, PyObj) else "this value"
            raise print_error(f"`print` in a kernel cannot print {what}", f.loc)
        if v.type.shape:
            raise print_error(
                f"`print` in a Tile kernel prints scalars, not a tile of shape {v.type.shape}",
                f.loc,
                "print a reduction (`tile.sum(t)`, `tile.max(t)`), or store the tile and "
                "print it on the host",
            )
        return v, v.type.dtype

    fmt, values = format_and_values(call.args, scalar)
    lw.emit(ops.Print(fmt, values, call.loc))
    return PyObj(None, "None")
