"""The LLVM backend on 2-D kernels: ABI (pointer, shape0, shape1), row-major addressing, the
y/x special registers of `thread.index_2d`, per-axis checks, no coarsening; PTX through ptxas.

CPU only. The kernels are the 2-D examples of examples/simt_kernels.py, through the frontend.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import simt_kernels as K
from filecheck.matcher import Matcher
from filecheck.options import Options

import fearless as fl
from fearless import simt
from fearless.backends.llvm.lower import lower_function
from fearless.backends.llvm.ptx import coarsenable, compile_ptx, ptxas_check
from fearless.backends.toolchain import find_ptxas
from fearless.errors import InternalError

ARCHS = ("sm_80", "sm_90", "sm_90a")
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")


def filecheck(text: str, checks: str, tmp_path: Path) -> None:
    check_file, input_file = tmp_path / "checks.txt", tmp_path / "input.txt"
    check_file.write_text(textwrap.dedent(checks))
    input_file.write_text(text)
    matcher = Matcher.from_opts(Options(match_filename=str(check_file), input_file=str(input_file)))
    assert matcher.run() == 0, "FileCheck failed (details on stderr)"


def llvm_text(kernel: simt.Kernel) -> str:
    ir = kernel.compiled_ir()
    return str(lower_function(ir.fn, ir.params, ir.contract, kernel.name))


def test_matadd_signature_and_row_major_addressing(tmp_path: Path) -> None:
    filecheck(
        llvm_text(K.matadd),
        """
        CHECK: define ptx_kernel void @"matadd"(
        CHECK-SAME: readonly align 4 %"a", i64 %"a.shape0", i64 %"a.shape1",
        CHECK-SAME: readonly align 4 %"b", i64 %"b.shape0", i64 %"b.shape1",
        CHECK-SAME: noalias noundef align 4 %"c", i64 %"c.shape0", i64 %"c.shape1",
        CHECK-SAME: i64 %"logical_threads", ptr addrspace(1) noalias %"err")
        CHECK: call i32 @"llvm.nvvm.read.ptx.sreg.ctaid.y"()
        CHECK: %"row" = add nuw nsw i64
        CHECK: call i32 @"llvm.nvvm.read.ptx.sreg.ctaid.x"()
        CHECK: %"col" = add nuw nsw i64
        CHECK: icmp slt i64 %"row", %"c.shape0"
        CHECK: icmp slt i64 %"col", %"c.shape1"
        CHECK-NOT: icmp ult
        CHECK: mul nuw nsw i64 %"row", %"a.shape1"
        CHECK-NEXT: %"offset" = add nuw nsw i64 {{.*}}, %"col"
        CHECK-NEXT: getelementptr inbounds float, ptr addrspace(1) %"a", i64 %"offset"
        CHECK-NEXT: load float, {{.*}} !invariant.load
        CHECK: mul nuw nsw i64 %"row", %"c.shape1"
        CHECK: store float
        """,
        tmp_path,
    )


def test_transpose_checks_each_axis_of_its_input(tmp_path: Path) -> None:
    # out's guard proves nothing about x: x[t.col, t.row] keeps one check per axis, each
    # against that axis's extent (a check of the flat offset would pass x[0, shape1]).
    filecheck(
        llvm_text(K.transpose),
        """
        CHECK: %"inbounds0" = icmp ult i64 %"col", %"x.shape0"
        CHECK: %"inbounds1" = icmp ult i64 %"row", %"x.shape1"
        CHECK: mul nuw nsw i64 %"col", %"x.shape1"
        CHECK: add nuw nsw i64 {{.*}}, %"row"
        """,
        tmp_path,
    )


def test_index_2d_kernels_are_not_coarsened() -> None:
    for kernel in (K.matadd, K.transpose, K.matmul):
        assert not coarsenable(kernel.compiled_ir().fn)
        ptx = kernel.inspect(stage="ptx")
        assert f".entry fearless_{kernel.name}(" in ptx
        assert "_x4(" not in ptx
    assert coarsenable(K.vecadd.compiled_ir().fn)


def test_ptx_reads_the_y_registers_and_uses_the_nc_path() -> None:
    ptx = compile_ptx(llvm_text(K.matmul), "sm_90")
    for reg in ("%ctaid.y", "%ntid.y", "%tid.y", "%ctaid.x", "%tid.x"):
        assert reg in ptx, reg
    assert "ld.global.nc" in ptx and "st.global" in ptx
    assert "trap" not in ptx and ".ftz" not in ptx


@needs_ptxas
@pytest.mark.parametrize("name", ["matadd", "transpose", "matmul"])
def test_2d_examples_assemble_everywhere(name: str) -> None:
    kernel = getattr(K, name)
    text = llvm_text(kernel)
    for arch in ARCHS:
        report = ptxas_check(compile_ptx(text, arch), arch)
        assert f"Compiling entry function '{name}' for '{arch}'" in report


def test_abi_rank_mismatch_is_an_internal_error() -> None:
    @simt.kernel
    def copy2d(a: simt.Slice[fl.f32, 2], c: simt.DisjointSlice[fl.f32, 2]):
        t = simt.thread.index_2d()
        if t.row < c.shape[0] and t.col < c.shape[1]:
            c[t] = a[t]

    ir = copy2d.compiled_ir()
    one_d = tuple(type(p)(p.name, p.kind, p.dtype) for p in ir.params)  # ndim 1
    with pytest.raises(InternalError, match="does not fit IR type"):
        lower_function(ir.fn, one_d, ir.contract, "copy2d")
