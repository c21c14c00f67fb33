"""The house rules of docs/design.md that a test can hold: each module of src/fearless (and of
the benchmark suite beside it, src/fearless_bench) says its one responsibility in its
docstring, and one near 800 lines is warned about (DESIGN section 5: a sign it holds two;
split it by responsibility, never by trimming lines to meet a number; past 1000 the test
fails); only config.py reads the environment; no import cycle among files or packages, C
includes and calls counted, and no import up the layers (tools/check_imports.py, which `make
lint` runs too); no test module imports another or touches sys.path: what tests share lives
in tests/support/ (issue 34); and docs/code-map.md names every module and C unit in the entry
of its folder, and names nothing that is not in the tree (issue 34: the design documents match
the tree)."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).parents[1]
SRC = REPO / "src" / "fearless"
SOURCES = [*SRC.rglob("*.py"), *(REPO / "src" / "fearless_bench").rglob("*.py")]
NEAR_LINES = 750  # warned: a module this long is a sign it holds two responsibilities
MAX_LINES = 1000  # failed: it does


def test_every_module_says_its_responsibility() -> None:
    """A module's docstring says what it is for (issue 34: the rule is one job per module,
    said where it is written, not a line count)."""
    import ast

    silent = [
        str(p.relative_to(SRC.parent))
        for p in SOURCES
        if not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert not silent, f"modules without a docstring saying what they are for: {silent}"


def test_no_module_grows_past_two_responsibilities() -> None:
    import warnings

    sizes = {str(p.relative_to(SRC.parent)): len(p.read_text().splitlines()) for p in SOURCES}
    near = {name: n for name, n in sizes.items() if n >= NEAR_LINES}
    if near:
        warnings.warn(
            f"modules near 800 lines, a sign of two responsibilities (split by responsibility, "
            f"never by trimming lines): {near}",
            stacklevel=1,
        )
    long = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"


def test_only_config_reads_the_environment() -> None:
    """DESIGN section 5: no globals read from the environment outside `config.py` (comments
    may name os.environ; code may not)."""
    import re

    readers = {
        str(p.relative_to(SRC.parent))
        for p in SOURCES
        if p.name != "config.py"
        and any(
            re.search(r"\bos\.(environ|getenv|putenv)\b", line.split("#", 1)[0])
            for line in p.read_text().splitlines()
        )
    }
    assert not readers, f"read the environment outside config.py: {sorted(readers)}"


@pytest.fixture(scope="module")
def imports() -> ModuleType:
    """tools/check_imports.py, the house's import checker (a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location(
        "check_imports", REPO / "tools" / "check_imports.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_no_import_cycles_and_no_import_up_the_layers(imports: ModuleType) -> None:
    """DESIGN section 5: no import cycles among files or packages (function-local and
    TYPE_CHECKING imports, C includes and calls between C files counted), and each package
    imports only the layers below it (docs/design.md §2.1; `LAYERS` in the checker)."""
    report = imports.check()
    assert report.edges, "the checker read no imports at all"
    assert report.clean, "\n".join(report.lines())


def test_the_import_checker_sees_what_hides_a_cycle(imports: ModuleType, tmp_path: Path) -> None:
    """A cycle through a function-local import, one through a TYPE_CHECKING import, a package
    cycle, an import up the layers, and a C include circle are each found."""
    pkg = tmp_path / "src" / "fearless"
    (pkg / "ir").mkdir(parents=True)
    (pkg / "runtime").mkdir()
    files = {
        "__init__.py": "",
        "config.py": "def f():\n    from .runtime import location\n",
        "errors.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import dtypes\n",
        "dtypes.py": "from . import errors\n",
        "ir/__init__.py": "",
        "ir/core.py": "from ..runtime.location import x\n",
        "runtime/location.py": "from .. import config\nx = 1\n",
        "runtime/a.c": '#include "b.h"\nint a(void) { return b(); }\n',
        "runtime/b.h": "int b(void);\n",
        "runtime/b.c": "int a(void);\nint b(void) { return a(); }\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    report = imports.check(pkg)
    assert report.file_cycles == [
        ["src/fearless/config.py", "src/fearless/runtime/location.py"],
        ["src/fearless/dtypes.py", "src/fearless/errors.py"],
        ["src/fearless/runtime/a.c", "src/fearless/runtime/b.c"],
    ]
    assert report.package_cycles == [["config", "runtime"], ["dtypes", "errors"]]
    assert any("ir -> runtime runs up the layers" in f for f in report.layer_findings)
    assert any("config -> runtime runs up the layers" in f for f in report.layer_findings)


# ------------------------------------------------------------------------------ test modules

TESTS = REPO / "tests"
_NOT_TEST_CODE = ("compile_fail", "check_corpus")  # standalone inputs that tests read, not code


def _test_module_offences(path: Path) -> list[str]:
    """Where `path` imports a test module (`test_*`) or touches `sys.path` (issue 34)."""
    import ast

    where = path.name
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            modules = [base] + [f"{base}.{a.name}" for a in node.names]
            if base == "sys" and any(a.name == "path" for a in node.names):
                out.append(f"{where}:{node.lineno}: imports sys.path")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            out.append(f"{where}:{node.lineno}: touches sys.path")
        for module in modules:
            if module.rsplit(".", 1)[-1].startswith("test_"):
                out.append(f"{where}:{node.lineno}: imports the test module {module}")
    return out


def test_test_modules_share_through_support_only() -> None:
    """Issue 34: what tests share (fakes, kernels, tables, helpers) lives in tests/support/;
    no test module imports another, and none touches sys.path (pyproject's pytest
    `pythonpath` puts tests/, examples/ and bench/ there once, for tests/gpu/ too)."""
    files = [
        p
        for p in sorted(TESTS.rglob("*.py"))
        if not set(p.relative_to(TESTS).parts) & set(_NOT_TEST_CODE)
    ]
    assert len(files) > 100 and any(p.parent.name == "gpu" for p in files)
    offences = [o for p in files for o in _test_module_offences(p)]
    assert not offences, "\n".join(offences)


def test_the_test_module_rule_sees_each_offence(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import sys\nimport test_a\nimport test_b as B\nfrom test_c import k\n"
        "from gpu.test_d import k\nfrom sys import path\nsys.path.insert(0, 'x')\n"
        "from support.kernels import k\nimport support.fakes as F\n"
    )
    assert _test_module_offences(sample) == [
        "test_sample.py:2: imports the test module test_a",
        "test_sample.py:3: imports the test module test_b",
        "test_sample.py:4: imports the test module test_c",
        "test_sample.py:5: imports the test module gpu.test_d",
        "test_sample.py:6: imports sys.path",
        "test_sample.py:7: touches sys.path",
    ]


def test_fearless_imports_the_suite_only_inside_fearless_bench(
    imports: ModuleType, tmp_path: Path
) -> None:
    """The benchmark suite sits beside fearless (src/fearless_bench): cli may import it inside
    a function (`fearless bench`); an import at the top of cli, or from any other package, is
    reported. The suite itself may import fearless."""
    pkg = tmp_path / "src" / "fearless"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "ops").mkdir()
    (tmp_path / "src" / "fearless_bench").mkdir()
    files = {
        "fearless/__init__.py": "",
        "fearless/config.py": "",
        "fearless/cli/__init__.py": "",
        "fearless/cli/bench.py": "def run():\n    from fearless_bench import suite\n",
        "fearless/ops/__init__.py": "",
        "fearless/ops/functional.py": "from fearless_bench import suite\n",
        "fearless_bench/__init__.py": "",
        "fearless_bench/suite.py": "from fearless import config\n",
    }
    for name, text in files.items():
        (tmp_path / "src" / name).write_text(text)
    report = imports.check(pkg)
    assert [f.split(": ")[0] for f in report.layer_findings] == ["ops -> fearless_bench"]
    (pkg / "cli" / "bench.py").write_text("from fearless_bench import suite\n")
    report = imports.check(pkg)
    assert sorted(f.split(": ")[0] for f in report.layer_findings) == [
        "cli -> fearless_bench",
        "ops -> fearless_bench",
    ]


# ------------------------------------------------------------------------------ the code map

CODE_MAP = REPO / "docs" / "code-map.md"
_DESCRIPTION_COLUMN = 23  # where an entry's prose starts; its name sits left of it
_MENTION = re.compile(r"(?<![\w/.*-])(no )?([\w/*]*[\w*]\.(?:py|c|h))(?![\w.])")
_SOURCE_SUFFIXES = (".py", ".c")


@dataclass
class _Entry:
    """One entry of the map's tree: `path` (a folder, or a file entry such as `config.py`)
    and, for a folder, the text of its lines and of its file entries' lines."""

    path: Path
    text: list[str] = field(default_factory=list)


def _code_map_entries(text: str) -> list[_Entry]:
    """The folder entries of the map's code block, each with its lines, and every file entry
    as an entry without text: the name sits at column 0, 2 or 4 (nesting), its prose from
    column 23 on (continuation lines start there); a file entry's lines count as its folder's."""
    block = text.split("```\n", 2)[1]
    entries: list[_Entry] = []
    stack: list[tuple[int, _Entry]] = []  # (indent, folder entry) of the enclosing folders
    current: _Entry | None = None
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if line.strip() and indent < _DESCRIPTION_COLUMN:
            name = line.split()[0]
            while stack and stack[-1][0] >= indent:
                stack.pop()
            path = (stack[-1][1].path if stack else REPO) / name.rstrip("/")
            if name.endswith("/"):
                current = _Entry(path)
                stack.append((indent, current))
            else:
                entries.append(_Entry(path))  # a file entry: checked to exist
                current = stack[-1][1] if stack else _Entry(path.parent)
            entries.append(current)
        if current is not None:
            current.text.append(line)
    return list({id(e): e for e in entries}.values())


def _owned(folder: Path, folders: set[Path]) -> list[Path]:
    """The sources under `folder` that its entry names: those in no sub-folder with an entry
    of its own (simt/passes/ is named inside simt/'s entry)."""
    return [
        p
        for p in folder.rglob("*")
        if p.suffix in (*_SOURCE_SUFFIXES, ".h")
        and "__pycache__" not in p.parts
        and not any(
            f != folder and f.is_relative_to(folder) and p.is_relative_to(f) for f in folders
        )
    ]


def _resolve(mention: str, folder: Path, owned: list[Path]) -> list[Path]:
    """The files a mention in `folder`'s entry stands for: a bare name (`kernels_moe.py`) or a
    pattern (`family_*.py`) among the files the entry owns; a path (`runtime/trace.py`) from
    the folder, a folder above it (src, the repository) or src/fearless."""
    if "/" not in mention:  # or a file at the top of the repository (setup.py)
        return [p for p in owned if p.match(mention)] or sorted(REPO.glob(mention))
    above = [folder, *(f for f in folder.parents if f.is_relative_to(REPO))]
    return next((found for base in (*above, SRC) if (found := sorted(base.glob(mention)))), [])


def code_map_findings(text: str) -> tuple[list[str], list[str]]:
    """(missing, stale): the modules and C units of src/fearless and src/fearless_bench that
    the entry of their folder does not name, and the entries and `*.py`/`.c`/`.h` names of
    the map that are not in the tree where the map puts them."""
    entries = _code_map_entries(text)
    folders = {e.path for e in entries if e.text}
    stale = [
        f"{e.path.relative_to(REPO)}{'/' if e.text else ''} (entry)"
        for e in entries
        if not e.path.exists()
    ]
    named: set[Path] = set()
    for entry in (e for e in entries if e.text and e.path.is_dir()):
        owned = _owned(entry.path, folders) if entry.path.is_relative_to(REPO / "src") else []
        if entry.path == REPO:  # Makefile's entry
            owned = list(REPO.iterdir())
        elif not owned:  # tests/, bench/, examples/: a name may sit anywhere below
            owned = [p for p in entry.path.rglob("*") if "__pycache__" not in p.parts]
        prose = "\n".join(entry.text)
        where = entry.path.relative_to(REPO)
        for absent, mention in dict.fromkeys(_MENTION.findall(prose)):
            found = _resolve(mention, entry.path, owned)
            if absent and found:  # "no __init__.py": the map says it is not there
                stale.append(f"no {mention} (in the entry of {where}/: there is one)")
            elif not absent and not found:
                stale.append(f"{mention} (in the entry of {where}/)")
            elif "*" not in mention:  # named here only if this is its folder's entry
                named.update(p for p in found if p in owned)
        for unit in (p for p in owned if p.suffix == ".c"):  # `claunch_common (...)` names one
            if re.search(rf"(?<![\w/.]){re.escape(unit.stem)}(?![\w.])", prose):
                named.add(unit)
    missing = [
        f"{p.relative_to(REPO / 'src')} (in the entry of {_owner(p, folders).relative_to(REPO)}/)"
        for p in sorted(_sources_to_map())
        if p not in named
    ]
    return missing, stale


def _owner(path: Path, folders: set[Path]) -> Path:
    """The folder whose entry is to name `path`: the innermost one with an entry."""
    return max((f for f in folders if path.is_relative_to(f)), key=lambda f: len(f.parts))


def _sources_to_map() -> list[Path]:
    """Every module and C unit of src/fearless and src/fearless_bench; an `__init__.py` is its
    package's entry, not a module to name."""
    return [
        p
        for root in (SRC, REPO / "src" / "fearless_bench")
        for p in root.rglob("*")
        if p.suffix in _SOURCE_SUFFIXES and p.name != "__init__.py" and "__pycache__" not in p.parts
    ]


def test_the_code_map_names_every_module() -> None:
    """Issue 34 (the design documents match the tree): docs/code-map.md names each module and
    C unit in the entry of its folder, and every entry and `*.py`, `.c` or `.h` name it holds
    is in the tree there."""
    missing, stale = code_map_findings(CODE_MAP.read_text())
    lines = []
    if missing:
        lines += ["docs/code-map.md does not name (one line each, in its folder's entry):"]
        lines += [f"  {m}" for m in missing]
    if stale:
        lines += ["docs/code-map.md names what is not in the tree (rename or remove):"]
        lines += [f"  {s}" for s in stale]
    assert not lines, "\n".join(lines)


def test_the_code_map_check_sees_missing_and_stale_names() -> None:
    """A module dropped from a sub-folder's names, a renamed one, a C unit left out, a module
    named in another folder's entry only (ops/ names runtime/trace.py), a path that is not
    there, "no X.py" where there is one, and an entry for a folder that is gone are each
    reported."""
    text = CODE_MAP.read_text()
    edits = [
        ("spin.py (", "spinning.py ("),
        ("claunch_simt (", "claunch_x ("),
        ("bounds_elim.py,", ""),
        ("trace.py (what one", "tracing (what one"),
        ("ops/_replay.py", "ops/_replay_old.py"),
        ("(no __init__.py;", "(no __init__.py; no sass.py;"),
        ("  tuning/  ", "  tunings/ "),
    ]
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    missing, stale = code_map_findings(text)
    assert missing == [
        "fearless/runtime/claunch_simt.c (in the entry of src/fearless/runtime/)",
        "fearless/runtime/spin.py (in the entry of src/fearless/runtime/)",
        "fearless/runtime/trace.py (in the entry of src/fearless/runtime/)",
        "fearless/simt/passes/bounds_elim.py (in the entry of src/fearless/simt/)",
    ]
    assert sorted(stale) == [
        "no sass.py (in the entry of src/fearless/backends/: there is one)",
        "ops/_replay_old.py (in the entry of src/fearless/runtime/)",
        "spinning.py (in the entry of src/fearless/runtime/)",
        "src/fearless/tunings/ (entry)",
    ]
