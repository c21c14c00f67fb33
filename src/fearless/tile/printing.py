"""`print(...)` in Tile kernels: the pieces of frontend/printing.py as one `tile.print` op.

Each block that runs the call prints one line (`print_tko` in Tile IR, a printf). A field is a
tile or a compile-time constant, which Python formats when the kernel compiles. A scalar tile
(shape `()`: a reduction's result, `tile.block_id`, a scalar parameter) prints as its value; a
tile with axes prints whole, as Tile IR prints it on the H200 (cuTile Python's `printf` of a
tile, bench/experiments/tile_print_probe.py): each element by the field's conversion, in nested
brackets, `[[0.00, 1.00], [2.00, 3.00]]`.
"""

from __future__ import annotations

from ..dtypes import DType
from ..frontend.intrinsics import Call
from ..frontend.printing import Field, format_and_values, print_error
from ..frontend.values import PyObj
from ..ir.core import Value
from ..ir.tile import ops
from ..ir.tile.types import TileType
from .rules import TileRules


def print_rule(lw: TileRules, call: Call) -> PyObj:
    def scalar(f: Field) -> tuple[Value, DType]:
        v = f.value
        if not (isinstance(v, Value) and isinstance(v.type, TileType)):
            what = f"`{v.name}`" if isinstance(v, PyObj) else "this value"
            raise print_error(f"`print` in a kernel cannot print {what}", f.loc)
        return v, v.type.dtype

    fmt, values = format_and_values(call.args, scalar)
    lw.emit(ops.Print(fmt, values, call.loc))
    return PyObj(None, "None")
