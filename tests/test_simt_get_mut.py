"""`c.get_mut(i)`, the cuda-oxide form of a DisjointSlice write (simt/slots.py): the simulator
against NumPy with more threads than elements, the IR it lowers to (the same as the hand-written
`if i < len(c):`), the PTX, and the refusals that need more than one line to show (the others
are in compile_fail/get_mut_*.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import fearless as fl
from fearless import simt
from fearless.backends.llvm.ptx import ptxas_check
from fearless.backends.toolchain import find_ptxas

RNG = np.random.default_rng(7)


@simt.kernel
def vecadd_walrus(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if (slot := c.get_mut(i)) is not None:
        slot.set(a[i] + b[i])


@simt.kernel
def vecadd_assigned(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    slot = c.get_mut(i)
    if slot is not None:
        slot.set(a[i] + b[i])


@simt.kernel
def vecadd_guarded(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]


@simt.kernel
def scale_in_place(x: simt.DisjointSlice[fl.f32], k: fl.f32):
    i = simt.thread.index_1d()
    s = x.get_mut(i)
    if s is None:
        return  # cuda-oxide's `let Some(s) = x.get_mut(i) else { return };`
    s.set(s.get() * k + 1.0)


@simt.kernel
def mark_out_of_range(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.i32], hits: int):
    i = simt.thread.index_1d()
    s = out.get_mut(i)
    if s is None:
        pass
    else:
        s.set(x[i] * 2 + hits)


@simt.kernel
def transpose_add(a: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    t = simt.thread.index_2d()
    if (s := out.get_mut(t)) is not None:
        s.set(s.get() + a[t.col, t.row])


# ------------------------------------------------------------------------ simulator


@pytest.mark.parametrize("kernel", [vecadd_walrus, vecadd_assigned], ids=["walrus", "assigned"])
def test_vecadd_on_a_grid_larger_than_the_array(kernel: simt.Kernel) -> None:
    n = 1000  # 4 blocks of 256 threads: the last 24 threads find the slot None
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    c = np.full(n + 8, -5.0, np.float32)  # past n: never written, the slice ends at n
    kernel[4, 256](a, b, c[:n])
    np.testing.assert_array_equal(c[:n], a + b)
    np.testing.assert_array_equal(c[n:], -5.0)


def test_get_reads_the_element_the_slot_writes() -> None:
    x = RNG.standard_normal(300).astype(np.float32)
    out = x.copy()
    scale_in_place[2, 256](out, np.float32(3.0))
    np.testing.assert_allclose(out, x * 3.0 + 1.0, rtol=1e-6)


def test_the_none_branch_and_the_else_branch() -> None:
    x = np.arange(100, dtype=np.int32)
    out = np.zeros(100, np.int32)
    mark_out_of_range[1, 128](x, out, 5)
    np.testing.assert_array_equal(out, x * 2 + 5)


def test_a_2d_slot_under_index_2d() -> None:
    a = RNG.standard_normal((20, 12)).astype(np.float32)
    out = RNG.standard_normal((12, 20)).astype(np.float32)
    want = out + a.T
    transpose_add[(2, 1), (16, 16)](a, out)  # 32 x 16 threads over 12 x 20 elements
    np.testing.assert_allclose(out, want, rtol=1e-6)


# ----------------------------------------------------------------------------- the IR


def _ops(kernel: simt.Kernel) -> list[str]:
    """The ops of the kernel's IR after the passes, without values, names or locations."""
    text = kernel.inspect(stage="ir")
    body = [ln.split("//")[0].strip() for ln in text.splitlines() if not ln.startswith("//")]
    return [re.sub(r"%\d+", "%", ln) for ln in body if ln and not ln.startswith("func")]


def test_get_mut_lowers_as_the_hand_written_guard() -> None:
    want = _ops(vecadd_guarded)
    assert _ops(vecadd_walrus) == want
    assert _ops(vecadd_assigned) == want
    # the guard proves the write: only the reads of `a` and `b` keep a check
    assert "1 proven by guards" in vecadd_walrus.inspect(stage="ir").splitlines()[0]


def test_get_mut_compiles_to_ptx() -> None:
    ptx = vecadd_walrus.inspect(stage="ptx", arch="sm_90")
    assert ".visible .entry fearless_vecadd_walrus(" in ptx
    assert "st.global" in ptx  # the slot's write
    if find_ptxas() is not None:
        ptxas_check(ptx, "sm_90")


# --------------------------------------------------------------------------- refusals


def test_a_slot_after_both_branches_may_be_none_again() -> None:
    @simt.kernel
    def k(c: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        s = c.get_mut(i)
        if s is not None:
            s.set(1.0)
        s.set(2.0)

    with pytest.raises(fl.FearlessError) as info:
        k.inspect(stage="ir")
    err = info.value
    assert err.diagnostic.code == "E0381"
    assert "`s` may be None here" in err.message
    assert "help: use it under `if s is not None:`" in str(err)


def test_the_is_none_branch_cannot_use_the_slot() -> None:
    @simt.kernel
    def k(c: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if (s := c.get_mut(i)) is None:
            s.set(1.0)

    with pytest.raises(fl.FearlessError, match="may be None"):
        k.inspect(stage="ir")
