"""Compile-fail corpus: each file under compile_fail/ holds a kernel and, on the offending line,
`# error[CODE] col N: message`. The test compiles every kernel in the file and checks the
error's code, line, column and message, and that the rendered diagnostic shows the caret.

Kernels are SIMT kernels, or Tile kernels in the files named `tile_*.py` (compiled for the
signature their annotations give); a mistaken annotation is refused when the file's `def` runs. A mistake both tracks can make has a file in each, with the
same message: the two frontends share one core (frontend/core.py) and its wording."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import fearless as fl
from fearless import simt, tile

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
    assert len([p for p in CORPUS if p.stem.startswith("tile_")]) >= 10


def test_both_tracks_word_a_shared_mistake_alike() -> None:
    """Where a Tile file repeats a SIMT file's mistake, the expected messages are the same."""
    by_name = {p.stem: _expectation(p) for p in CORPUS}
    pairs = [
        ("undefined_name", "tile_undefined_name"),
        ("unsupported_string", "tile_unsupported_string"),
        ("return_value", "tile_return_value"),
        ("for_over_array", "tile_for_over_tensor"),
        ("range_args", "tile_range_args"),
        ("loop_target", "tile_loop_target"),
        ("host_call", "tile_host_call"),
        ("maybe_unassigned", "tile_maybe_unassigned"),
        ("int_true_div", "tile_int_true_div"),
        ("nonbool_condition", "tile_nonbool_condition"),
    ]
    for simt_name, tile_name in pairs:
        (code, _, _, message), (tcode, _, _, tmessage) = by_name[simt_name], by_name[tile_name]
        assert code == tcode, (simt_name, tile_name)
        shape = re.sub(r"`[^`]*`", "`_`", message)
        assert shape in re.sub(r"`[^`]*`", "`_`", tmessage) or tmessage in message, (
            simt_name,
            tile_name,
        )


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_compile_fail(path: Path) -> None:
    code, line, col, message = _expectation(path)
    try:
        module = _load(path)
    except fl.FearlessError as exc:  # a mistaken annotation: refused where the `def` runs
        err = exc
    else:
        kernel = module.kernel  # type: ignore[attr-defined]
        assert isinstance(kernel, tile.Kernel if path.stem.startswith("tile_") else simt.Kernel)
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


def test_an_unknown_attribute_suggests_the_similar_names() -> None:
    module = _load(Path(__file__).parent / "compile_fail" / "unknown_attribute_close.py")
    with pytest.raises(fl.FearlessError) as info:
        module.kernel.inspect(stage="ir")  # type: ignore[attr-defined]
    assert "help: a similar name exists: `simt.thread.index_1d` or `simt.thread.index_2d`" in str(
        info.value
    )
