"""IR data model, printer, verifier and the SIMT passes (FileCheck-style on the printed IR)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import simt_kernels as K

import fearless as fl
from fearless import dtypes, simt
from fearless.errors import InternalError, Location
from fearless.ir.core import ArrayType, Function, ScalarType
from fearless.ir.simt import ops
from fearless.ir.simt.printer import print_function
from fearless.ir.simt.verifier import verify

LOC = Location("t.py", 1, 0)


def filecheck(text: str, checks: str) -> None:
    """Run FileCheck directives (`CHECK:`, `CHECK-NEXT:`, `CHECK-NOT:`) against `text`."""
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".check", delete=False) as f:
        f.write(checks)
    tool = Path(sys.executable).with_name("filecheck")
    proc = subprocess.run(
        [str(tool), f.name], input=text, text=True, capture_output=True, check=False
    )
    assert proc.returncode == 0, f"FileCheck failed:\n{proc.stderr}\non:\n{text}"


def test_vecadd_ir_after_passes() -> None:
    text = K.vecadd.inspect(stage="ir")
    filecheck(
        text,
        """
CHECK: kernel vecadd: 2 bounds check(s) remain on the device, 1 proven by guards and removed
CHECK: func @vecadd(%0: Slice[f32], %1: Slice[f32], %2: DisjointSlice[f32])
CHECK: thread.index_1d : ThreadIndex
CHECK: compare {pred='lt'}
CHECK: cond_br
CHECK: check.bounds {sites=(0, 1)}
CHECK-NEXT: load %0
CHECK-NEXT: load %1
CHECK-NOT: check.bounds
CHECK: store %2
CHECK: return
""",
    )


def test_unsafe_kernel_has_no_checks() -> None:
    @simt.kernel(unsafe=True)
    def shift(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        c[i + 1] = a[i]  # raw indexed write: allowed only in unsafe kernels

    text = shift.inspect(stage="ir")
    assert "check.bounds" not in text
    assert "store %1" in text


def test_loop_counter_guard_removes_check() -> None:
    @simt.kernel
    def total(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(c):
            s = fl.f32(0.0)
            for k in range(len(a)):
                s += a[k]
            c[i] = s

    text = total.inspect(stage="ir")
    assert "0 bounds check(s) remain" in text, text


def test_unproven_read_keeps_check() -> None:
    text = K.gather.inspect(stage="ir")
    assert text.count("check.bounds") == 2  # idx[i] (other array) and src[idx[i]]


def test_short_circuit_guards_prove_each_comparison() -> None:
    @simt.kernel
    def both(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(a) and i < len(c):
            c[i] = a[i]

    @simt.kernel
    def either(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i >= len(a) or i >= len(c):
            return
        c[i] = a[i]

    for k in (both, either):
        assert "0 bounds check(s) remain on the device, 2 proven" in k.inspect(stage="ir")


def test_short_circuit_proves_only_what_every_path_proves() -> None:
    @simt.kernel
    def one_side(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32], flag: bool):
        i = simt.thread.index_1d()
        if flag or i < len(a):  # `flag` alone reaches the body: a[i] stays checked
            if i >= len(c):
                return
            c[i] = a[i]

    text = one_side.inspect(stage="ir")
    assert "1 bounds check(s) remain on the device, 1 proven" in text, text
    filecheck(text, "CHECK: check.bounds {sites=(0,)}\nCHECK-NEXT: load %0\n")


def _broken_function() -> tuple[Function, ops.Op]:
    fn = Function("f", LOC)
    b0 = fn.new_block()
    b1 = fn.new_block()
    b0.add_arg(ArrayType(dtypes.f32, False), LOC, "a")
    c = b0.append(ops.Constant(1, dtypes.i64, LOC))
    b0.append(ops.Br(b1, [c.result], LOC))  # b1 takes no arguments
    b1.append(ops.Return(LOC))
    return fn, c


def test_verifier_rejects_branch_arity_mismatch() -> None:
    fn, _ = _broken_function()
    with pytest.raises(InternalError, match="passes 1 values"):
        verify(fn)


def test_verifier_rejects_use_before_definition() -> None:
    fn = Function("f", LOC)
    b0 = fn.new_block()
    one = ops.Constant(1, dtypes.i32, LOC)
    add = ops.Binary("add", one.result, one.result, LOC)
    b0.append(add)
    b0.append(one)
    b0.append(ops.Return(LOC))
    with pytest.raises(InternalError, match="before its definition"):
        verify(fn)


def test_verifier_rejects_missing_terminator_and_bad_types() -> None:
    fn = Function("f", LOC)
    b0 = fn.new_block()
    b0.append(ops.Constant(1, dtypes.i32, LOC))
    with pytest.raises(InternalError, match="no terminator"):
        verify(fn)
    fn2 = Function("g", LOC)
    b = fn2.new_block()
    x = b.append(ops.Constant(1, dtypes.i32, LOC)).result
    y = b.append(ops.Constant(1.0, dtypes.f32, LOC)).result
    bad = ops.Binary("add", x, x, LOC)
    bad.operands[1] = y
    b.append(bad)
    b.append(ops.Return(LOC))
    with pytest.raises(InternalError, match="types do not fit"):
        verify(fn2)


def test_printer_numbers_block_arguments() -> None:
    fn = Function("loop", LOC)
    entry, header, exit_ = fn.new_block(), fn.new_block("header"), fn.new_block()
    zero = entry.append(ops.Constant(0, dtypes.i64, LOC)).result
    entry.append(ops.Br(header, [zero], LOC))
    k = header.add_arg(ScalarType(dtypes.i64), LOC, "k")
    ten = header.append(ops.Constant(10, dtypes.i64, LOC)).result
    cond = header.append(ops.Compare("lt", k, ten, LOC)).result
    body = fn.new_block("body")
    header.append(ops.CondBr(cond, body, [], exit_, [], LOC))
    one = body.append(ops.Constant(1, dtypes.i64, LOC)).result
    nxt = body.append(ops.Binary("add", k, one, LOC)).result
    body.append(ops.Br(header, [nxt], LOC))
    exit_.append(ops.Return(LOC))
    verify(fn)
    text = print_function(fn, with_locs=False)
    filecheck(
        text,
        """
CHECK: br ^bb1(%0)
CHECK: ^bb1(%1: i64):  // header
CHECK: cond_br %3, ^bb3, ^bb2
CHECK: %5 = binary {kind='add'} %1, %4 : i64
CHECK: br ^bb1(%5)
""",
    )


def test_checks_merge_into_one_group_per_block() -> None:
    import simt_cases as C

    text = C.stencil.inspect(stage="ir")
    assert text.count("check.bounds") == 1
    # the store out[i] is proven by `i < len(out) - 1`; the reads of x form one group (and
    # vanish in the variant that assumes len(x) >= len(out))
    assert "check.bounds {sites=(0, 1, 2)}" in text
    assert "0 bounds check(s) remain in it" in text


def test_gather_check_waits_for_its_index_load() -> None:
    text = K.gather.inspect(stage="ir")
    # src[idx[i]] needs the load of idx[i]: its check cannot join the first group.
    assert "check.bounds {sites=(0,)}" in text and "check.bounds {sites=(1,)}" in text


def test_2d_access_gets_one_check_per_axis() -> None:
    text = K.transpose.inspect(stage="ir")
    filecheck(
        text,
        """
CHECK: kernel transpose: 2 bounds check(s) remain on the device, 2 proven by guards and removed
CHECK: func @transpose(%0: Slice[f32, 2], %1: DisjointSlice[f32, 2])
CHECK: %[[T:[0-9]+]] = thread.index_2d : ThreadIndex2D
CHECK: index.axis {axis=0} %[[T]] : i64
CHECK: len {axis=0} %1 : i64
CHECK: len {axis=0} %0 : i64
CHECK: len {axis=1} %0 : i64
CHECK: check.bounds {sites=(0, 1)}
CHECK-NEXT: load %0, %{{[0-9]+}}, %{{[0-9]+}} : f32
CHECK-NOT: check.bounds
CHECK: store %1, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}
""",
    )
    sites = K.transpose.compiled_ir().sites
    assert [(s.kind, s.param, s.axis) for s in sites[:2]] == [("read", "x", 0), ("read", "x", 1)]


def test_2d_guards_prove_each_axis() -> None:
    text = K.matadd.inspect(stage="ir")
    assert "0 bounds check(s) remain on the device, 6 proven" in text, text

    # guarding one axis proves that axis only
    @simt.kernel
    def rows_only(a: simt.Slice[fl.f32, 2], c: simt.DisjointSlice[fl.f32, 2]):
        t = simt.thread.index_2d()
        if t.row < c.shape[0] and t.row < a.shape[0]:
            c[t] = a[t]

    text = rows_only.inspect(stage="ir")
    assert "2 bounds check(s) remain on the device, 2 proven" in text, text
    assert rows_only.compiled_ir().contract.index_dims == 2
    assert K.vecadd.compiled_ir().contract.index_dims == 1


def test_verifier_rejects_wrong_index_count_and_2d_block_args() -> None:
    from fearless.ir.core import THREAD_INDEX_2D

    fn = Function("f", LOC)
    b0 = fn.new_block()
    a = b0.add_arg(ArrayType(dtypes.f32, False, 2), LOC, "a")
    i = b0.append(ops.Constant(0, dtypes.i64, LOC)).result
    load = ops.Load(a, [i, i], LOC)
    b0.append(load)
    b0.append(ops.Return(LOC))
    verify(fn)
    load.operands = [a, i]  # one index for a 2-D array
    with pytest.raises(InternalError, match="operand types do not fit"):
        verify(fn)
    load.operands = [a, i, i]
    b1 = fn.new_block()
    b1.add_arg(THREAD_INDEX_2D, LOC, "t")
    with pytest.raises(InternalError, match="is a ThreadIndex2D"):
        verify(fn)


def test_dtypes_unpickle_to_the_same_instance() -> None:
    import pickle

    from fearless.abi import ParamSpec

    for t in dtypes.ALL:
        spec = pickle.loads(pickle.dumps(ParamSpec("a", "slice", t)))
        assert spec.dtype is t  # launchers compare dtypes by identity
