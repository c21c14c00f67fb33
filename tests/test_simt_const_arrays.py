"""Module-level NumPy arrays read in SIMT kernels: read-only constants frozen at compile time
(issue 33, numba's `globals` example; simt/constants.py).

On the simulator against NumPy (1-D, 2-D, 3-D, closures, module attributes), the bounds
check of every read, the compile-time refusals (a write, an object array, too many bytes),
the snapshot rule (in-place changes after a compile are not seen; a rebinding compiles
again), the cache key, the IR text round trip, and the PTX (a `.const` global and `ld.const`)
built on the CPU.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless.backends.llvm.ptx import ptxas_check
from fearless.backends.toolchain import find_ptxas
from fearless.ir.simt import ops
from fearless.ir.simt.parser import parse_function
from fearless.ir.simt.printer import print_function
from fearless.ir.simt.verifier import verify
from fearless.simt import compiler as simt_compiler
from fearless.simt.constants import MAX_CONST_BYTES

HEADER = "import numpy as np\nimport fearless as fl\nfrom fearless import simt\n"

LOOKUP = """
LUT = np.array([0.0, 0.5, 1.0, 0.25, -2.0, 8.0, 3.5, 1e-3], dtype=np.float32)
GRID = (np.arange(20, dtype=np.int32) * 7 % 11).reshape(4, 5)
CUBE = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 8.0

@simt.kernel
def lookup(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = LUT[x[i]]

@simt.kernel
def lookup_2d(r: simt.Slice[fl.i32], c: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = GRID[r[i], c[i]] + fl.i32(GRID.shape[1])

@simt.kernel
def lookup_3d(out: simt.DisjointSlice[fl.f64]):
    i = simt.thread.index_1d()
    if i < len(out):
        k = i % CUBE.shape[2]
        out[i] = CUBE[i % 2, i % CUBE.shape[1], k]

@simt.kernel
def total(out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        s = 0.0
        for k in range(len(LUT)):       # `s` is guessed from the literal: lowered twice
            s += LUT[k]
        if i % 2 == 0:                  # first read in one arm, then in the other
            out[i] = s + LUT[0]
        else:
            out[i] = s - LUT[1]
"""


def _module(tmp_path: Path, name: str, body: str) -> dict[str, Any]:
    """Run `body` as the module `name` from a file (kernels need their source in a file)."""
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(body))
    scope: dict[str, Any] = {"__name__": name, "__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), scope)
    return scope


@pytest.fixture(autouse=True)
def _sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_TARGET", "sim")


def test_a_lookup_table_reads_like_numpy(tmp_path: Path) -> None:
    m = _module(tmp_path, "c_lookup", LOOKUP)
    x = np.random.default_rng(0).integers(0, 8, 300).astype(np.int32)
    out = np.zeros(300, np.float32)
    m["lookup"][2, 256](x, out)
    np.testing.assert_array_equal(out, m["LUT"][x])


def test_a_2d_and_a_3d_table_read_like_numpy(tmp_path: Path) -> None:
    m = _module(tmp_path, "c_lookup_2d", LOOKUP)
    rng = np.random.default_rng(1)
    r = rng.integers(0, 4, 100).astype(np.int32)
    c = rng.integers(0, 5, 100).astype(np.int32)
    out = np.zeros(100, np.int32)
    m["lookup_2d"][1, 128](r, c, out)
    np.testing.assert_array_equal(out, m["GRID"][r, c] + 5)
    i = np.arange(50)
    out3 = np.zeros(50)
    m["lookup_3d"][1, 64](out3)
    np.testing.assert_array_equal(out3, m["CUBE"][i % 2, i % 3, i % 4])


def test_one_op_per_array_dominates_every_read(tmp_path: Path) -> None:
    """Reads in a loop lowered twice and in both arms of an `if` share one hoisted op, and
    the loop's guard `k < len(LUT)` proves its reads."""
    m = _module(tmp_path, "c_hoist", LOOKUP)
    k = m["total"]
    out = np.zeros(6, np.float32)
    k[1, 32](out)
    s = np.float32(0.0)
    for v in m["LUT"]:
        s = np.float32(s + v)
    np.testing.assert_array_equal(out, [s + 0.0, s - 0.5] * 3)
    fn = k.compiled_ir().fn
    consts = [op for op in fn.ops() if isinstance(op, ops.ConstArray)]
    assert len(consts) == 1 and consts[0].block is fn.entry
    verify(fn)
    reads = [op for op in fn.ops() if isinstance(op, ops.Load)]
    assert len(reads) == 3
    # the loop's read (its index below `len(LUT)`) and the two stores are proven; LUT[0] and
    # LUT[1] keep their checks in the IR (LLVM folds them: the extent is a constant)
    assert k.inspect(stage="ir").startswith(
        "// kernel total: 2 bounds check(s) remain on the device, 3 proven by guards"
    )


def test_an_out_of_bounds_read_raises_at_its_line(tmp_path: Path) -> None:
    m = _module(tmp_path, "c_oob", LOOKUP)
    x = np.array([0, 3, 8, 1], np.int32)
    with pytest.raises(fl.KernelIndexError, match="the len is 8 but the index is 8") as e:
        m["lookup"][1, 32](x, np.zeros(4, np.float32))
    assert e.value.loc is not None and e.value.loc.line == 13
    assert "`LUT`" in str(e.value)
    neg = np.array([-1], np.int32)
    with pytest.raises(fl.KernelIndexError, match="index is -1"):
        m["lookup"][1, 32](neg, np.zeros(1, np.float32))
    r, c = np.array([0], np.int32), np.array([5], np.int32)
    with pytest.raises(fl.KernelIndexError, match="on axis 1 of `GRID`"):
        m["lookup_2d"][1, 32](r, c, np.zeros(1, np.int32))


def test_a_closure_array_and_a_module_attribute_are_constants(tmp_path: Path) -> None:
    m = _module(
        tmp_path,
        "c_closure",
        """
        import types
        tables = types.ModuleType("tables")
        tables.SQUARES = np.arange(10, dtype=np.int64) ** 2

        def make(weights):
            @simt.kernel
            def weigh(x: simt.Slice[fl.i64], out: simt.DisjointSlice[fl.i64]):
                i = simt.thread.index_1d()
                if i < len(out):
                    out[i] = weights[x[i] % len(weights)] * tables.SQUARES[x[i]]
            return weigh
        """,
    )
    w = np.array([1, -1, 2], np.int64)
    x = np.arange(10, dtype=np.int64)
    out = np.zeros(10, np.int64)
    m["make"](w)[1, 32](x, out)
    np.testing.assert_array_equal(out, w[x % 3] * x**2)


def test_the_values_are_frozen_when_the_kernel_compiles(tmp_path: Path) -> None:
    m = _module(tmp_path, "c_frozen", LOOKUP)
    x = np.arange(8, dtype=np.int32)
    out = np.zeros(8, np.float32)
    m["lookup"][1, 32](x, out)
    before = m["LUT"].copy()
    m["LUT"][:] = 100.0  # in place, after the compile: the kernel keeps its copy
    m["lookup"][1, 32](x, out)
    np.testing.assert_array_equal(out, before)
    fresh = _module(tmp_path, "c_frozen_new", LOOKUP)  # another kernel compiles afresh
    fresh["LUT"][:] = 100.0
    fresh["lookup"][1, 32](x, out)
    assert (out == 100.0).all()
    m["LUT"] = np.full(8, 7.0, np.float32)  # bound again: followed, compiled again
    m["lookup"][1, 32](x, out)
    assert (out == 7.0).all()


def test_the_cache_key_holds_the_array_bytes_dtype_and_shape(tmp_path: Path) -> None:
    def key(name: str, lut: str) -> str:
        body = LOOKUP.replace(
            "LUT = np.array([0.0, 0.5, 1.0, 0.25, -2.0, 8.0, 3.5, 1e-3], dtype=np.float32)", lut
        )
        m = _module(tmp_path, name, body)
        return simt_compiler.cache_key(m["lookup"].spec, "sm_90")

    base = key("k_a", "LUT = np.arange(8, dtype=np.float32)")
    assert key("k_b", "LUT = np.arange(8, dtype=np.float32)") == base
    assert key("k_c", "LUT = np.arange(8, dtype=np.float32); LUT[3] = 9") != base
    assert key("k_d", "LUT = np.arange(8, dtype=np.float64)") != base
    assert key("k_e", "LUT = np.arange(9, dtype=np.float32)") != base


def test_a_build_after_an_in_place_change_is_keyed_by_the_frozen_bytes(tmp_path: Path) -> None:
    """The IR compiled before the change holds the old bytes: a GPU build from it must not be
    stored under the key of the new bytes (another process would load the wrong values)."""
    m = _module(tmp_path, "c_key_frozen", LOOKUP)
    k = m["lookup"]
    ir = k.compiled_ir()
    spec = k.spec
    old = simt_compiler.cache_key(spec, "sm_90")
    m["LUT"][0] = 42.0
    assert simt_compiler.cache_key(spec, "sm_90") != old
    assert simt_compiler.cache_key(spec, "sm_90", ir.constants) == old


def test_the_ir_text_round_trips(tmp_path: Path) -> None:
    m = _module(tmp_path, "c_text", LOOKUP)
    for name in ("lookup", "lookup_2d", "lookup_3d", "total"):
        fn = m[name].compiled_ir().fn
        text = print_function(fn)
        again = parse_function(text)
        verify(again)
        assert print_function(again) == text
    assert "const.array {name='CUBE'" in m["lookup_3d"].inspect(stage="ir")
    assert ": Const[f64, 2, 3, 4]" in m["lookup_3d"].inspect(stage="ir")


def test_the_ptx_holds_the_constant_and_loads_it(tmp_path: Path) -> None:
    m = _module(tmp_path, "c_ptx", LOOKUP)
    llvm = m["lookup"].inspect(stage="llvm", arch="sm_90")
    assert "internal addrspace(4) constant [32 x i8]" in llvm
    ptx = m["lookup"].inspect(stage="ptx", arch="sm_90")
    assert ".const .align 16 .b8 __const_LUT_" in ptx
    assert "ld.const.b32" in ptx or "ld.const.f32" in ptx
    ptx3 = m["lookup_3d"].inspect(stage="ptx", arch="sm_90")
    assert ".const .align 16 .b8 __const_CUBE_" in ptx3 and "ld.const" in ptx3
    if find_ptxas() is not None:
        ptxas_check(ptx, "sm_90")


def test_a_write_is_refused(tmp_path: Path) -> None:
    m = _module(
        tmp_path,
        "c_write",
        """
        LUT = np.zeros(4, np.float32)

        @simt.kernel
        def bump(out: simt.DisjointSlice[fl.f32]):
            i = simt.thread.index_1d()
            if i < len(out):
                LUT[0] += 1.0
        """,
    )
    with pytest.raises(fl.SafetyError, match="`LUT` is a module-level NumPy array") as e:
        m["bump"][1, 32](np.zeros(4, np.float32))
    assert e.value.code == "E0594" and e.value.loc is not None and e.value.loc.line == 11


@pytest.mark.parametrize(
    ("definition", "match"),
    [
        ("np.array([1, 'a', None], dtype=object)", "NumPy array of object"),
        ("np.zeros(4, np.complex64)", "NumPy array of complex64"),
        (f"np.zeros({MAX_CONST_BYTES // 4 + 1}, np.float32)", "more than the 65536 bytes"),
        ("np.zeros((2, 2, 2, 2), np.float32)", "a 4-D NumPy array"),
        ("np.array(2.0, np.float32)", "a 0-D NumPy array"),
    ],
)
def test_arrays_a_kernel_cannot_hold_are_refused(
    tmp_path: Path, definition: str, match: str
) -> None:
    m = _module(
        tmp_path,
        f"c_bad_{abs(hash(definition))}",
        f"""
        BIG = {definition}

        @simt.kernel
        def read(out: simt.DisjointSlice[fl.f32]):
            i = simt.thread.index_1d()
            if i < len(out):
                out[i] = fl.f32(BIG[0])
        """,
    )
    with pytest.raises(fl.FearlessError, match=match) as e:
        m["read"][1, 32](np.zeros(4, np.float32))
    assert e.value.code == "E0650" and e.value.loc is not None and e.value.loc.line == 11


def test_two_arrays_share_the_constant_budget(tmp_path: Path) -> None:
    half = MAX_CONST_BYTES // 8 + 1
    m = _module(
        tmp_path,
        "c_budget",
        f"""
        A = np.zeros({half}, np.float32)
        B = np.zeros({half}, np.float32)

        @simt.kernel
        def read(out: simt.DisjointSlice[fl.f32]):
            i = simt.thread.index_1d()
            if i < len(out):
                out[i] = A[i] + B[i]
        """,
    )
    with pytest.raises(fl.CompileError, match="the kernel's other constant arrays"):
        m["read"][1, 32](np.zeros(4, np.float32))
