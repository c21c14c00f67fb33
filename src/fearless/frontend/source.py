"""A Python function's source as the frontend sees it: AST, globals, and user locations.

`FunctionSource` parses a function once, remembers the offsets that map AST positions back to
the user's file (inspect.getsource dedents nested functions; we undo that), and resolves free
names through closures and globals at the time of compilation.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import CompileError, Location


@dataclass
class FunctionSource:
    func: Callable[..., Any]
    file: str
    text: str
    tree: ast.FunctionDef
    line_offset: int
    col_offset: int
    closure: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.tree.name

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
        if name in self.closure:
            return True, self.closure[name]
        g = self.globals
        if name in g:
            return True, g[name]
        builtins = g.get("__builtins__")
        table = builtins if isinstance(builtins, dict) else getattr(builtins, "__dict__", {})
        if name in table:
            return True, table[name]
        return False, None

    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def load_source(func: Callable[..., Any]) -> FunctionSource:
    """Parse `func` (a plain Python function) into a FunctionSource."""
    try:
        file = inspect.getsourcefile(func) or "<unknown>"
        lines, first_line = inspect.getsourcelines(func)
    except (OSError, TypeError) as exc:
        raise CompileError(
            f"cannot read the source of `{getattr(func, '__name__', func)}`",
            help="kernels must be defined in a file (not typed at the interactive prompt)",
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
    closure: dict[str, Any] = {}
    code = getattr(func, "__code__", None)
    cells = getattr(func, "__closure__", None)
    if code is not None and cells:
        for name, cell in zip(code.co_freevars, cells, strict=False):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                continue
    return FunctionSource(
        func=func,
        file=file,
        text=text,
        tree=defs[0],
        line_offset=first_line - 1,
        col_offset=indent,
        closure=closure,
    )


def resolve_annotations(func: Callable[..., Any]) -> dict[str, Any]:
    """Parameter annotations as objects (string annotations evaluated in the function's module)."""
    out: dict[str, Any] = {}
    for name, p in inspect.signature(func).parameters.items():
        ann = p.annotation
        if ann is inspect.Parameter.empty:
            continue
        if isinstance(ann, str):
            try:
                ann = eval(ann, func.__globals__)
            except Exception as exc:
                src = load_source(func)
                arg = next(a for a in src.tree.args.args if a.arg == name)
                raise CompileError(
                    f"cannot resolve the annotation `{ann}`: {exc}", src.loc(arg), code="E0599"
                ) from None
        out[name] = ann
    return out
