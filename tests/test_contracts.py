"""Launch contracts: `requires=` relations (parse, launch-time check, bounds proofs),
block/launch_bounds and the 1-D launch rule, on the simulator."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import simt


@simt.kernel(requires=("len(c) == len(a)", "len(b) >= len(c)", "n * 2 <= len(a) + 5"))
def add3(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32], n: int):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]


def test_requires_proves_bounds_on_other_arrays() -> None:
    text = add3.inspect(stage="ir")
    assert "0 bounds check(s) remain" in text, text


def test_requires_satisfied_launch_runs() -> None:
    a = np.arange(10, dtype=np.float32)
    c = np.zeros(10, np.float32)
    add3[1, 32](a, np.ones(12, np.float32), c, 7)
    np.testing.assert_array_equal(c, a + 1)


@pytest.mark.parametrize(
    ("b_len", "n", "broken", "note"),
    [
        (5, 1, "len(b) >= len(c)", "len(b) = 5, len(c) = 10"),
        (10, 8, "n * 2 <= len(a) + 5", "len(a) = 10, n = 8"),
    ],
)
def test_requires_violated_raises_before_running(
    b_len: int, n: int, broken: str, note: str
) -> None:
    a = np.ones(10, np.float32)
    c = np.full(10, -1.0, np.float32)
    with pytest.raises(fl.LaunchContractError) as info:
        add3[1, 32](a, np.ones(b_len, np.float32), c, n)
    err = info.value
    assert f"contract `{broken}`" in err.message
    assert note in str(err)
    assert err.loc is not None and err.loc.file == __file__
    np.testing.assert_array_equal(c, -1.0)


def test_requires_evaluated_without_overflow() -> None:
    @simt.kernel(requires=("n * n > 0",))
    def k(c: simt.DisjointSlice[fl.i64], n: fl.i64):
        i = simt.thread.index_1d()
        if i < len(c):
            c[i] = n

    c = np.zeros(4, np.int64)
    k[1, 32](c, np.int64(2**62))  # 2**124 in Python integers, not a wrapped i64
    assert c[0] == 2**62


@pytest.mark.parametrize(
    ("relation", "message"),
    [
        ("len(c) = len(a)", "it is not an expression"),
        ("len(c) < len(a) < 5", "exactly one comparison"),
        ("len(q) == 3", "`q` is not an array parameter"),
        ("a == 3", "`a` is an array: write `len(a)`"),
        ("len(c) == m", "`m` is not a parameter"),
        ("len(c) // 2 == 1", "is not allowed"),
    ],
)
def test_requires_grammar_errors(relation: str, message: str) -> None:
    @simt.kernel(requires=(relation,))
    def k(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(c):
            c[i] = a[i]

    with pytest.raises(fl.CompileError) as info:
        k.inspect(stage="ir")
    assert message in info.value.message
    assert info.value.diagnostic.code == "E0700"


@simt.kernel(block=128, launch_bounds=128)
def fixed(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = 1.0


@simt.kernel(launch_bounds=64)
def bounded(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = 1.0


@pytest.mark.parametrize(
    ("kernel", "grid", "block", "message"),
    [
        (fixed, 1, 256, "must be launched with block=(128, 1, 1)"),
        (bounded, 1, 128, "exceeds `bounded`'s launch_bounds=64"),
        (bounded, 0, 64, "every dimension must be at least 1"),
        (bounded, 1, 2048, "above the device's limit"),
        (bounded, 2**31, 64, "above the device's limit of 2147483647"),
        (bounded, (2, 2), 32, "needs a 1-D launch"),
        (bounded, 1.5, 32, "must be an int or a tuple of 1 to 3 ints"),
    ],
)
def test_launch_configuration_errors(
    kernel: simt.Kernel, grid: object, block: object, message: str
) -> None:
    c = np.zeros(8, np.float32)
    with pytest.raises(fl.LaunchContractError) as info:
        kernel[grid, block](c)
    assert message in str(info.value)
    np.testing.assert_array_equal(c, 0.0)


def test_prepare_validates_once_and_binds_the_kernel() -> None:
    prep = fixed.prepare(grid=1)
    c = np.zeros(8, np.float32)
    fixed(prep, c)
    np.testing.assert_array_equal(c, 1.0)
    with pytest.raises(fl.LaunchContractError, match="belongs to `fixed`"):
        bounded(prep, c)
    with pytest.raises(fl.LaunchContractError, match="must be launched with block"):
        fixed.prepare(grid=1, block=64)
    with pytest.raises(fl.LaunchContractError, match="needs a block size"):
        bounded.prepare(grid=1)


def test_block_contract_in_ptx() -> None:
    ptx = fixed.inspect(stage="ptx")
    assert ".reqntid 128, 1, 1" in ptx
    assert ".maxntid 64" in bounded.inspect(stage="ptx")
