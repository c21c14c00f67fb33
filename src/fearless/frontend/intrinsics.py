"""Intrinsic tables: what a kernel may call, declared once per intrinsic, for both tracks.

An intrinsic is a host object a kernel calls (`len`, `math.exp`, `simt.thread.index_1d`,
`tile.sum`, a dtype used as a conversion). Its declaration says, in one place:

    name      how users write it, for messages and docs ("math.exp", "tile.sum")
    rule      the frontend's typing and lowering rule: (lowerer, call) -> operand
    ops       the IR op classes the rule may emit; their operands, attributes and memory effect
              are declared on the op classes (ir/simt/ops.py, ir/tile/ops.py)
    arity     how many positional arguments it takes, checked before the rule runs
    keywords  whether it takes keyword arguments (Tile ops bind them to the stub's signature)

Each track owns one `IntrinsicTable`, next to its rules: `simt/intrinsics.py` (`INTRINSICS`) and
`tile/intrinsics.py` (`INTRINSICS`, built from the stubs of tile/api.py and the rules of
tile/lower_api.py). A `Backend` says which
op classes a consumer of the IR gives a meaning (the `handles` of its registry, ir/registry.py:
`backends/llvm/lower.lowers`, `backends/tileir/lower.lowers`, `sim/simt.plans`,
`sim/tile/interpreter.runs`), and
`IntrinsicTable.missing(backends)` names every op of every intrinsic that one of them cannot
run, so an intrinsic added without its lowering or its simulator semantics fails
tests/test_intrinsics.py instead of a user's kernel. The frontend does not import the backends:
the check is made by the tests (and by anyone holding both).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..errors import CompileError, Location

L = TypeVar("L")  # the track's lowerer


@dataclass
class Call:
    """A call in a kernel as an intrinsic's rule sees it: arguments already lowered."""

    name: str  # the callee as written (`math.exp`, `fl.f32`)
    callee: Any  # the host object called (`math.exp`, `fl.f32`), for rules shared by several
    args: list[Any]
    kwargs: dict[str, Any]
    loc: Location
    arg_locs: list[Location] = field(default_factory=list)
    kwarg_locs: dict[str, Location] = field(default_factory=dict)

    def arg_loc(self, i: int) -> Location:
        return self.arg_locs[i] if i < len(self.arg_locs) else self.loc


Rule = Callable[[L, Call], Any]


@dataclass(frozen=True)
class Intrinsic(Generic[L]):
    name: str
    rule: Rule[L]
    ops: tuple[type, ...] = ()
    arity: int | tuple[int, int] | None = None  # exact, (min, max), or checked by the rule
    keywords: bool = False
    doc: str = ""

    def check_call(self, call: Call) -> None:
        """The arity and keyword checks every call of this intrinsic gets (E0061)."""
        if call.kwargs and not self.keywords:
            raise CompileError(
                f"`{call.name}` does not take keyword arguments in kernels",
                call.loc,
                code="E0061",
            )
        if self.arity is None:
            return
        lo, hi = (self.arity, self.arity) if isinstance(self.arity, int) else self.arity
        n = len(call.args)
        if lo <= n <= hi:
            return
        want = str(lo) if lo == hi else f"{lo} to {hi}" if hi < 1 << 16 else f"at least {lo}"
        raise CompileError(
            f"`{call.name}` takes {want} argument{'s' if hi != 1 else ''} but {n} "
            f"{'were' if n != 1 else 'was'} given",
            call.loc,
            code="E0061",
        )


@dataclass(frozen=True)
class Backend:
    """A consumer of a track's IR: `runs(op_class)` says whether it gives the op a meaning."""

    name: str
    runs: Callable[[type], bool]


def host_key(obj: Any) -> Any:
    """The table key of a host object: bound methods (`simt.thread.index_1d`, a new object at
    every attribute access) by their instance and function; everything else by identity."""
    if inspect.ismethod(obj):
        return (id(obj.__self__), obj.__func__)
    return id(obj)


class IntrinsicTable(Generic[L]):
    """One track's intrinsics, found by the host object a kernel calls."""

    def __init__(self, track: str) -> None:
        self.track = track
        self._by_key: dict[Any, Intrinsic[L]] = {}
        self._keep: list[Any] = []  # the declared objects, so that their ids stay theirs
        self._by_kind: list[tuple[Callable[[Any], bool], Intrinsic[L]]] = []
        self._all: dict[str, Intrinsic[L]] = {}

    def declare(
        self,
        objs: Sequence[Any],
        name: str,
        *,
        ops: tuple[type, ...] = (),
        arity: int | tuple[int, int] | None = None,
        keywords: bool = False,
        doc: str = "",
    ) -> Callable[[Rule[L]], Rule[L]]:
        """Decorate the rule of the intrinsic that the host objects `objs` name."""

        def register(rule: Rule[L]) -> Rule[L]:
            self.add(Intrinsic(name, rule, ops, arity, keywords, doc or (rule.__doc__ or "")), objs)
            return rule

        return register

    def add(self, intrinsic: Intrinsic[L], objs: Sequence[Any]) -> None:
        if intrinsic.name in self._all:
            raise ValueError(f"{self.track} intrinsic `{intrinsic.name}` is declared twice")
        self._all[intrinsic.name] = intrinsic
        for obj in objs:
            self._keep.append(obj)
            self._by_key[host_key(obj)] = intrinsic

    def declare_kind(
        self,
        matches: Callable[[Any], bool],
        name: str,
        *,
        ops: tuple[type, ...] = (),
        arity: int | tuple[int, int] | None = None,
        doc: str = "",
    ) -> Callable[[Rule[L]], Rule[L]]:
        """Decorate the rule for every host object `matches` accepts (every dtype, say)."""

        def register(rule: Rule[L]) -> Rule[L]:
            intrinsic = Intrinsic(name, rule, ops, arity, False, doc or (rule.__doc__ or ""))
            if intrinsic.name in self._all:
                raise ValueError(f"{self.track} intrinsic `{intrinsic.name}` is declared twice")
            self._all[intrinsic.name] = intrinsic
            self._by_kind.append((matches, intrinsic))
            return rule

        return register

    def lookup(self, obj: Any) -> Intrinsic[L] | None:
        """The intrinsic a call of `obj` in a kernel means, or None (not an intrinsic)."""
        found = self._by_key.get(host_key(obj))
        if found is not None:
            return found
        for matches, intrinsic in self._by_kind:
            if matches(obj):
                return intrinsic
        return None

    def call(self, lowerer: L, intrinsic: Intrinsic[L], call: Call) -> Any:
        intrinsic.check_call(call)
        return intrinsic.rule(lowerer, call)

    def __iter__(self) -> Iterator[Intrinsic[L]]:
        return iter(self._all.values())

    def __getitem__(self, name: str) -> Intrinsic[L]:
        return self._all[name]

    def ops(self) -> set[type]:
        """Every IR op class some intrinsic of this table emits."""
        return {op for intrinsic in self for op in intrinsic.ops}

    def missing(self, backends: Sequence[Backend]) -> list[str]:
        """`intrinsic: op (backend)` for each declared op one of `backends` cannot run."""
        return [
            f"{intrinsic.name}: {op.__name__} ({backend.name})"
            for intrinsic in self
            for op in intrinsic.ops
            for backend in backends
            if not backend.runs(op)
        ]


def kernel_launch_error(obj: object, name: str, loc: Location, help: str) -> CompileError | None:
    """E0605 when `obj` is a fearless kernel (of either track, known by its
    `__fearless_kernel__` marker) that a kernel launches or calls; None for anything else."""
    if getattr(type(obj), "__fearless_kernel__", None) is None:
        return None
    return CompileError(
        f"cannot launch the kernel `{name}` from inside a kernel",
        loc,
        code="E0605",
        label="a kernel",
        help=f"kernels are launched from the host: launch `{name}` there, before or after this "
        f"one, or {help}",
    )


def host_function_error(
    name: str,
    loc: Location,
    help: str,
    kernel_form: Callable[[str], str | None] | None = None,
) -> CompileError:
    """E0605, one wording for both tracks: a kernel called something that is not an intrinsic
    (`help` says what the track can call instead). For a NumPy function (`np.exp`),
    `kernel_form(function name)` names the track's own function of that name, if it has one."""
    module, _, function = name.rpartition(".")
    form = kernel_form(function) if kernel_form and module in ("np", "numpy") else None
    if form is not None:
        help = f"NumPy functions run on the host; in a kernel call {form}"
    return CompileError(
        f"cannot call `{name}` from a kernel: it is a host Python function",
        loc,
        code="E0605",
        label="host function",
        help=help,
    )
