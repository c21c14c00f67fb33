"""SIMT `print` -> LLVM: one `vprintf` call, as CUDA's device printf lowers.

    print {format='i = %lld x = %f\\n'} %i, %x
        ->  @__fearless_fmt_0 = private unnamed_addr constant [20 x i8] c"i = %lld x = %f\\0A\\00"
            %args = alloca { i64, double }        (in the entry block)
            store %i, %x into the fields; %x is promoted to double, as C varargs are
            call i32 @vprintf(i8* @__fearless_fmt_0, i8* %args)

Varargs promotion: f16, bf16 and f32 become f64; bool, i8, i16 become i32 (u8 and u16 by zero
extension); 32- and 64-bit ints stay. The struct has the natural alignment of its fields, the
layout `vprintf` reads. The handler is registered with `registry.lowers` and runs on
`_KernelLowering` (`lw`: builder, module, support, `_v`, `scalar`).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ... import dtypes
from ...dtypes import DType
from ...ir.core import ScalarType
from ...ir.simt import ops
from .registry import lowers

I8 = ir.IntType(8)
I32 = ir.IntType(32)
I8P = I8.as_pointer()


def promoted(dtype: DType) -> DType:
    """The type a C variadic argument of `dtype` is passed as."""
    if dtype.is_float:
        return dtypes.f64
    if dtype.bits < 32:
        return dtypes.u32 if dtype.kind == "u" else dtypes.i32
    return dtype


@lowers(ops.Print)
def lower_print(lw: Any, op: ops.Print) -> None:
    b: ir.IRBuilder = lw.builder
    data = bytearray(op.format.encode("utf-8")) + b"\0"
    fmt_type = ir.ArrayType(I8, len(data))
    name = f"__fearless_fmt_{len(lw.module.globals)}"
    g = ir.GlobalVariable(lw.module, fmt_type, name)
    g.linkage = "private"
    g.global_constant = True
    g.unnamed_addr = True
    g.initializer = ir.Constant(fmt_type, data)
    fmt = b.bitcast(g, I8P)
    vprintf = lw.support.declare("vprintf", I32, [I8P, I8P])
    if not op.operands:
        b.call(vprintf, [fmt, ir.Constant(I8P, None)])
        return
    values = []
    for v in op.operands:
        assert isinstance(v.type, ScalarType)
        src = v.type.dtype
        values.append(
            lw.scalar.cast(lw._v(v), src, promoted(src)) if promoted(src) != src else lw._v(v)
        )
    struct = ir.LiteralStructType([x.type for x in values])
    entry = b.function.entry_basic_block
    at_entry = ir.IRBuilder(entry)
    at_entry.position_at_start(entry)
    buf = at_entry.alloca(struct)
    zero = ir.Constant(I32, 0)
    for k, x in enumerate(values):
        b.store(x, b.gep(buf, [zero, ir.Constant(I32, k)], inbounds=True))
    b.call(vprintf, [fmt, b.bitcast(buf, I8P)])
