"""The intrinsic tables (frontend/intrinsics.py): each track declares every callable a kernel may
use once, and every IR op an intrinsic introduces has a meaning in every backend and simulator
of its track."""

from __future__ import annotations

import math

import pytest

import fearless as fl
from fearless import simt, tile
from fearless.backends.llvm import lower as llvm_lower
from fearless.backends.tileir import lower as tileir_lower
from fearless.errors import CompileError, Location
from fearless.frontend.intrinsics import Backend, Call, IntrinsicTable
from fearless.ir.core import Op
from fearless.ir.simt import ops as simt_ops
from fearless.ir.tile import ops as tile_ops
from fearless.sim import simt as sim_simt
from fearless.sim.tile import interpreter as sim_tile
from fearless.simt.calls import INTRINSICS as SIMT
from fearless.tile.api import KERNEL_FUNCTIONS
from fearless.tile.intrinsics import INTRINSICS as TILE
from fearless.tile.intrinsics import OPS

SIMT_BACKENDS = [Backend("llvm", llvm_lower.lowers), Backend("sim", sim_simt.simulates)]
TILE_BACKENDS = [Backend("tileir", tileir_lower.lowers), Backend("sim", sim_tile.simulates)]
TERMINATORS = {simt_ops.Br, simt_ops.CondBr, simt_ops.Return, tile_ops.Yield, tile_ops.Return}


def _op_classes(module: object) -> set[type]:
    return {
        c
        for c in vars(module).values()
        if isinstance(c, type)
        and issubclass(c, Op)
        and c is not Op
        and not c.__name__.startswith("_")  # a private base (ops._Access) is no op kind
        and c.__module__ == module.__name__  # type: ignore[attr-defined]
    }


def test_every_simt_intrinsic_runs_on_every_simt_backend() -> None:
    assert SIMT.missing(SIMT_BACKENDS) == []
    assert len(list(SIMT)) >= len(simt_ops.MATH_FNS)  # every math function is declared


def test_every_tile_intrinsic_runs_on_every_tile_backend() -> None:
    assert TILE.missing(TILE_BACKENDS) == []
    assert set(OPS) == set(KERNEL_FUNCTIONS)  # each stub declares its ops
    for name, stub in KERNEL_FUNCTIONS.items():
        assert TILE.lookup(stub) is TILE[f"tile.{name}"]


def test_every_op_class_has_a_meaning_everywhere() -> None:
    """Not only the intrinsics' ops: the ops the frontends emit themselves too."""
    for module, backends in ((simt_ops, SIMT_BACKENDS), (tile_ops, TILE_BACKENDS)):
        for op in _op_classes(module) - TERMINATORS:
            for backend in backends:
                assert backend.runs(op), f"{op.__name__} has no meaning in {backend.name}"


def test_the_check_names_what_is_missing() -> None:
    class Frobnicate(Op):
        opname = "frobnicate"

    table: IntrinsicTable[object] = IntrinsicTable("test")
    table.declare([object()], "frob", ops=(Frobnicate,))(lambda lw, call: None)
    assert table.missing(SIMT_BACKENDS) == ["frob: Frobnicate (llvm)", "frob: Frobnicate (sim)"]


def test_lookup_is_by_host_object() -> None:
    assert SIMT.lookup(math.exp) is SIMT.lookup(fl.math.exp) is SIMT["math.exp"]
    assert SIMT.lookup(simt.thread.index_1d) is SIMT.lookup(simt.thread.index_2d)
    assert SIMT.lookup(fl.f16) is SIMT["fl.<dtype>"] is SIMT.lookup(fl.i8)
    assert SIMT.lookup(print) is SIMT["print"] and SIMT.lookup(math.isnan) is None
    assert TILE.lookup(print) is TILE["print"]
    assert TILE.lookup(tile.exp) is TILE["tile.exp"]
    assert TILE.lookup(abs) is TILE["abs"] and TILE.lookup(sorted) is None


def test_a_name_is_declared_once() -> None:
    table: IntrinsicTable[object] = IntrinsicTable("test")
    table.declare([len], "len")(lambda lw, call: None)
    with pytest.raises(ValueError, match="declared twice"):
        table.declare([abs], "len")(lambda lw, call: None)


def test_arity_and_keywords_are_checked_before_the_rule() -> None:
    intrinsic = SIMT["math.atan2"]
    loc = Location("k.py", 3, 4)
    with pytest.raises(CompileError, match=r"`math.atan2` takes 2 arguments but 1 was given"):
        intrinsic.check_call(Call("math.atan2", math.atan2, [1.0], {}, loc))
    with pytest.raises(CompileError, match="does not take keyword arguments"):
        intrinsic.check_call(Call("math.atan2", math.atan2, [1.0, 2.0], {"x": 1}, loc))


def test_min_needs_two_arguments_in_a_simt_kernel() -> None:
    @simt.kernel
    def k(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = min(x[i])

    with pytest.raises(CompileError, match=r"`min` takes at least 2 arguments but 1 was given"):
        k.inspect(stage="ir")
