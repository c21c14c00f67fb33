"""Loop-carried variables whose type was guessed from a literal, and re-lowering their loop.

`s = 0` before `for ...: s += x[i]` with f32 `x` cannot know the type of `s` at the loop's
header: it is guessed from the literal (i64), the body finds f32, and raises `LoopRetry`; the
loop is then lowered again from the start with `s` typed f32 (a hint), so that literals adopt
the type of their use as DESIGN promises. Both tracks keep their loop's carried values in IR
values whose literal origin `LoopTypes` remembers, and both re-lower through `LoopTypes.lower`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from ..ir.core import Value

T = TypeVar("T")
Token = tuple[Hashable, ...]


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    """Names a statement list may assign (loop-carried candidates), in source order."""
    out: dict[str, None] = {}
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out[node.id] = None
    return list(out)


class LoopRetry(Exception):
    """Lower the loop `token` again with carried variable `name` typed `type` from the start."""

    def __init__(self, token: Token, name: str, type: object) -> None:
        super().__init__(name)
        self.token = token
        self.name = name
        self.type = type


class LoopTypes(Generic[T]):
    """The hints found by retries, and which carried values started as a literal."""

    def __init__(self) -> None:
        self.hints: dict[Token, dict[str, T]] = {}
        # A loop's carried value whose type was guessed from a literal: (loop token, name).
        self.origin: dict[Value, tuple[Token, str]] = {}

    def hint(self, token: Token, name: str) -> T | None:
        """The type a retry found for `name` in loop `token`, if one did."""
        return self.hints.get(token, {}).get(name)

    def guessed(self, value: Value, token: Token, name: str) -> None:
        """`value` carries `name` through loop `token` with a type guessed from a literal."""
        self.origin[value] = (token, name)

    def inherit(self, value: Value, init: object) -> None:
        """`value` carries on `init`, so it carries on `init`'s guess too (if it is one)."""
        origin = self.origin.get(init) if isinstance(init, Value) else None
        if origin is not None:
            self.origin[value] = origin

    def retry_if_guessed(self, value: object, wanted: T) -> None:
        """Re-lower the loop whose guess `value` is, with the type `wanted`; else do nothing.

        A literal adopts only a type it fits (dtypes.literal_fits): an int literal's guess may
        become any number type, a float literal's only another float type. `s = 0.0` then
        `s += j` with an i64 `j` is the mixed-kind error of `s + j`, not an i64 `s`."""
        origin = self.origin.get(value) if isinstance(value, Value) else None
        if origin is not None and _literal_may_become(value, wanted):
            raise LoopRetry(origin[0], origin[1], wanted)

    def retry_first_guess(self, value: object, wanted: T) -> None:
        """`retry_if_guessed`, for a guess no retry has corrected yet: a literal-started
        value meeting another type in an operator (`s = 0`, then `s + k` with an i32 `k`)
        takes it once, so two operators that disagree cannot send the loop back and forth."""
        origin = self.origin.get(value) if isinstance(value, Value) else None
        if origin is not None and self.hint(*origin) is None:
            self.retry_if_guessed(value, wanted)

    def lower(
        self,
        token: Token,
        attempt: Callable[[], None],
        checkpoint: Callable[[], Callable[[], None]],
    ) -> None:
        """Run `attempt` (lowering loop `token`) until no carried type was guessed wrong.

        `checkpoint()` notes the lowerer's state and returns what puts it back; a retry of an
        enclosing loop passes through, as that loop starts again.
        """
        while True:
            restore = checkpoint()
            try:
                attempt()
                return
            except LoopRetry as retry:
                if retry.token != token:
                    raise
                hints = self.hints.setdefault(token, {})
                if hints.get(retry.name) == retry.type:
                    raise  # pragma: no cover - the retry would not converge
                hints[retry.name] = cast(T, retry.type)
                restore()


def _literal_may_become(value: object, wanted: object) -> bool:
    """Whether a value guessed from a literal of its dtype's kind may take `wanted`'s dtype."""
    have = getattr(getattr(value, "type", None), "dtype", None)
    want = getattr(wanted, "dtype", None)
    if have is None or want is None:
        return True
    if have.is_float:
        return bool(want.is_float)
    if have.is_bool:
        return bool(want.is_bool)
    return True


@dataclass(frozen=True)
class Jumps:
    """Which jumps one loop's own body holds (not those of loops nested in it)."""

    breaks: bool
    continues: bool

    def __bool__(self) -> bool:
        return self.breaks or self.continues


def jumps_in(stmts: Sequence[ast.stmt]) -> Jumps:
    """The `break`s and `continue`s in `stmts` that belong to the loop around them."""
    found: set[type] = set()

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.Break | ast.Continue):
            found.add(type(node))
        elif not isinstance(node, ast.For | ast.While | ast.FunctionDef | ast.expr):
            for child in ast.iter_child_nodes(node):
                walk(child)

    for stmt in stmts:
        walk(stmt)
    return Jumps(ast.Break in found, ast.Continue in found)
