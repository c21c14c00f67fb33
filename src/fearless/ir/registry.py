"""Registries of op handlers: how each visitor of the IR says which function handles an op class.

Every consumer of the IR (the LLVM lowering, the Tile IR bytecode lowering, the two simulators)
keeps one `Registry` and registers its handlers with it as decorators, numba's `@lower` style:

    lowers = Registry[Callable[..., None]]("the LLVM lowering")

    @lowers(ops.Load)
    def lower_load(lw, op): ...

The rules, the same for every visitor:

- **By exact class.** A handler serves the classes it names and no others: a subclass
  (`GridSync` of `Barrier`, `BlockReduce` of `WarpReduce`) has its own entry, and its base's
  handler never runs for it by accident. One function may name several classes.
- **Once.** A second handler for a class is an `InternalError` when the module that registers it
  is imported, naming both.
- **A missing handler** is an `InternalError` naming the op class, the op and the visitor
  (`lookup`). `handles(op_class)` answers without raising; the intrinsic tables and
  tests/test_intrinsics.py ask it.

Registration runs when the module defining a handler is imported, like a module-level table;
a visitor's entry module imports every module that registers with it, so its registry is
complete once the entry module is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ..errors import InternalError
from .core import Op

H = TypeVar("H", bound=Callable[..., Any])  # a visitor's handler type
F = TypeVar("F", bound=Callable[..., Any])  # a decorated function, returned unchanged


class Registry(Generic[H]):
    """Op class -> the one handler of one visitor (`visitor` names it in errors)."""

    def __init__(self, visitor: str) -> None:
        self.visitor = visitor
        self._table: dict[type[Op], H] = {}

    def __call__(self, *op_classes: type[Op]) -> Callable[[F], F]:
        """The decorator registering a function (or a method, in its class body) as the
        handler of `op_classes`; it returns the function unchanged."""
        if not op_classes:
            raise InternalError(f"a handler of {self.visitor} registered for no op class")
        for cls in op_classes:
            if not (isinstance(cls, type) and issubclass(cls, Op)):
                raise InternalError(f"{self.visitor}: {cls!r} is not an op class")

        def register(fn: F) -> F:
            for cls in op_classes:  # all or nothing: check every class first
                old = self._table.get(cls)
                if old is not None:
                    raise InternalError(
                        f"{self.visitor} has two handlers for {cls.__name__}: "
                        f"{_name(old)} and {_name(fn)}"
                    )
            for cls in op_classes:
                self._table[cls] = fn  # type: ignore[assignment]
            return fn

        return register

    def lookup(self, op: Op) -> H:
        """The handler of `op`'s class (exactly its class); an InternalError when it has none."""
        try:
            return self._table[type(op)]
        except KeyError:
            raise InternalError(
                f"{self.visitor} has no handler for {type(op).__name__} "
                f"(op `{op.opname}`, {op.loc})"
            ) from None

    def handles(self, op_class: type) -> bool:
        """Whether `op_class` (exactly) has a handler."""
        return op_class in self._table

    def classes(self) -> frozenset[type[Op]]:
        """Every op class with a handler."""
        return frozenset(self._table)

    def __repr__(self) -> str:
        return f"Registry({self.visitor!r}, {len(self._table)} op classes)"


def _name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
