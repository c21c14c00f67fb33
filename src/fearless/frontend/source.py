"""A Python function's source as the frontend sees it: AST, globals, and user locations.

`FunctionSource` parses a function once, remembers the offsets that map AST positions back to
the user's file (inspect.getsource dedents nested functions; we undo that), and resolves free
names through closures and globals at the time of compilation.

Globals and closure variables (the rule both tracks follow)
------------------------------------------------------------
A kernel reads the module globals and closure variables it names (`SCALE`, a `@simt.device`
helper, an annotation alias) when it is compiled, and the compiled form holds their values:
a constant is folded in, a device function inlined. So that binding one again between two
launches is not silently ignored, the compile records, for every free name of the kernel and
of each device function it reaches (`FunctionSource.free_values`; simt/compiler.py
`global_refs`), where it was found (the module's globals dict or the closure cell) and the
object found there (`GlobalRef`). Every launch then compares each recorded name's current
object with the recorded one by identity (`make_guard`: one dictionary or cell read and one
`is` per name, no hashing). When one differs, the kernel is compiled again with the new
values, which are part of its cache key (so the GPU runs the binary built for them, from the
disk cache when it was built before). A name bound again to an equal bool, int, float or str
of the same type (`SCALE = 2.0` run twice) keeps the compiled form.

Not followed, as in Triton: names bound to modules (`fl`, `math`), names that resolve to
builtins, attributes (`cfg.SCALE`, `helpers.BLOCK`: read when the kernel compiles, and part
of the cache key) and objects changed in place. Bind a module global again, or pass the value
as an argument, to change it between launches. Parameters and names the function assigns are
local, as in Python, and never recorded.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CellType, CodeType, ModuleType
from typing import Any

from ..errors import CompileError, FearlessError, Location
from ..frames import user_location


@dataclass
class FunctionSource:
    func: Callable[..., Any]
    file: str
    text: str
    tree: ast.FunctionDef
    line_offset: int
    col_offset: int
    # The function's closure cells by name: read when a name is resolved, not when the source
    # was loaded, so a kept FunctionSource sees a closure variable bound again.
    cells: dict[str, CellType] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.tree.name

    @property
    def closure(self) -> dict[str, Any]:
        """The closure variables' current values (cells not yet assigned are left out)."""
        out: dict[str, Any] = {}
        for name, cell in self.cells.items():
            try:
                out[name] = cell.cell_contents
            except ValueError:
                continue
        return out

    @property
    def globals(self) -> dict[str, Any]:
        return self.func.__globals__  # type: ignore[attr-defined, no-any-return]

    def loc(self, node: ast.AST) -> Location:
        line = getattr(node, "lineno", 1) + self.line_offset
        end_line = getattr(node, "end_lineno", None)
        end_col = getattr(node, "end_col_offset", None)
        return Location(
            self.file,
            line,
            getattr(node, "col_offset", 0) + self.col_offset,
            end_line + self.line_offset if end_line is not None else None,
            end_col + self.col_offset if end_col is not None else None,
        )

    def lookup(self, name: str) -> tuple[bool, Any]:
        """Resolve a free name: closure cell, then module global, then builtin."""
        found, value, _ = self.resolve(name)
        return found, value

    def resolve(self, name: str) -> tuple[bool, Any, GlobalRef | None]:
        """`lookup`, and where the name was found: a GlobalRef for a closure cell or a module
        global (what a launch compares, see the module docstring), None for a builtin."""
        cell = self.cells.get(name)
        if cell is not None:
            try:
                value = cell.cell_contents
            except ValueError:  # a cell not assigned yet: the name is not bound
                pass
            else:
                return True, value, GlobalRef(name, cell, value)
        g = self.globals
        if name in g:
            value = g[name]
            return True, value, GlobalRef(name, g, value)
        builtins = g.get("__builtins__")
        table = builtins if isinstance(builtins, dict) else getattr(builtins, "__dict__", {})
        if name in table:
            return True, table[name], None
        return False, None, None

    def local_names(self) -> set[str]:
        """The names the function binds (parameters and assigned names), as Python decides."""
        code = getattr(self.func, "__code__", None)
        local = set(code.co_varnames) | set(code.co_cellvars) if code is not None else set()
        local.update(a.arg for a in self.tree.args.args)
        return local

    def free_names(self) -> list[str]:
        """The names the function reads but does not bind, in order of first use (annotations
        included)."""
        local = self.local_names()
        seen: dict[str, None] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and node.id not in local:
                seen.setdefault(node.id)
        return list(seen)

    def free_values(self) -> Iterator[tuple[str, Any, GlobalRef | None]]:
        """(name, value, where it was found) for each free name that resolves; then, for each
        attribute chain on a module (`helpers.clamp`, `cfg.SCALE`), (dotted name, value, None).
        Chains are followed through modules only: reading a module's attribute runs no code."""
        names = self.free_names()
        for name in names:
            found, value, ref = self.resolve(name)
            if found:
                yield name, value, ref
        free = set(names)
        done: set[str] = set()
        for node in ast.walk(self.tree):
            chain: list[str] = []
            base: ast.AST = node
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if not chain or not isinstance(base, ast.Name) or base.id not in free:
                continue
            found, obj, _ = self.resolve(base.id)
            qual = base.id
            for attr in reversed(chain):
                if not isinstance(obj, ModuleType) or attr not in vars(obj):
                    break
                obj, qual = vars(obj)[attr], f"{qual}.{attr}"
                if not isinstance(obj, ModuleType) and qual not in done:
                    done.add(qual)
                    yield qual, obj, None

    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@dataclass(frozen=True, eq=False)
class GlobalRef:
    """A free name of a kernel as a compile read it: `scope` is the module's globals dict or
    the closure cell it was found in, `value` the object found there."""

    name: str
    scope: dict[str, Any] | CellType
    value: Any

    def current(self) -> tuple[bool, Any]:
        """(still bound?, the object bound there now)."""
        scope = self.scope
        if isinstance(scope, dict):
            return (True, scope[self.name]) if self.name in scope else (False, None)
        try:
            return True, scope.cell_contents
        except ValueError:
            return False, None

    def unchanged(self) -> bool:
        bound, value = self.current()
        return bound and value is self.value


def watched(refs: Sequence[GlobalRef]) -> list[GlobalRef]:
    """The refs a launch compares: not modules (see the module docstring), each scope and name
    once."""
    out: dict[tuple[int, str], GlobalRef] = {}
    for r in refs:
        if not isinstance(r.value, ModuleType):
            out.setdefault((id(r.scope), r.name), r)
    return list(out.values())


def _fresh_always() -> bool:
    return True


def make_guard(refs: Sequence[GlobalRef]) -> Callable[[], bool]:
    """A function that says whether every watched ref still holds its object: generated,
    straight-line (`scope[name] is value and cell.cell_contents is value ...`), so that a warm
    launch pays one dictionary or cell read and one identity test per name. Only indices
    appear in its source; the scopes, names and values are in its namespace."""
    refs = watched(refs)
    if not refs:
        return _fresh_always
    env: dict[str, Any] = {}
    tests = []
    for i, r in enumerate(refs):
        env[f"s{i}"], env[f"v{i}"] = r.scope, r.value
        if isinstance(r.scope, dict):
            env[f"n{i}"] = r.name
            tests.append(f"s{i}[n{i}] is v{i}")
        else:
            tests.append(f"s{i}.cell_contents is v{i}")
    source = (
        "def fresh():\n"
        "    try:\n"
        f"        return {' and '.join(tests)}\n"
        "    except (KeyError, ValueError):  # a global deleted, a cell emptied\n"
        "        return False\n"
    )
    exec(compile(source, "<fearless globals guard>", "exec"), env)
    return env["fresh"]  # type: ignore[no-any-return]


def _not_recorded() -> bool:
    """The guard before the first compile: nothing recorded, so the kernel records."""
    return False


class GlobalsGuard:
    """What a kernel's compiled forms read from its globals and closure (`refs`), and `fresh()`,
    the check a launch makes that each still holds the recorded object (`make_guard`). Both
    tracks' kernels keep one."""

    __slots__ = ("fresh", "refs")

    def __init__(self) -> None:
        self.refs: tuple[GlobalRef, ...] | None = None
        self.fresh: Callable[[], bool] = _not_recorded

    def record(self, refs: tuple[GlobalRef, ...]) -> bool:
        """Record `refs`, read just now; True when the compiled forms read other values (or
        none were recorded), so that the kernel drops them."""
        stale = self.refs is None or not same_values(self.refs, refs)
        self.refs = refs
        self.fresh = make_guard(refs)
        return stale


def changed_names(refs: Sequence[GlobalRef]) -> list[str]:
    """The watched names whose object is not the recorded one any more."""
    return [r.name for r in watched(refs) if not r.unchanged()]


def same_values(old: Sequence[GlobalRef], new: Sequence[GlobalRef]) -> bool:
    """Whether two recordings of the same kernel compile alike: the same names in the same
    places, each bound to the same object or to an equal bool, int, float or str (by type and
    repr, as the cache key hashes them: `-0.0` is not `0.0`)."""
    if len(old) != len(new):
        return False
    for a, b in zip(old, new, strict=True):
        if a.name != b.name or a.scope is not b.scope:
            return False
        x, y = a.value, b.value
        if x is y:
            continue
        if type(x) is not type(y) or type(x) not in (bool, int, float, str) or repr(x) != repr(y):
            return False
    return True


def check_decorated(
    func: object, decorator: str, example: str, error: type[FearlessError] = CompileError
) -> None:
    """Refuse `@decorator` (a track's `kernel`) on anything but a `def` function: `error` at
    the user's line, naming a use like `example`."""
    if not inspect.isfunction(func):
        raise error(
            f"`@{decorator}` decorates a `def` function, not {type(func).__name__}",
            user_location(),
            help=f"put `@{decorator}` (or `{example}`) on the line above a `def`",
        )


def load_source(func: Callable[..., Any]) -> FunctionSource:
    """Parse `func` (a plain Python function) into a FunctionSource."""
    code = getattr(func, "__code__", None)
    file, text, tree, line_offset, col_offset = (
        _parse(func) if code is None else _parsed_code(code, func)
    )
    cells = getattr(func, "__closure__", None)
    by_name: dict[str, CellType] = {}
    if code is not None and cells:
        by_name = dict(zip(code.co_freevars, cells, strict=False))
    return FunctionSource(
        func=func,
        file=file,
        text=text,
        tree=tree,
        line_offset=line_offset,
        col_offset=col_offset,
        cells=by_name,
    )


# A function's parse, by its code object: a kernel helper is inlined at every call, and reading
# its source (inspect's tokenizer) and parsing it again each time took a third of a Tile
# compile's front end. The trees are only read (lowering makes new nodes for what it rewrites).
# Keyed by the object's identity: code objects compare equal across files (their file is not
# compared), so two identical `def kernel` of two files would share one parse.
_PARSED: dict[int, tuple[CodeType, tuple[str, str, ast.FunctionDef, int, int]]] = {}


def _parsed_code(code: CodeType, func: Any) -> tuple[str, str, ast.FunctionDef, int, int]:
    entry = _PARSED.get(id(code))
    if entry is None or entry[0] is not code:
        entry = _PARSED[id(code)] = (code, _parse(func))  # holds `code`: its id stays its own
    return entry[1]


def _parse(func: Any) -> tuple[str, str, ast.FunctionDef, int, int]:
    """(file, dedented text, its def's tree, line offset, column offset) of `func`."""
    try:
        file = inspect.getsourcefile(func) or "<unknown>"
        lines, first_line = inspect.getsourcelines(func)
    except (OSError, TypeError) as exc:
        code = getattr(func, "__code__", None)
        where = None if code is None else Location(code.co_filename, code.co_firstlineno, 0)
        raise CompileError(
            f"cannot read the source of `{getattr(func, '__name__', func)}`: fearless compiles "
            "a kernel from its Python source (inspect.getsource), and this function has none",
            where,
            help="define the kernel in a .py file (a script or a module you import): not at "
            "the interactive prompt, nor by exec() or eval() of a string",
        ) from exc
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    first = next((ln for ln in lines if ln.strip()), "")
    indent = len(first) - len(first.lstrip())
    module = ast.parse(text)
    defs = [n for n in module.body if isinstance(n, ast.FunctionDef)]
    if not defs:
        raise CompileError(
            f"`{func.__name__}` is not a `def` function",
            Location(file, first_line, indent),
            help="kernels and device functions must be written with `def`",
        )
    return file, text, defs[0], first_line - 1, indent


_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)


def remember_scope(func: Callable[..., Any]) -> None:
    """Keep the locals of the frame that decorates a nested kernel whose annotations are
    strings (`from __future__ import annotations`): a factory's `tile.Part[dt]` names `dt`,
    which the function does not capture, so its module alone cannot resolve it. Called by the
    kernel decorators; the first frame outside fearless is the one that wrote `@...kernel`."""
    if "<locals>" not in getattr(func, "__qualname__", ""):
        return
    anns = getattr(func, "__annotations__", {})
    if not any(isinstance(a, str) for a in anns.values()):
        return
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is not None:
        func.__fearless_scope__ = dict(frame.f_locals)  # type: ignore[attr-defined]


def resolve_annotations(func: Callable[..., Any]) -> dict[str, Any]:
    """Parameter annotations as objects (string annotations evaluated in the function's module,
    and in its decorating factory's locals where `remember_scope` kept them)."""
    out: dict[str, Any] = {}
    scope = getattr(func, "__fearless_scope__", None)
    for name, p in inspect.signature(func).parameters.items():
        ann = p.annotation
        if ann is inspect.Parameter.empty:
            continue
        if isinstance(ann, str):
            try:
                ann = eval(ann, func.__globals__, scope)
            except Exception as exc:
                src = load_source(func)
                arg = next(a for a in src.tree.args.args if a.arg == name)
                at = src.loc(arg.annotation or arg)
                if isinstance(exc, FearlessError):  # the annotation's own mistake (`Const[str]`)
                    d = exc.diagnostic  # at the annotation, as a non-string one is said
                    raise type(exc)(
                        d.message, at, help=d.help, notes=d.notes, code=d.code
                    ) from None
                raise CompileError(
                    f"cannot resolve the annotation `{ann}`: {exc}", at, code="E0599"
                ) from None
        out[name] = ann
    return out
