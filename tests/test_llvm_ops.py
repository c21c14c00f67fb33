"""Every scalar op of ir/simt/ops.py through the LLVM backend, for every type it takes.

Each test builds small elementwise kernels (see `test_llvm.elementwise`), checks what matters in
the LLVM IR or PTX (unsigned ops for unsigned types, libdevice linked, no FTZ in our arithmetic)
and assembles the PTX with ptxas for sm_80, sm_90 and sm_90a.
"""

from __future__ import annotations

import re

import pytest

from fearless import dtypes as dt
from fearless.backends.toolchain import find_libdevice, find_ptxas
from fearless.dtypes import DType
from fearless.ir.core import Value
from fearless.ir.simt import ops

from support.llvm_builder import LOC, KernelBuilder, assemble_everywhere, elementwise  # isort: skip

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
needs_libdevice = pytest.mark.skipif(find_libdevice() is None, reason="libdevice not installed")

FLOATS = (dt.f16, dt.bf16, dt.f32, dt.f64)
INTS = (dt.i8, dt.i16, dt.i32, dt.i64, dt.u8, dt.u16, dt.u32, dt.u64)
# `.ftz` that libdevice's own algorithms use on purpose, on approximate seeds or range-reduced
# arguments (PTX has no non-FTZ rcp.approx.f64); `nvcc -ftz=false` emits the same.
LIBDEVICE_FTZ = {
    "ex2.approx.ftz.f32",
    "lg2.approx.ftz.f32",
    "rcp.approx.ftz.f32",
    "rcp.approx.ftz.f64",
    "rsqrt.approx.ftz.f32",
    "rsqrt.approx.ftz.f64",
    "div.approx.ftz.f32",
}


def ftz_instructions(ptx: str) -> set[str]:
    return set(re.findall(r"\b[a-z0-9]+(?:\.[a-z0-9]+)*\.ftz(?:\.[a-z0-9]+)*", ptx))


def many_outputs(name: str, src: DType, outs: dict[str, DType], fn: object) -> KernelBuilder:
    """c_<k>[i] = fn(kb, k, a[i]) for every output k: one kernel covers many ops of one type."""
    params = [("a", "slice", src), ("b", "slice", src)]
    params += [(f"c_{k}", "disjoint", d) for k, d in outs.items()]
    kb = KernelBuilder(name, params)
    first = next(iter(outs))
    i, done = kb.guarded(f"c_{first}")
    x, y = kb.checked_load(kb["a"], i), kb.checked_load(kb["b"], i)
    for k in outs:
        value = fn(kb, k, x, y)  # type: ignore[operator]
        kb.op(ops.BoundsCheck(i, kb.op(ops.ArrayLen(kb[f"c_{k}"], LOC)), kb.site(), LOC))
        kb.op(ops.Store(kb[f"c_{k}"], i, value, LOC))
    kb.op(ops.Br(done, [], LOC))
    return kb


# ------------------------------------------------------------------------------ arithmetic


@needs_ptxas
@pytest.mark.parametrize("dtype", (*INTS, dt.bool_), ids=str)
def test_integer_binary_ops(dtype: DType) -> None:
    kinds = ["and", "or", "xor", "min", "max"]
    if not dtype.is_bool:
        kinds += ["add", "sub", "mul", "floordiv", "mod", "pow", "shl", "shr"]
    kb = many_outputs(
        f"int_{dtype}", dtype, {k: dtype for k in kinds}, lambda kb, k, x, y: kb.bin(k, x, y)
    )
    text = kb.lower()
    if dtype.is_int:
        div, rem = ("sdiv", "srem") if dtype.is_signed else ("udiv", "urem")
        assert f" {div} " in text and f" {rem} " in text
        assert (" ashr " if dtype.is_signed else " lshr ") in text
        assert f"__fearless_ipow_{dtype.name}" in text
        # Integers wrap: the only overflow flags are on the thread index's mul and add.
        assert text.count(" nsw ") == text.count(" nuw ") == 2
    ptx = kb.ptx()
    assert "trap" not in ptx
    if dtype.is_int and dtype.bits >= 32:
        sign = "s" if dtype.is_signed else "u"
        assert f"div.{sign}{dtype.bits}" in ptx  # (the remainder may become a mul and a sub)
    assemble_everywhere(kb)


@needs_ptxas
@needs_libdevice
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_float_binary_ops(dtype: DType) -> None:
    kinds = ["add", "sub", "mul", "div", "floordiv", "mod", "min", "max", "pow"]
    kb = many_outputs(
        f"float_{dtype}", dtype, {k: dtype for k in kinds}, lambda kb, k, x, y: kb.bin(k, x, y)
    )
    ptx = kb.ptx()
    assert "__nv_" not in ptx and ".extern" not in ptx, "libdevice was not linked"
    assert "__nvvm_reflect" not in ptx
    assert ftz_instructions(ptx) <= LIBDEVICE_FTZ
    if dtype == dt.f32:
        assert "div.rn.f32" in ptx and "cvt.rmi.f32.f32" in ptx  # a / b and floor()
        assert "setp.nan.f32" in ptx  # NaN-propagating min/max
    assemble_everywhere(kb)


@needs_ptxas
@pytest.mark.parametrize("dtype", (*INTS, *FLOATS, dt.bool_), ids=str)
def test_unary_ops_and_compares(dtype: DType) -> None:
    outs: dict[str, DType] = {}
    if dtype.is_bool:
        outs |= {"not": dtype, "invert": dtype, "abs": dtype}
    elif dtype.is_int:
        outs |= {"neg": dtype, "invert": dtype, "abs": dtype}
    else:
        outs |= {"neg": dtype, "abs": dtype}
    outs |= {p: dt.bool_ for p in ("lt", "le", "gt", "ge", "eq", "ne")}

    def body(kb: KernelBuilder, k: str, x: Value, y: Value) -> Value:
        if outs[k] == dtype and not (dtype.is_bool and k in ("lt", "le", "gt", "ge", "eq", "ne")):
            return kb.op(ops.Unary(k, x, LOC))
        return kb.op(ops.Compare(k, x, y, LOC))

    kb = many_outputs(f"unary_{dtype}", dtype, outs, body)
    text = kb.lower()
    if dtype.is_float:
        # Python's comparisons: ordered, except != which is true on NaN.
        for pred in ("olt", "ole", "ogt", "oge", "oeq", "une"):
            assert f"fcmp {pred} " in text
        assert "fcmp one " not in text
    elif dtype.is_signed:
        assert "icmp slt " in text and "icmp sge " in text
    else:
        assert "icmp ult " in text and 'icmp slt i64 %"index"' in text
        assert "icmp slt i8" not in text and "icmp sgt" not in text
    ptx = kb.ptx()
    assert ".ftz" not in ptx
    assemble_everywhere(kb)


@needs_ptxas
def test_select_and_special_registers() -> None:
    regs = (
        "tid.x",
        "tid.y",
        "tid.z",
        "ntid.x",
        "ntid.y",
        "ntid.z",
        "ctaid.x",
        "ctaid.y",
        "ctaid.z",
        "nctaid.x",
        "nctaid.y",
        "nctaid.z",
    )

    def body(kb: KernelBuilder, x: Value) -> Value:
        total = kb.const(0, dt.i32)
        for reg in regs:
            total = kb.bin("add", total, kb.op(ops.SpecialReg(reg, LOC)))
        cond = kb.op(ops.Compare("gt", x, total, LOC))
        return kb.op(ops.Select(cond, x, total, LOC))

    kb = elementwise("regs", [dt.i32], dt.i32, body)
    ptx = kb.ptx()
    for reg in regs:
        assert f"%{reg}" in ptx
    assert "selp.b32" in ptx or "max.s32" in ptx
    assemble_everywhere(kb)


# ------------------------------------------------------------------------------------ math


@needs_ptxas
@needs_libdevice
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_every_math_function(dtype: DType) -> None:
    def body(kb: KernelBuilder, fn: str, x: Value, y: Value) -> Value:
        args = [x, y, x][: ops.MATH_FNS[fn]]
        return kb.op(ops.MathCall(fn, args, LOC))

    kb = many_outputs(f"math_{dtype}", dtype, dict.fromkeys(ops.MATH_FNS, dtype), body)
    text = kb.lower()
    suffix = "" if dtype.bits == 64 else "f"  # f16/bf16 call the f32 functions
    assert f'@"__nv_exp{suffix}"' in text
    assert f'@"__nv_sqrt{suffix}"' not in text and "llvm.sqrt" in text
    assert "llvm.roundeven" in text and f'@"__nv_round{suffix}"' not in text
    ptx = kb.ptx()
    assert "__nv_" not in ptx and "__nvvm_reflect" not in ptx
    assert ".extern" not in ptx, "every called function must be linked in"
    assert ftz_instructions(ptx) <= LIBDEVICE_FTZ
    if dtype == dt.f32:
        assert "sqrt.rn.f32" in ptx and "cvt.rni.f32.f32" in ptx
        # __CUDA_PREC_SQRT=1: hypotf uses the IEEE square root, not sqrt.approx.
        assert not re.search(r"\ssqrt\.approx", ptx)
    assemble_everywhere(kb)


@needs_ptxas
@needs_libdevice
def test_exp_f32_has_no_ftz_in_our_code_and_ieee_subnormal_path() -> None:
    kb = elementwise("expf", [dt.f32], dt.f32, lambda kb, x: kb.op(ops.MathCall("exp", [x], LOC)))
    ptx = kb.ptx()
    # libdevice's expf scales 2^frac (ex2.approx.ftz on a reduced argument in [-1, 1]) by
    # 2^n with an IEEE multiply, which produces subnormal results.
    assert ftz_instructions(ptx) == {"ex2.approx.ftz.f32"}
    assert "mul.rn.f32" in ptx
    assemble_everywhere(kb)


# ------------------------------------------------------------------------------------ casts

CAST_TYPES = (dt.bool_, dt.i8, dt.i16, dt.i32, dt.i64, dt.u8, dt.u16, dt.u32, dt.u64, *FLOATS)


@needs_ptxas
@pytest.mark.parametrize("src", CAST_TYPES, ids=str)
def test_casts_from(src: DType) -> None:
    outs = {d.name: d for d in CAST_TYPES if d != src}
    kb = many_outputs(
        f"cast_{src}", src, outs, lambda kb, k, x, y: kb.op(ops.Cast(x, outs[k], LOC))
    )
    text = kb.lower()
    if src.is_int:
        assert ("sitofp" if src.is_signed else "uitofp") in text
        assert ("sext" if src.is_signed else "zext") in text or src.bits == 64
    if src.is_float:
        assert "llvm.fptosi.sat" in text and "fcmp une" in text  # x -> bool is x != 0
    if src.is_bool:
        assert "icmp ne i8" in text and "zext i1" in text and "uitofp i1" in text
    ptx = kb.ptx()
    assert ".ftz" not in ptx
    assemble_everywhere(kb)


@needs_ptxas
@needs_libdevice
def test_libdevice_links_only_what_is_called() -> None:
    kb = elementwise("tanhf", [dt.f32], dt.f32, lambda kb, x: kb.op(ops.MathCall("tanh", [x], LOC)))
    ptx = kb.ptx(arch="sm_80")
    # The rest of libdevice never reaches the PTX (it is linked lazily, then inlined).
    assert ptx.count(".func") == 0  # the error report is inlined; nothing else came along
    assert "__nv_" not in ptx and ".extern" not in ptx
    assemble_everywhere(kb)
