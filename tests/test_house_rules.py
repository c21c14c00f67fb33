"""The house rules of docs/design.md that a test can hold: each module of src/fearless (and of
the benchmark suite beside it, src/fearless_bench) says its one responsibility in its
docstring, and one near 800 lines is warned about (DESIGN section 5: a sign it holds two;
split it by responsibility, never by trimming lines to meet a number; past 1000 the test
fails); only config.py reads the environment; no import cycle among files or packages, C
includes and calls counted, and no import up the layers (tools/check_imports.py, which `make
lint` runs too); and no test module imports another or touches sys.path: what tests share lives
in tests/support/ (issue 34)."""

from __future__ import annotations

import importlib.util
import sys
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
