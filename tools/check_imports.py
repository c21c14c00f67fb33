"""The import graph of src/fearless and the packages beside it (src/fearless_bench), held against
the house rules of docs/design.md §2.2: no cycle among files, no cycle among packages, no import
up the layers of §2.1 (LAYERS below), and fearless imports a package beside it only where
BESIDE says (`fearless bench` imports the suite inside its `run`, and nothing else does).

Run from anywhere: `python3 tools/check_imports.py` prints every finding and a count, and exits
1 when there is one (`make lint` runs it; tests/test_house_rules.py asserts the same through
`check()`). `--graph` prints every edge instead. Standard library only: a fresh clone runs it.

What counts as an edge, file -> file:

- Python: every `import` and `from ... import` in a module, wherever it stands: at the top,
  inside a function (a local import hides a cycle, it does not remove it), and under
  `if TYPE_CHECKING:` (the same: such imports are counted, and marked "typing" in the report so
  that a reader knows why the edge has no runtime effect). A literal
  `importlib.import_module("fearless....")` counts too ("dynamic").
  `import a.b.c` and `from a.b import c` point at the longest of a.b.c, a.b, a that is a module
  of the tree: `from . import x` at submodule x where x is one, else at the package itself.
  The packages that Python runs on the way (a.b's `__init__.py` for a.b.c) draw no edge: the
  `__init__.py` of an internal package imports nothing (§2.2), and the root's is drawn wherever a
  module names it (`import fearless as fl`, `from fearless import tile`).
- C: a unit is a `.c` file with the `.h` of the same name beside it (a header alone is a unit of
  its own). Unit A -> unit B when A includes a header of B (`#include "..."`, resolved beside
  the including file), or when A uses a name that B's `.c` alone defines with external linkage
  (a function or a variable not `static`): a call through a shared header is an edge too.

A package is the first name under src/fearless: a folder (`ir`, `runtime`, ...), or a top-level
module (`config`, `errors`, ...), or `fearless` for the package root's `__init__.py`. A package
beside fearless in src/ (BESIDE: `fearless_bench`) is one package, whatever its files.
Files are found by walking the tree, so moving a file between subfolders needs no change here.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
PACKAGE = "fearless"

# The top-level packages beside fearless in src/ (one package each in the graph, placed in LAYERS
# like fearless's own), each with the packages of fearless that may import it, and only inside a
# function: the benchmark suite is out of the core, and `fearless bench` (cli/bench.py) imports it
# when it runs. Any other import of it from fearless is reported.
BESIDE: dict[str, tuple[str, ...]] = {"fearless_bench": ("cli",)}

# The layers of docs/design.md §2.1, lowest first: the one place the layering is written as
# data. A package may import the packages of lower layers, and the others of its own layer
# only where the layer says so (True: the leaf modules use each other; so do autotuning.py and
# its six helpers). A package not named here is reported.
LAYERS: tuple[tuple[tuple[str, ...], bool], ...] = (
    (("dtypes", "errors", "config", "abi", "crash", "cache", "math", "version", "frames"), True),
    (("ir",), False),
    (("frontend", "backends", "runtime"), False),  # side by side over ir/
    (("sim",), False),
    (("simt", "tile"), False),  # the two tracks do not import each other
    (
        (
            "autotune_keys",
            "autotune_timing",
            "autotune_store",
            "autotune_tables",
            "autotune_ahead",
            "autotune_session",
            "autotuning",
        ),
        True,
    ),  # fl.autotune (§3.7)
    (("fearless",), False),  # the package root: re-exports the public API
    (("ops",), False),
    (("transformers",), False),  # Hugging Face models patched onto ops
    (("check", "fearless_bench"), False),  # the host-code check and the suite, side by side
    (("cli",), False),  # `fearless check` and `fearless bench` call into them: cli sits over both
    (("__main__",), False),
)

# Package edges that go against LAYERS on purpose, each with the place in docs/design.md
# that says why. Empty: the code keeps the layers as drawn.
ALLOWED_AGAINST_LAYERS: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Edge:
    """One import (or include, or use of a C name) from file `source` to file `target`."""

    source: str  # a path relative to the repository root
    target: str
    line: int
    kind: str  # "import", "local" (inside a function), "typing", "dynamic", "include", "uses"
    detail: str = ""  # what is imported or used

    def __str__(self) -> str:
        what = f" ({self.detail})" if self.detail else ""
        return f"{self.source}:{self.line} -> {self.target} [{self.kind}]{what}"


# --------------------------------------------------------------------------------- Python


def _modules(root: Path) -> dict[str, Path]:
    """Every module and package of the tree under `root` (src/fearless), by dotted name. A
    folder without `__init__.py` (a namespace package, such as backends/) is a package too."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
        for k in range(1, len(parts)):  # namespace packages: their folder stands for them
            out.setdefault(".".join(parts[:k]), path.parents[len(parts) - 1 - k] / "__init__.py")
    return out


def _longest_module(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _under_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    """Each import statement (and literal importlib.import_module call) with its kind."""

    def visit(node: ast.AST, kind: str) -> Iterator[tuple[ast.AST, str]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, kind
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node, "dynamic"
        if kind == "import" and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            kind = "local"
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _under_type_checking(child):
                for stmt in child.body:
                    yield from visit(stmt, "typing")
                for stmt in child.orelse:
                    yield from visit(stmt, kind)
            else:
                yield from visit(child, kind)

    yield from visit(tree, "import")


def _roots(root: Path) -> list[Path]:
    """The package at `root` (src/fearless) and the packages of BESIDE found next to it."""
    return [root] + [root.parent / name for name in BESIDE if (root.parent / name).is_dir()]


def python_edges(root: Path = SRC / PACKAGE) -> list[Edge]:
    """Every edge between the Python files of the package at `root` (src/fearless) and those
    beside it (BESIDE), each file named by its path from the folder above src/."""
    modules = {name: path for r in _roots(root) for name, path in _modules(r).items()}
    files = {name: path for name, path in modules.items() if path.exists()}
    top = root.parents[1]  # paths are named from here: src/fearless/...
    edges = []
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, kind in _imports(tree):
            targets: list[tuple[str, str]] = []  # (dotted name, what is named)
            if isinstance(node, ast.Import):
                targets = [(a.name, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.module == "__future__":
                    continue
                base = node.module or ""
                if node.level:
                    here = name.split(".")
                    keep = len(here) - node.level + (1 if is_package else 0)
                    base = ".".join(here[:keep] + ([node.module] if node.module else []))
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append((sub if sub in modules else base, a.name))
            elif isinstance(node, ast.Call):
                first = node.args[0]
                assert isinstance(first, ast.Constant)
                targets = [(str(first.value), str(first.value))]
            for dotted, what in targets:
                target = _longest_module(dotted, modules)
                if target is None or target == name or target not in files:
                    continue  # outside the package, itself, or a namespace package's folder
                edges.append(
                    Edge(
                        _rel(path, top),
                        _rel(files[target], top),
                        getattr(node, "lineno", 0),
                        kind,
                        what,
                    )
                )
    return edges


# -------------------------------------------------------------------------------------- C

_C_COMMENT_OR_LITERAL = re.compile(
    r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.DOTALL
)
_C_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_C_PREPROCESSOR = re.compile(r"^\s*#(?:[^\n]*\\\n)*[^\n]*", re.MULTILINE)
_C_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_C_FUNCTION_HEAD = re.compile(r"\b([A-Za-z_]\w*)\s*\((?:[^()]|\([^()]*\))*\)\s*$")


def _blank(match: re.Match[str]) -> str:
    """A comment or literal as spaces and its newlines (line numbers stay)."""
    return re.sub(r"[^\n]", " ", match.group(0))


def _c_external_definitions(text: str) -> set[str]:
    """The names a C source defines with external linkage: functions and variables at file
    scope that are not static (declarations, typedefs and `extern` lines define nothing)."""
    code = _C_PREPROCESSOR.sub("", _C_COMMENT_OR_LITERAL.sub(_blank, text))
    names: set[str] = set()
    depth, start = 0, 0
    for i, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                head = " ".join(code[start:i].split())
                found = _C_FUNCTION_HEAD.search(head)
                if found and "=" not in head and not re.match(r"(static|typedef|extern)\b", head):
                    names.add(found.group(1))
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        elif ch == ";" and depth == 0:
            statement = " ".join(code[start:i].split())
            start = i + 1
            if "(" in statement or re.match(r"(static|typedef|extern|struct|enum)\b", statement):
                continue  # a prototype, a file-local, a type, or a declaration only
            for declarator in statement.split(","):
                words = _C_IDENTIFIER.findall(declarator.split("=")[0].split("[")[0])
                if words:
                    names.add(words[-1])
    return names


def _c_unit(path: Path) -> Path:
    """The file that names the unit of `path`: a header's own `.c`, where there is one."""
    if path.suffix == ".h" and path.with_suffix(".c").exists():
        return path.with_suffix(".c")
    return path


def c_edges(root: Path = SRC / PACKAGE) -> list[Edge]:
    """Every edge between the C units of the tree at `root` (see the module docstring)."""
    top = root.parents[1]  # paths are named from here: src/fearless/...
    files = sorted(p for r in _roots(root) for p in r.rglob("*") if p.suffix in (".c", ".h"))
    defines: dict[str, set[Path]] = {}
    texts = {p: p.read_text() for p in files}
    for path in files:
        if path.suffix == ".c":
            for name in _c_external_definitions(texts[path]):
                defines.setdefault(name, set()).add(path)
    edges = []
    for path in files:
        unit, text = _c_unit(path), texts[path]
        for found in _C_INCLUDE.finditer(text):
            header = (path.parent / found.group(1)).resolve()
            if header in texts and _c_unit(header) != unit:
                line = text.count("\n", 0, found.start()) + 1
                edges.append(
                    Edge(
                        _rel(unit, top),
                        _rel(_c_unit(header), top),
                        line,
                        "include",
                        found.group(1),
                    )
                )
        if path.suffix != ".c":
            continue
        code = _C_COMMENT_OR_LITERAL.sub(_blank, text)
        seen: set[str] = set()
        for found in _C_IDENTIFIER.finditer(code):
            name = found.group(0)
            owners = defines.get(name, set())
            if name in seen or len(owners) != 1 or path in owners:
                continue
            seen.add(name)
            line = code.count("\n", 0, found.start()) + 1
            owner = next(iter(owners))
            edges.append(Edge(_rel(unit, top), _rel(owner, top), line, "uses", name))
    return edges


# ----------------------------------------------------------------------------- the rules


def _rel(path: Path, base: Path) -> str:
    return path.resolve().relative_to(base.resolve()).as_posix()


def package_of(file: str) -> str:
    """The package of a file (a path such as src/fearless/ir/core.py): see the docstring."""
    if Path(file).parts[1] != PACKAGE:
        return Path(file).parts[1]  # a package beside fearless (BESIDE): one package
    parts = Path(file).parts[2:]
    if len(parts) > 1:
        return parts[0]
    stem = Path(parts[0]).stem
    return PACKAGE if stem == "__init__" else stem


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _graph(pairs: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for a, b in pairs:
        if a != b:
            graph.setdefault(a, set()).add(b)
    return graph


def _layer(package: str) -> int | None:
    for rank, (members, _) in enumerate(LAYERS):
        if package in members:
            return rank
    return None


def layer_findings(edges: Iterable[Edge]) -> list[str]:
    """Each import that points up LAYERS or sideways inside a closed layer, each import of a
    package beside fearless that BESIDE does not allow, and each package that LAYERS does not
    place."""
    out: list[str] = []
    unplaced: set[str] = set()
    for e in edges:
        a, b = package_of(e.source), package_of(e.target)
        if a == b or (a, b) in ALLOWED_AGAINST_LAYERS:
            continue
        if b in BESIDE and a not in BESIDE and (a not in BESIDE[b] or e.kind != "local"):
            where = " or ".join(BESIDE[b])
            out.append(f"{a} -> {b}: fearless imports {b} only in {where}, inside a function: {e}")
            continue
        ra, rb = _layer(a), _layer(b)
        if ra is None or rb is None:
            unplaced.update(p for p, r in ((a, ra), (b, rb)) if r is None)
        elif rb > ra:
            out.append(f"{a} -> {b} runs up the layers: {e}")
        elif rb == ra and not LAYERS[ra][1]:
            out.append(f"{a} -> {b}: packages of one layer import each other: {e}")
    out += [f"{p}: a package that LAYERS does not place" for p in sorted(unplaced)]
    return out


@dataclass
class Report:
    """What `check` found: each list empty when the house keeps its rules."""

    file_cycles: list[list[str]]
    package_cycles: list[list[str]]
    layer_findings: list[str]
    edges: list[Edge]

    def lines(self) -> list[str]:
        out = []
        for cycle in self.file_cycles:
            members = set(cycle)
            out.append(f"file cycle: {', '.join(cycle)}")
            out += [f"  {e}" for e in self.edges if e.source in members and e.target in members]
        for cycle in self.package_cycles:
            members = set(cycle)
            out.append(f"package cycle: {', '.join(cycle)}")
            out += [
                f"  {e}"
                for e in self.edges
                if package_of(e.source) in members
                and package_of(e.target) in members
                and package_of(e.source) != package_of(e.target)
            ]
        out += [f"layer: {finding}" for finding in self.layer_findings]
        out.append(
            f"import cycles: {len(self.file_cycles)} among files, "
            f"{len(self.package_cycles)} among packages; "
            f"{len(self.layer_findings)} against the layers "
            f"({len({(e.source, e.target) for e in self.edges})} edges between files)"
        )
        return out

    @property
    def clean(self) -> bool:
        return not (self.file_cycles or self.package_cycles or self.layer_findings)


def check(root: Path = SRC / PACKAGE) -> Report:
    """The import graph of the package at `root` and those beside it (BESIDE), Python and C,
    held against the rules."""
    edges = python_edges(root) + c_edges(root)
    files = _graph((e.source, e.target) for e in edges)
    packages = _graph((package_of(e.source), package_of(e.target)) for e in edges)
    return Report(cycles(files), cycles(packages), layer_findings(edges), edges)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", action="store_true", help="print every edge instead")
    args = parser.parse_args(argv)
    report = check()
    if args.graph:
        print("\n".join(map(str, report.edges)))
        return 0
    print("\n".join(report.lines()))
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
