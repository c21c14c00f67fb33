"""ir/registry.py: how every backend and simulator registers its op handlers (issue 34). The
coverage of the real registries, op class by op class, is tests/test_intrinsics.py's."""

from __future__ import annotations

from typing import Any

import pytest

from fearless.backends.llvm import lower as llvm_lower
from fearless.backends.tileir import lower as tileir_lower
from fearless.errors import InternalError, Location
from fearless.ir.core import Op
from fearless.ir.registry import Registry
from fearless.ir.simt import ops
from fearless.sim import simt as sim_simt
from fearless.sim.tile import interpreter as sim_tile

LOC = Location("k.py", 3, 4)


class Frobnicate(Op):
    opname = "frobnicate"

    def __init__(self) -> None:
        super().__init__([], [], LOC)


def test_a_handler_serves_exactly_the_classes_it_names() -> None:
    reg: Registry[Any] = Registry("the test visitor")

    @reg(ops.Barrier)
    def barrier(lw: object, op: Op) -> str:
        return "barrier"

    assert reg.lookup(ops.Barrier(LOC)) is barrier  # the decorator returns the function
    assert reg.handles(ops.Barrier) and not reg.handles(ops.GridSync)
    # a subclass (GridSync is a Barrier) is not served by its base's handler
    with pytest.raises(InternalError, match="the test visitor has no handler for GridSync"):
        reg.lookup(ops.GridSync(LOC))
    reg(ops.GridSync, Frobnicate)(barrier)  # one function, several classes
    assert reg.lookup(ops.GridSync(LOC)) is barrier
    assert reg.classes() == {ops.Barrier, ops.GridSync, Frobnicate}


def test_a_second_handler_is_refused() -> None:
    reg: Registry[Any] = Registry("the test visitor")
    reg(ops.Barrier)(lambda lw, op: None)
    with pytest.raises(
        InternalError, match=r"two handlers for Barrier: .*<lambda> and .*lower_barrier_again"
    ):

        @reg(ops.GridSync, ops.Barrier)
        def lower_barrier_again(lw: object, op: Op) -> None: ...

    assert not reg.handles(ops.GridSync)  # all or nothing


def test_only_op_classes_are_registered() -> None:
    reg: Registry[Any] = Registry("the test visitor")
    with pytest.raises(InternalError, match="is not an op class"):
        reg(int)  # type: ignore[arg-type]
    with pytest.raises(InternalError, match="for no op class"):
        reg()


def test_methods_register_in_their_class_body() -> None:
    reg: Registry[Any] = Registry("the test visitor")

    class Visitor:
        def visit(self, op: Op) -> Any:
            return reg.lookup(op)(self, op)

        @reg(Frobnicate)
        def frob(self, op: Frobnicate) -> tuple[Visitor, str]:
            return self, op.opname

    v = Visitor()
    assert v.visit(Frobnicate()) == (v, "frobnicate")


@pytest.mark.parametrize(
    ("registry", "visitor"),
    [
        (llvm_lower.lowers, "the LLVM lowering"),
        (sim_simt.plans, "the SIMT simulator"),
        (tileir_lower.lowers, "the Tile IR bytecode lowering"),
        (sim_tile.runs, "the Tile simulator"),
    ],
)
def test_an_op_without_a_handler_names_its_class_and_the_visitor(
    registry: Registry[Any], visitor: str
) -> None:
    with pytest.raises(InternalError) as info:
        registry.lookup(Frobnicate())
    text = str(info.value)
    assert f"{visitor} has no handler for Frobnicate" in text
    assert "`frobnicate`" in text and "k.py:3" in text
