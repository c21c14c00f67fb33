"""The intrinsic tables (frontend/intrinsics.py): each track declares every callable a kernel may
use once, and every IR op an intrinsic introduces has a meaning in every backend and simulator
of its track."""

from __future__ import annotations

import math
from typing import Any

import pytest

import fearless as fl
from fearless import simt, tile
from fearless.backends.llvm import lower as llvm_lower
from fearless.backends.tileir import lower as tileir_lower
from fearless.errors import CompileError, Location
from fearless.frontend.intrinsics import Backend, Call, IntrinsicTable
from fearless.ir.core import Op
from fearless.ir.registry import Registry
from fearless.ir.simt import ops as simt_ops
from fearless.ir.simt import ops_block as simt_ops_block
from fearless.ir.simt import ops_const as simt_ops_const
from fearless.ir.tile import ops as tile_ops
from fearless.sim import simt as sim_simt
from fearless.sim.tile import interpreter as sim_tile
from fearless.simt.intrinsics import INTRINSICS as SIMT
from fearless.tile.api import KERNEL_FUNCTIONS
from fearless.tile.intrinsics import INTRINSICS as TILE
from fearless.tile.intrinsics import OPS

# Each consumer of a track's IR and its registry of handlers (ir/registry.py).
SIMT_REGISTRIES: dict[str, Registry[Any]] = {"llvm": llvm_lower.lowers, "sim": sim_simt.plans}
TILE_REGISTRIES: dict[str, Registry[Any]] = {"tileir": tileir_lower.lowers, "sim": sim_tile.runs}
SIMT_BACKENDS = [Backend(name, r.handles) for name, r in SIMT_REGISTRIES.items()]
TILE_BACKENDS = [Backend(name, r.handles) for name, r in TILE_REGISTRIES.items()]

# The op classes a consumer runs without a handler of their own, and why. Nothing else may be
# missing from a registry, and nothing here may have a handler (the list cannot go stale).
SIMT_EXEMPT: dict[str, set[type[Op]]] = {
    "llvm": set(),
    # the terminators: `SimKernel._plan_block` turns them into the block's edges
    "sim": {simt_ops.Br, simt_ops.CondBr, simt_ops.Return},
}
TILE_EXEMPT: dict[str, set[type[Op]]] = {
    # tile.yield ends a region, tile.return the kernel: `_Lowerer.block` / `_Block.run` stop
    # walking the block there (the bytecode's ReturnOp is written by `_Lowerer.block`)
    "tileir": {tile_ops.Yield, tile_ops.Return},
    "sim": {tile_ops.Yield, tile_ops.Return},
}


def _op_classes(*modules: object) -> set[type[Op]]:
    """Every op kind defined in `modules` (ir/simt/ops*.py: each module's own classes)."""
    return {
        c
        for module in modules
        for c in vars(module).values()
        if isinstance(c, type)
        and issubclass(c, Op)
        and c is not Op
        and not c.__name__.startswith("_")  # a private base (ops._Access) is no op kind
        and c.__module__ == module.__name__  # type: ignore[attr-defined]
    }


SIMT_OPS = _op_classes(simt_ops, simt_ops_block, simt_ops_const)
TILE_OPS = _op_classes(tile_ops)


def test_every_simt_intrinsic_runs_on_every_simt_backend() -> None:
    assert SIMT.missing(SIMT_BACKENDS) == []
    assert len(list(SIMT)) >= len(simt_ops.MATH_FNS)  # every math function is declared


def test_every_tile_intrinsic_runs_on_every_tile_backend() -> None:
    assert TILE.missing(TILE_BACKENDS) == []
    assert set(OPS) == set(KERNEL_FUNCTIONS)  # each stub declares its ops
    for name, stub in KERNEL_FUNCTIONS.items():
        assert TILE.lookup(stub) is TILE[f"tile.{name}"]


def test_every_op_class_has_a_meaning_everywhere() -> None:
    """Not only the intrinsics' ops: the ops the frontends emit themselves too. Every op class
    of ir/simt/ops*.py has a handler in the LLVM lowering and the SIMT simulator, and every one
    of ir/tile/ops.py in the bytecode lowering and the Tile simulator, but for the exemptions
    above; a registry holds no other track's class."""
    assert len(SIMT_OPS) >= 40 and len(TILE_OPS) >= 30  # the modules were read
    for track_ops, registries, exempt in (
        (SIMT_OPS, SIMT_REGISTRIES, SIMT_EXEMPT),
        (TILE_OPS, TILE_REGISTRIES, TILE_EXEMPT),
    ):
        for name, registry in registries.items():
            missing = {op.__name__ for op in track_ops - exempt[name] if not registry.handles(op)}
            assert not missing, f"no handler in {registry.visitor} ({name}) for {sorted(missing)}"
            stale = {op.__name__ for op in exempt[name] if registry.handles(op)}
            assert not stale, f"{sorted(stale)} are exempt in {name} but have a handler"
            stray = {op.__name__ for op in registry.classes() - track_ops}
            assert not stray, f"{registry.visitor} registers foreign op classes {sorted(stray)}"


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
