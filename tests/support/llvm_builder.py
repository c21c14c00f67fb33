"""SIMT IR built by hand for the LLVM backend tests: `KernelBuilder`, the element-wise and
vecadd kernels, and `assemble_everywhere` (ptxas on every target)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fearless import dtypes as dt
from fearless.abi import LaunchContract, ParamSpec
from fearless.backends.llvm.lower import lower_function
from fearless.backends.llvm.ptx import compile_ptx, ptxas_check
from fearless.backends.toolchain import find_ptxas
from fearless.dtypes import DType
from fearless.errors import Location
from fearless.ir.core import ArrayType, Block, Function, ScalarType, Value
from fearless.ir.simt import ops
from fearless.ir.simt.verifier import verify

LOC = Location("kernels.py", 1, 0)


ARCHS = ("sm_80", "sm_90", "sm_90a")


class KernelBuilder:
    """Builds a kernel's IR op by op; `params` are (name, kind, dtype) as in the ABI."""

    def __init__(self, name: str, params: Sequence[tuple[str, str, DType]]) -> None:
        self.fn = Function(name, LOC)
        self.block = self.fn.new_block("entry")
        self.specs = [ParamSpec(n, k, d) for n, k, d in params]  # type: ignore[arg-type]
        self.args: dict[str, Value] = {}
        for n, kind, dtype in params:
            t = ScalarType(dtype) if kind == "scalar" else ArrayType(dtype, kind == "disjoint")
            self.args[n] = self.block.add_arg(t, LOC, n)
        self.sites = 0

    def __getitem__(self, name: str) -> Value:
        return self.args[name]

    def op(self, op: ops.Op) -> Value:
        self.block.append(op)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    def const(self, value: bool | int | float, dtype: DType) -> Value:
        return self.op(ops.Constant(value, dtype, LOC))

    def bin(self, kind: str, x: Value, y: Value) -> Value:
        return self.op(ops.Binary(kind, x, y, LOC))

    def checked_load(self, array: Value, index: Value) -> Value:
        self.op(ops.BoundsCheck(index, self.op(ops.ArrayLen(array, LOC)), self.site(), LOC))
        return self.op(ops.Load(array, index, LOC))

    def site(self) -> int:
        self.sites += 1
        return self.sites - 1

    def goto(self, block: Block) -> None:
        self.block = block

    def guarded(self, out: str) -> tuple[Value, Block]:
        """`i = index_1d(); if i < len(out):` -> (i as i64, the exit block); builder in the body."""
        i = self.op(ops.IndexToInt(self.op(ops.ThreadIndex1D(LOC)), LOC))
        n = self.op(ops.ArrayLen(self[out], LOC))
        body, done = self.fn.new_block("body"), self.fn.new_block("done")
        self.op(ops.CondBr(self.op(ops.Compare("lt", i, n, LOC)), body, [], done, [], LOC))
        done.append(ops.Return(LOC))
        self.goto(body)
        return i, done

    def lower(self, contract: LaunchContract | None = None) -> str:
        verify(self.fn)
        return str(lower_function(self.fn, self.specs, contract or LaunchContract(), self.fn.name))

    def ptx(self, arch: str = "sm_90", contract: LaunchContract | None = None) -> str:
        verify(self.fn)
        module = lower_function(self.fn, self.specs, contract or LaunchContract(), self.fn.name)
        return compile_ptx(module, arch)


def elementwise(
    name: str,
    ins: Sequence[DType],
    out: DType,
    body: Callable[..., Value],
) -> KernelBuilder:
    """`c[i] = body(kb, a0[i], a1[i], ...)` guarded by `i < len(c)`, loads bounds-checked."""
    params = [(f"a{k}", "slice", d) for k, d in enumerate(ins)] + [("c", "disjoint", out)]
    kb = KernelBuilder(name, params)
    i, done = kb.guarded("c")
    loaded = [kb.checked_load(kb[f"a{k}"], i) for k in range(len(ins))]
    kb.op(ops.Store(kb["c"], i, body(kb, *loaded), LOC))
    kb.op(ops.Br(done, [], LOC))
    return kb


def vecadd() -> KernelBuilder:
    return elementwise("vecadd", [dt.f32, dt.f32], dt.f32, lambda kb, x, y: kb.bin("add", x, y))


def assemble_everywhere(kb: KernelBuilder, contract: LaunchContract | None = None) -> None:
    if find_ptxas() is None:
        return
    for arch in ARCHS:
        report = ptxas_check(kb.ptx(arch, contract), arch)
        assert f"Compiling entry function '{kb.fn.name}' for '{arch}'" in report
