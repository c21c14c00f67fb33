"""`fearless check`, part 1: which names are kernels, and which of their parameters are outputs.

Everything here reads source with `ast`; no checked file and no module it imports is ever
imported or run. A kernel is a function decorated with `simt.kernel` or `tile.kernel`, in any
spelling the imports allow (`from fearless import simt`, `import fearless.simt as s`,
`from fearless.simt import kernel`, with or without `(...)` arguments). Its array parameters are
outputs (`simt.DisjointSlice[T]`, `tile.Part[T]`) or inputs (`simt.Slice[T]`,
`tile.Tensor[T]`); any other parameter is a scalar the borrow check ignores.

A kernel imported from another module (`from mykernels import vecadd`, `import mykernels as mk`
then `mk.vecadd[...]`, relative imports) is found by locating that module's file as Python
would, without importing it: next to the importing file, above it up to its package root, in
the current directory, then on `sys.path`. Each located file is parsed once per run, and only
when a name from it is used where a kernel may stand; it is decoded as Python would (its coding
line), and one that cannot be read or parsed holds no kernels.
"""

from __future__ import annotations

import ast
import sys
import tokenize
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

# Annotation type names, by role (DESIGN section 2). `Const[...]` and dtypes are scalars.
OUTPUT_KINDS = frozenset({"DisjointSlice", "AtomicSlice", "Part"})
INPUT_KINDS = frozenset({"Slice", "Tensor"})
# The decorator, as a dotted path below `fearless`, and the track it makes.
DECORATORS = {
    "simt.kernel": "simt",
    "simt.api.kernel": "simt",
    "tile.kernel": "tile",
    "tile.kernel.kernel": "tile",
}
# How deep `from a import k` chains (a re-exports from b, which re-exports from c...) are followed.
MAX_REEXPORT_DEPTH = 8


@dataclass(frozen=True)
class Param:
    """A kernel parameter: its name and the type name of its annotation ("" for scalars)."""

    name: str
    kind: str

    @property
    def is_output(self) -> bool:
        return self.kind in OUTPUT_KINDS

    @property
    def is_array(self) -> bool:
        return self.kind in OUTPUT_KINDS or self.kind in INPUT_KINDS


@dataclass(frozen=True)
class KernelSig:
    """What the checker knows about a kernel: its track and its positional parameters."""

    name: str
    track: str  # "simt" or "tile"
    params: tuple[Param, ...]
    file: str
    line: int


@dataclass(frozen=True)
class ImportRef:
    """What an import statement bound a name to: the module `module` (with `level` leading dots,
    relative to the file `origin`), or its attribute `attr` for `from module import attr`."""

    origin: Path
    level: int
    module: str
    attr: str | None

    def dotted(self) -> str:
        parts = [p for p in (self.module, self.attr) if p]
        return "." * self.level + ".".join(parts)


def import_bindings(stmt: ast.Import | ast.ImportFrom, origin: Path) -> list[tuple[str, ImportRef]]:
    """The names an import statement binds, each with what it refers to (`*` binds nothing we
    can see)."""
    out: list[tuple[str, ImportRef]] = []
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                out.append((alias.asname, ImportRef(origin, 0, alias.name, None)))
            else:  # `import a.b` binds `a`
                top = alias.name.split(".")[0]
                out.append((top, ImportRef(origin, 0, top, None)))
        return out
    for alias in stmt.names:
        if alias.name != "*":
            ref = ImportRef(origin, stmt.level, stmt.module or "", alias.name)
            out.append((alias.asname or alias.name, ref))
    return out


def attr_chain(expr: ast.expr) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; None for anything that is not names and attributes."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return parts[::-1]


def decorator_track(dec: ast.expr, lookup: Callable[[str], ImportRef | None]) -> str | None:
    """The track ("simt", "tile") if `dec` is fearless's kernel decorator, else None."""
    chain = attr_chain(dec.func if isinstance(dec, ast.Call) else dec)
    if not chain:
        return None
    ref = lookup(chain[0])
    if ref is None or ref.level:
        return None
    dotted = ".".join([ref.dotted(), *chain[1:]])
    if not dotted.startswith("fearless."):
        return None
    return DECORATORS.get(dotted[len("fearless.") :])


def annotation_kind(ann: ast.expr | None) -> str:
    """The role-bearing type name of an annotation: `simt.Slice[fl.f32]` -> "Slice"."""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):  # a quoted annotation
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return ""
    if isinstance(ann, ast.Subscript):
        ann = ann.value
    chain = attr_chain(ann) if ann is not None else None
    name = chain[-1] if chain else ""
    return name if name in OUTPUT_KINDS or name in INPUT_KINDS else ""


def kernel_sig(fn: ast.FunctionDef | ast.AsyncFunctionDef, track: str, file: str) -> KernelSig:
    args = [*fn.args.posonlyargs, *fn.args.args]
    params = tuple(Param(a.arg, annotation_kind(a.annotation)) for a in args)
    return KernelSig(fn.name, track, params, file, fn.lineno)


def _top_level(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, looking into `if`/`try` blocks (`if TYPE_CHECKING:` imports)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _top_level(stmt.body)
            yield from _top_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse):
                yield from _top_level(block)


@dataclass
class ModuleInfo:
    """A module file read for its kernels: its top-level imports and kernel definitions."""

    path: Path
    refs: dict[str, ImportRef]
    kernels: dict[str, KernelSig]


def read_module(path: Path, tree: ast.Module) -> ModuleInfo:
    refs: dict[str, ImportRef] = {}
    for stmt in _top_level(tree.body):
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            refs.update(import_bindings(stmt, path))
    kernels: dict[str, KernelSig] = {}
    for stmt in _top_level(tree.body):
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            for dec in stmt.decorator_list:
                track = decorator_track(dec, refs.get)
                if track:
                    kernels[stmt.name] = kernel_sig(stmt, track, str(path))
    return ModuleInfo(path, refs, kernels)


class Resolver:
    """Finds the kernels that imported names denote, reading each module file at most once."""

    def __init__(self, search_path: Sequence[Path] | None = None) -> None:
        self._search = list(search_path) if search_path is not None else _default_search_path()
        self._modules: dict[Path, ModuleInfo | None] = {}
        self._located: dict[tuple[Path, int, str], Path | None] = {}
        self._resolved: dict[tuple[ImportRef, tuple[str, ...]], KernelSig | None] = {}
        self._texts: dict[Path, str] = {}

    def resolve(self, ref: ImportRef, attrs: Sequence[str] = ()) -> KernelSig | None:
        """The kernel that `name.attr1.attr2...` denotes, where an import bound `name` by `ref`."""
        key = (ref, tuple(attrs))
        if key not in self._resolved:
            self._resolved[key] = self._resolve(ref, attrs)
        return self._resolved[key]

    def _resolve(self, ref: ImportRef, attrs: Sequence[str]) -> KernelSig | None:
        parts = [*(ref.module.split(".") if ref.module else []), *([ref.attr] if ref.attr else [])]
        parts += attrs
        if not parts or (ref.level == 0 and len(parts) < 2):
            return None  # `import m` then `m` itself: a module, not a kernel
        return self.kernel(".".join(parts[:-1]), ref.level, ref.origin, parts[-1], 0)

    def may_hold_kernels(self, ref: ImportRef) -> bool:
        """Whether what an import binds is a kernel, or a module that may hold some: one that
        imports fearless, or a package that imports relatively from one (re-exporting). A cheap
        textual test, so that `import numpy` costs a few file reads, not a parse of numpy."""
        if ref.attr and self.resolve(ref) is not None:
            return True
        if ref.level == 0 and ref.module.split(".")[0] == "fearless":
            return False  # fearless itself: its kernels are the user's, found by `resolve`
        for module in (".".join(p for p in (ref.module, ref.attr) if p), ref.module):
            path = self.locate(module, ref.level, ref.origin)
            if path is not None:
                return self._holds(path, follow=True)
        return False

    def _holds(self, path: Path, follow: bool) -> bool:
        if "fearless" in self._text(path):
            return True
        info = self.module(path) if follow else None
        for ref in info.refs.values() if info else ():
            parts = (".".join(p for p in (ref.module, ref.attr) if p), ref.module)
            sub = next((q for m in parts if (q := self.locate(m, ref.level, path))), None)
            if ref.level and sub is not None and self._holds(sub, follow=False):
                return True
        return False

    def _text(self, path: Path) -> str:
        """The module's text, decoded as Python decodes it; "" if it cannot be read."""
        path = path.resolve()
        if path not in self._texts:
            try:
                with tokenize.open(path) as f:
                    self._texts[path] = f.read()
            except (OSError, SyntaxError, UnicodeDecodeError):  # SyntaxError: a bad coding line
                self._texts[path] = ""
        return self._texts[path]

    def kernel(
        self, module: str, level: int, origin: Path, name: str, depth: int
    ) -> KernelSig | None:
        """Kernel `name` of `module`, following re-exports (`from .impl import name`)."""
        path = self.locate(module, level, origin)
        info = self.module(path) if path is not None else None
        if info is None:
            return None
        if name in info.kernels:
            return info.kernels[name]
        ref = info.refs.get(name)
        if ref is None or ref.attr is None or depth >= MAX_REEXPORT_DEPTH:
            return None
        return self.kernel(ref.module, ref.level, ref.origin, ref.attr, depth + 1)

    def locate(self, module: str, level: int, origin: Path) -> Path | None:
        """The file of `module` as imported from `origin`, or None (not found, or not a file)."""
        key = (origin.parent, level, module)
        if key not in self._located:
            self._located[key] = self._locate(module, level, origin)
        return self._located[key]

    def _locate(self, module: str, level: int, origin: Path) -> Path | None:
        if level:
            base = origin.resolve().parent
            for _ in range(level - 1):
                base = base.parent
            bases = [base]
        else:
            bases = [*_import_roots(origin), *self._search]
        parts = module.split(".") if module else []
        for base in bases:
            target = base.joinpath(*parts)
            for candidate in (target.with_suffix(".py") if parts else None, target / "__init__.py"):
                if candidate is not None and candidate.is_file():
                    return candidate
        return None

    def module(self, path: Path) -> ModuleInfo | None:
        """The module at `path`, parsed once; None if it cannot be read or parsed."""
        path = path.resolve()
        if path not in self._modules:
            info: ModuleInfo | None = None
            text = self._text(path)
            try:
                info = read_module(path, ast.parse(text, str(path))) if text else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):  # or nested too deeply
                info = None
            self._modules[path] = info
        return self._modules[path]


def _import_roots(origin: Path) -> list[Path]:
    """Where an absolute import in `origin` may be found: the file's folder, then the folder
    above its package (for `pkg.mod` imports from inside `pkg`), then the current directory."""
    here = origin.resolve().parent
    roots = [here]
    top = here
    while (top / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    if top != here:
        roots.append(top)
    roots.append(Path.cwd())
    return roots


def _default_search_path() -> list[Path]:
    return [Path(p) for p in sys.path if p and Path(p).is_dir()]
