"""How fearless types and constants look in LLVM IR, for the NVPTX backend.

Registers hold `bool` as `i1`; memory and kernel parameters hold it as one byte (`i8`, 0 or 1,
as NumPy stores it). Integers of either signedness are LLVM `iN` (signedness lives in the ops
chosen, not in the type); `f16` is `half`, `bf16` is `bfloat`, f32/f64 are `float`/`double`.

llvmlite 0.50 has no `bfloat` type, and its attribute sets accept only the attributes it knows;
the small subclasses here fill those gaps without reaching into llvmlite's internals.
"""

from __future__ import annotations

import struct

import numpy as np
from llvmlite import ir

from ...abi import LaunchContract, ParamSpec
from ...dtypes import DType
from ...errors import InternalError
from ...ir.core import ArrayType, ScalarType, ThreadIndexType, Type, Value

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
VOID = ir.VoidType()
GLOBAL_PTR = ir.PointerType(addrspace=1)  # opaque `ptr addrspace(1)`: CUDA global memory


class BFloatType(ir.types._BaseFloatType):
    """LLVM's `bfloat` (absent from llvmlite.ir): bf16 registers and loads/stores."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"

    def format_constant(self, value: float) -> str:
        return f"0xR{bf16_bits(value):04X}"


BFloatType._create_instance()
BFLOAT = BFloatType()


class KernelAttributes(ir.values.FunctionAttributes):
    """Function attributes that also take LLVM string attributes (`"nvvm.reqntid"="256,1,1"`).

    NVPTX in LLVM 22 reads launch bounds from such attributes (`nvvm.annotations` metadata is
    only auto-upgraded to them); llvmlite's set accepts enum attributes only.
    """

    def add(self, name: str) -> None:
        if name.startswith('"'):
            set.add(self, name)
        else:
            super().add(name)

    @classmethod
    def of_contract(cls, contract: LaunchContract) -> KernelAttributes:
        """A kernel's launch bounds and register cap from its launch contract."""
        attrs = cls()
        # An exact block shape is the stronger promise; ptxas rejects .reqntid with .maxntid.
        if contract.block is not None:
            x, y, z = contract.block
            attrs.add(f'"nvvm.reqntid"="{x},{y},{z}"')  # -> .reqntid x, y, z
        elif contract.launch_bounds is not None:
            attrs.add(f'"nvvm.maxntid"="{contract.launch_bounds}"')
        if contract.max_registers is not None:  # -> .maxnreg N
            attrs.add(f'"nvvm.maxnreg"="{contract.max_registers}"')
        return attrs


class ParamAttributes(ir.values.ArgumentAttributes):
    """Argument attributes including `readonly`/`writeonly`, which llvmlite's list lacks."""

    _extra = frozenset({"readonly", "writeonly", "readnone"})

    def add(self, name: str) -> None:
        if name in self._extra:
            set.add(self, name)
        else:
            super().add(name)


def bf16_bits(value: float) -> int:
    """The bf16 bit pattern nearest to `value` (round to nearest even; NaN stays quiet NaN)."""
    (bits,) = struct.unpack("<I", struct.pack("<f", np.float32(value)))
    if (bits & 0x7FFFFFFF) > 0x7F800000:
        return ((bits >> 16) | 0x40) & 0xFFFF
    bits += 0x7FFF + ((bits >> 16) & 1)
    return (bits >> 16) & 0xFFFF


def scalar_type(dtype: DType) -> ir.Type:
    """The register type of a scalar of `dtype` (bool is i1)."""
    if dtype.is_bool:
        return I1
    if dtype.is_int:
        return ir.IntType(dtype.bits)
    return _FLOATS[dtype.name]


def memory_type(dtype: DType) -> ir.Type:
    """The in-memory and parameter type of `dtype` (bool is one byte)."""
    return I8 if dtype.is_bool else scalar_type(dtype)


def value_type(t: Type) -> ir.Type:
    """The register type of an IR value that lives in a register (scalars, thread indices)."""
    if isinstance(t, ScalarType):
        return scalar_type(t.dtype)
    if isinstance(t, ThreadIndexType):
        return I64
    if isinstance(t, ArrayType):
        raise InternalError(f"an array ({t}) cannot live in a register")
    raise InternalError(f"no LLVM type for {t}")


def constant(dtype: DType, value: bool | int | float) -> ir.Constant:
    """An LLVM constant of `dtype`; integers wrap to the type's width as the IR's ints do."""
    ty = scalar_type(dtype)
    if dtype.is_bool:
        return ir.Constant(ty, bool(value))
    if dtype.is_int:
        bits = dtype.bits
        wrapped = int(value) & ((1 << bits) - 1)
        if wrapped >= 1 << (bits - 1):  # print in signed form: LLVM reads iN literals as signed
            wrapped -= 1 << bits
        return ir.Constant(ty, wrapped)
    return ir.Constant(ty, float(value))


def float_bits_type(dtype: DType) -> ir.IntType:
    """The integer type of a float's width (for sign-bit tricks)."""
    return ir.IntType(dtype.bits)


_FLOATS: dict[str, ir.Type] = {
    "f16": ir.HalfType(),
    "bf16": BFLOAT,
    "f32": ir.FloatType(),
    "f64": ir.DoubleType(),
}


# The IR array type (`ArrayType.kind`) of each array ParamKind.
_ARRAY_KINDS = {"slice": "Slice", "disjoint": "DisjointSlice", "atomic": "AtomicSlice"}


def check_param(spec: ParamSpec, value: Value) -> None:
    """An InternalError unless the kernel's IR parameter `value` has the ABI type `spec`."""
    t = value.type
    if spec.is_array:
        ok = (
            isinstance(t, ArrayType)
            and t.dtype == spec.dtype
            and t.kind == _ARRAY_KINDS[spec.kind]
            and t.ndim == spec.ndim
        )
    else:
        ok = isinstance(t, ScalarType) and t.dtype == spec.dtype and spec.ndim == 1
    if not ok:
        raise InternalError(f"parameter {spec.name!r}: ABI {spec} does not fit IR type {t}")
