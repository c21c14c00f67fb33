"""Compile-fail corpus: each file under compile_fail/ holds a kernel and, on the offending line,
`# error[CODE] col N: message`. The test compiles every kernel in the file and checks the
error's code, line, column and message, and that the rendered diagnostic shows the caret."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import fearless as fl
from fearless import simt

CORPUS = sorted((Path(__file__).parent / "compile_fail").glob("*.py"))
EXPECT = re.compile(r"#\s*error\[(E\d{4})\]\s*col\s*(\d+):\s*(.+)$")


def _expectation(path: Path) -> tuple[str, int, int, str]:
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        m = EXPECT.search(line)
        if m:
            return m.group(1), lineno, int(m.group(2)), m.group(3).strip()
    raise AssertionError(f"{path.name} has no `# error[...]` expectation")


def _load(path: Path) -> object:
    spec = importlib.util.spec_from_file_location(f"compile_fail_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 40


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_compile_fail(path: Path) -> None:
    code, line, col, message = _expectation(path)
    module = _load(path)
    kernel = module.kernel  # type: ignore[attr-defined]
    assert isinstance(kernel, simt.Kernel)
    with pytest.raises(fl.FearlessError) as info:
        kernel.inspect(stage="ir")
    err = info.value
    assert err.diagnostic.code == code, str(err)
    assert err.loc is not None, str(err)
    assert err.loc.file == str(path)
    assert (err.loc.line, err.loc.col + 1) == (line, col), str(err)
    assert message in err.message, str(err)
    rendered = str(err)
    assert f"--> {path}:{line}:{col}" in rendered
    assert "^" in rendered
    assert "Traceback" not in rendered
