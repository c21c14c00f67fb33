"""`print(...)` in SIMT kernels: the pieces of frontend/printing.py as one `print` op.

Each thread that runs the call prints one line (one `vprintf` on the GPU). A field is a scalar
(a ThreadIndex prints its i64 value) or a compile-time constant, which Python formats when the
kernel compiles; arrays, tuples and functions are refused (E0640).
"""

from __future__ import annotations

from ..dtypes import DType
from ..frontend.intrinsics import Call
from ..frontend.printing import PRINT_HELP, Field, format_and_values, print_error
from ..frontend.values import Operand, PyObj, Undefined
from ..ir.core import ArrayType, ScalarType, ThreadIndexType, Value
from ..ir.simt import ops
from .ssa import SsaLowerer


def print_rule(lw: SsaLowerer, call: Call) -> None:
    def scalar(f: Field) -> tuple[Value, DType]:
        v = f.value
        if isinstance(v, Value) and isinstance(v.type, ThreadIndexType):
            v = lw.em.index_int(v, f.loc)
        if isinstance(v, Undefined):
            raise lw.em.not_a_value(v, f.loc)
        if not (isinstance(v, Value) and isinstance(v.type, ScalarType)):
            raise print_error(f"`print` in a kernel cannot print {_what(v)}", f.loc, _help(v))
        return v, v.type.dtype

    fmt, values = format_and_values(call.args, scalar)
    lw.em.emit(ops.Print(fmt, values, call.loc))


def _what(v: Operand | tuple[object, ...]) -> str:
    if isinstance(v, Value):
        return f"a value of type `{v.type}`"
    if isinstance(v, PyObj):
        return f"`{v.name}`"
    return "this value"


def _help(v: Operand | tuple[object, ...]) -> str:
    if isinstance(v, Value) and isinstance(v.type, ArrayType):
        return 'print one element at a time: `print("x[i] =", x[i])`'
    return PRINT_HELP
