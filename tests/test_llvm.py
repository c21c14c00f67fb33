"""The LLVM backend on hand-built IR: ABI, control flow, bounds checks and PTX properties.

CPU only: PTX comes from llvmlite's NVPTX target and every PTX is assembled with ptxas for
sm_80, sm_90 and sm_90a. The kernels are built op by op, as the frontend would build them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from filecheck.matcher import Matcher
from filecheck.options import Options

from fearless import dtypes as dt
from fearless.abi import LaunchContract, ParamSpec
from fearless.backends.llvm.lower import lower_function
from fearless.backends.llvm.ptx import compile_ptx, ptxas_check
from fearless.backends.toolchain import find_ptxas
from fearless.dtypes import DType
from fearless.errors import InternalError, ToolchainError
from fearless.ir.core import ScalarType, Value
from fearless.ir.simt import ops
from support.llvm_builder import LOC, KernelBuilder, assemble_everywhere, elementwise, vecadd

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")


# ------------------------------------------------------------------------------ IR building


def filecheck(text: str, checks: str, tmp_path: Path) -> None:
    check_file, input_file = tmp_path / "checks.txt", tmp_path / "input.txt"
    check_file.write_text(textwrap.dedent(checks))
    input_file.write_text(text)
    matcher = Matcher.from_opts(Options(match_filename=str(check_file), input_file=str(input_file)))
    assert matcher.run() == 0, "FileCheck failed (details on stderr)"


# ---------------------------------------------------------------------------- the kernel ABI


def test_vecadd_llvm_signature_follows_the_abi(tmp_path: Path) -> None:
    text = vecadd().lower(LaunchContract(block=(256, 1, 1)))
    filecheck(
        text,
        """
        CHECK: define ptx_kernel void @"vecadd"(
        CHECK-SAME: ptr addrspace(1) captures(none) noalias noundef readonly align 4 %"a0", i64 %"a0.len",
        CHECK-SAME: ptr addrspace(1) captures(none) noalias noundef readonly align 4 %"a1", i64 %"a1.len",
        CHECK-SAME: ptr addrspace(1) captures(none) noalias noundef align 4 %"c", i64 %"c.len",
        CHECK-SAME: ptr addrspace(1) noalias %"err")
        CHECK-SAME: "nvvm.reqntid"="256,1,1"
        CHECK: icmp slt i64 %"index", %"c.len"
        CHECK: icmp ult i64 %"index", %"a0.len"
        CHECK: load float, {{.*}} !invariant.load
        CHECK: fadd float
        CHECK-NOT: invariant.load
        CHECK: store float
        CHECK: !{ i32 4, !"nvvm-reflect-ftz", i32 0 }
        """,
        tmp_path,
    )


@needs_ptxas
def test_vecadd_ptx(tmp_path: Path) -> None:
    kb = vecadd()
    contract = LaunchContract(block=(256, 1, 1))
    ptx = kb.ptx("sm_90", contract)
    filecheck(
        ptx,
        """
        CHECK: .target sm_90
        CHECK: .visible .entry vecadd(
        CHECK: .reqntid 256, 1, 1
        CHECK-NOT: .maxntid
        CHECK: mov.u32 {{.*}}%ctaid.x
        CHECK: ld.global.nc.b32
        CHECK: ld.global.nc.b32
        CHECK: add.rn.f32
        CHECK: st.global.b32
        CHECK-NOT: call
        CHECK: atom{{.*}}.global.cas.b64 {{.*}}, 0, 1;
        """,
        tmp_path,
    )
    assert "trap" not in ptx and ".ftz" not in ptx
    assemble_everywhere(kb, contract)


@needs_ptxas
def test_launch_bounds_give_maxntid_and_no_contract_gives_neither() -> None:
    kb = vecadd()
    bounded = kb.ptx("sm_90", LaunchContract(launch_bounds=128))
    assert ".maxntid 128" in bounded and ".reqntid" not in bounded
    free = kb.ptx("sm_90")
    assert ".maxntid" not in free and ".reqntid" not in free
    assemble_everywhere(kb, LaunchContract(launch_bounds=128))


def test_scalar_params_by_value_bool_as_byte(tmp_path: Path) -> None:
    kb = KernelBuilder(
        "scale",
        [
            ("x", "slice", dt.f64),
            ("s", "scalar", dt.f64),
            ("flip", "scalar", dt.bool_),
            ("n", "scalar", dt.i32),
            ("c", "disjoint", dt.f64),
        ],
    )
    i, done = kb.guarded("c")
    v = kb.bin("mul", kb.checked_load(kb["x"], i), kb["s"])
    v = kb.op(ops.Select(kb["flip"], kb.op(ops.Unary("neg", v, LOC)), v, LOC))
    kb.op(ops.Store(kb["c"], i, v, LOC))
    kb.op(ops.Br(done, [], LOC))
    filecheck(
        kb.lower(),
        """
        CHECK: %"x.len", double %"s", i8 %"flip", i32 %"n", ptr addrspace(1)
        CHECK: icmp ne i8 %"flip", 0
        CHECK: fneg double
        CHECK: select i1
        """,
        tmp_path,
    )
    assemble_everywhere(kb)


def test_abi_mismatch_is_an_internal_error() -> None:
    kb = vecadd()
    wrong = [
        ParamSpec("a0", "slice", dt.f32),
        ParamSpec("a1", "slice", dt.f32),
        ParamSpec("c", "slice", dt.f32),
    ]  # c is a DisjointSlice in the IR
    with pytest.raises(InternalError, match="does not fit"):
        lower_function(kb.fn, wrong, LaunchContract(), "vecadd")


def test_unknown_arch_is_a_toolchain_error_with_help() -> None:
    module = lower_function(vecadd().fn, vecadd().specs, LaunchContract(), "vecadd")
    with pytest.raises(ToolchainError) as info:
        compile_ptx(module, "sm_75")
    assert info.value.help is not None and "sm_90a" in info.value.help


# ------------------------------------------------------------------------------ control flow


def sum_kernel() -> KernelBuilder:
    """c[i] = sum(a[k] for k in range(n)) + i: a loop whose state lives in block arguments."""
    kb = KernelBuilder(
        "rowsum", [("a", "slice", dt.f32), ("n", "scalar", dt.i64), ("c", "disjoint", dt.f32)]
    )
    i, done = kb.guarded("c")
    head, loop, exit_ = kb.fn.new_block("head"), kb.fn.new_block("loop"), kb.fn.new_block("exit")
    k = head.add_arg(ScalarType(dt.i64), LOC, "k")
    acc = head.add_arg(ScalarType(dt.f32), LOC, "acc")
    kb.op(ops.Br(head, [kb.const(0, dt.i64), kb.const(0.0, dt.f32)], LOC))
    kb.goto(head)
    kb.op(ops.CondBr(kb.op(ops.Compare("lt", k, kb["n"], LOC)), loop, [], exit_, [acc], LOC))
    kb.goto(loop)
    acc2 = kb.bin("add", acc, kb.checked_load(kb["a"], k))
    kb.op(ops.Br(head, [kb.bin("add", k, kb.const(1, dt.i64)), acc2], LOC))
    total = exit_.add_arg(ScalarType(dt.f32), LOC, "total")
    kb.goto(exit_)
    plus_i = kb.bin("add", total, kb.op(ops.Cast(i, dt.f32, LOC)))
    kb.op(ops.Store(kb["c"], i, plus_i, LOC))
    kb.op(ops.Br(done, [], LOC))
    return kb


def test_loop_block_args_become_phis(tmp_path: Path) -> None:
    kb = sum_kernel()
    filecheck(
        kb.lower(),
        """
        CHECK: head:
        CHECK-NEXT: %"k" = phi i64 [0, %"body"], [%{{.*}}, %"checked0"]
        CHECK-NEXT: %"acc" = phi float [{{ *}}0x0, %"body"], [%{{.*}}, %"checked0"]
        CHECK: exit:
        CHECK-NEXT: %"total" = phi float [%"acc", %"head"]
        CHECK: sitofp i64 %"index" to float
        """,
        tmp_path,
    )
    ptx = kb.ptx()
    assert ptx.count("ld.global.nc.b32") >= 1 and "add.rn.f32" in ptx
    assemble_everywhere(kb)


def test_cond_br_to_one_block_with_two_argument_lists() -> None:
    kb = KernelBuilder("pick", [("a", "slice", dt.i32), ("c", "disjoint", dt.i32)])
    i, done = kb.guarded("c")
    x = kb.checked_load(kb["a"], i)
    join = kb.fn.new_block("join")
    v = join.add_arg(ScalarType(dt.i32), LOC, "v")
    cond = kb.op(ops.Compare("gt", x, kb.const(0, dt.i32), LOC))
    kb.op(ops.CondBr(cond, join, [x], join, [kb.const(7, dt.i32)], LOC))
    kb.goto(join)
    kb.op(ops.Store(kb["c"], i, v, LOC))
    kb.op(ops.Br(done, [], LOC))
    assert "edge:" in kb.lower()
    ptx = kb.ptx()
    assert "st.global.b32" in ptx
    assemble_everywhere(kb)


# ------------------------------------------------------------------------------ bounds checks


@needs_ptxas
def test_failed_bounds_check_records_the_error_and_returns(tmp_path: Path) -> None:
    # a[i + 1] read under `i < len(c)` only: the check on `a` stays and may fail.
    kb = KernelBuilder("shifted", [("a", "slice", dt.i64), ("c", "disjoint", dt.i64)])
    i, done = kb.guarded("c")
    x = kb.checked_load(kb["a"], kb.bin("add", i, kb.const(1, dt.i64)))
    kb.op(ops.Store(kb["c"], i, x, LOC))
    kb.op(ops.Br(done, [], LOC))
    ptx = kb.ptx()
    filecheck(
        ptx,
        """
        CHECK: .visible .entry shifted(
        CHECK: setp.{{[a-z]+}}.u64
        CHECK: ld.global.nc.b64
        CHECK-NOT: call
        CHECK: atom.relaxed.sys.global.cas.b64 [[OLD:%rd[0-9]+]], [[[ERR:%rd[0-9]+]]], 0, 1;
        CHECK: setp.ne.b64 [[WON:%p[0-9]+]], [[OLD]], 0;
        CHECK: mov.u32 {{.*}}%tid.z;
        CHECK: st.global.b64 [[[ERR]]+8],
        CHECK: st.global.b64 [[[ERR]]+16],
        CHECK: st.global.b64 [[[ERR]]+64],
        CHECK: st.global.b64 [[[ERR]]+72],
        """,
        tmp_path,
    )
    assert "ret;" in ptx  # the failing thread returns
    assert "trap" not in ptx and "exit;" not in ptx
    assemble_everywhere(kb)


def test_writes_to_disjoint_slices_are_not_marked_readonly() -> None:
    text = vecadd().lower()
    signature = text.split("define ptx_kernel", 1)[1].split("\n", 1)[0]
    c_param = signature.split('%"a1.len",', 1)[1].split('%"c"', 1)[0]
    assert "noalias" in c_param and "readonly" not in c_param


# -------------------------------------------------------------------------- float precision


@needs_ptxas
@pytest.mark.parametrize("dtype, suffix", [(dt.f32, "f32"), (dt.f64, "f64")])
def test_no_fma_contraction_ieee_div_and_sqrt(dtype: DType, suffix: str) -> None:
    def body(kb: KernelBuilder, x: Value, y: Value, z: Value) -> Value:
        fused_candidate = kb.bin("add", kb.bin("mul", x, y), z)  # a*b + c
        quotient = kb.bin("div", fused_candidate, y)
        return kb.op(ops.MathCall("sqrt", [quotient], LOC))

    kb = elementwise("muladd", [dtype] * 3, dtype, body)
    ptx = kb.ptx()
    assert f"mul.rn.{suffix}" in ptx and f"add.rn.{suffix}" in ptx
    assert f"div.rn.{suffix}" in ptx and f"sqrt.rn.{suffix}" in ptx
    assert "fma" not in ptx and ".approx" not in ptx and ".ftz" not in ptx
    assemble_everywhere(kb)


@needs_ptxas
def test_explicit_fma_is_one_fma() -> None:
    kb = elementwise(
        "fma", [dt.f32] * 3, dt.f32, lambda kb, x, y, z: kb.op(ops.MathCall("fma", [x, y, z], LOC))
    )
    ptx = kb.ptx()
    assert ptx.count("fma.rn.f32") == 1 and "mul.rn" not in ptx


# ---------------------------------------------------------------------------------- timing


def test_first_compile_of_vecadd_is_fast() -> None:
    # A fresh interpreter, so LLVM's one-time initialisation is part of the measured call.
    script = textwrap.dedent(
        """
        import time
        import support.llvm_builder as t
        kb = t.vecadd()
        from fearless.backends.llvm.ptx import compile_ptx
        from fearless.backends.llvm.lower import lower_function
        from fearless.abi import LaunchContract
        t0 = time.perf_counter()
        module = lower_function(kb.fn, kb.specs, LaunchContract(block=(256, 1, 1)), "vecadd")
        t1 = time.perf_counter()
        compile_ptx(module, "sm_90")
        t2 = time.perf_counter()
        compile_ptx(module, "sm_90")
        t3 = time.perf_counter()
        print(f"{t1 - t0:.4f} {t2 - t1:.4f} {t3 - t2:.4f}")
        """
    )
    tests = str(Path(__file__).parent)  # for `support`
    path = os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=path),
    ).stdout
    lower_s, first_s, warm_s = (float(x) for x in out.split())
    print(
        f"vecadd: lower {lower_s * 1e3:.1f} ms, first compile_ptx {first_s * 1e3:.1f} ms, "
        f"second {warm_s * 1e3:.1f} ms"
    )
    assert lower_s + first_s < 0.3


def test_compile_time_in_process() -> None:
    kb = vecadd()
    module = lower_function(kb.fn, kb.specs, LaunchContract(), "vecadd")
    compile_ptx(module)
    start = time.perf_counter()
    for _ in range(5):
        compile_ptx(module)
    per_call = (time.perf_counter() - start) / 5
    print(f"vecadd compile_ptx, warm process: {per_call * 1e3:.1f} ms")
    assert per_call < 0.1


def test_compile_ptx_takes_llvm_text_and_every_opt_level() -> None:
    kb = vecadd()
    module = lower_function(kb.fn, kb.specs, LaunchContract(), "vecadd")
    assert compile_ptx(str(module)) == compile_ptx(module)
    for level in range(4):
        assert ".visible .entry vecadd(" in compile_ptx(module, opt_level=level)
    with pytest.raises(ValueError, match="opt_level"):
        compile_ptx(module, opt_level=4)


@needs_ptxas
def test_ptxas_failure_is_a_toolchain_error_with_its_message() -> None:
    with pytest.raises(ToolchainError) as info:
        ptxas_check(".version 8.0\n.target sm_90\n.address_size 64\nbogus;\n", "sm_90")
    assert "ptxas rejected the PTX for sm_90" in info.value.message
    assert any("bogus" in note for note in info.value.diagnostic.notes)


def test_coarsened_entry_is_exported_and_assembles() -> None:
    import simt_kernels as K

    ptx = K.vecadd.inspect(stage="ptx")
    assert ".entry fearless_vecadd(" in ptx and ".entry fearless_vecadd_x4(" in ptx
    coarse = ptx[ptx.index(".entry fearless_vecadd_x4(") :]
    assert "%nctaid.x" in coarse  # the physical thread count S strides the logical threads
    assert coarse.count("ld.global.nc") >= 8  # four copies of two loads
    assert "ret;" in coarse and "trap" not in coarse
    if find_ptxas() is not None:
        ptxas_check(ptx, "sm_90")
