"""runtime/location.py: the user's line of a launch-time error, found by a frame walk whose
per-file question (inside fearless or torch?) is answered once per file name. `partition()`
and `unpartition()` record a location on every call, so an uncached path resolution there
was host time on every fearless.ops call and every autotuned configuration (0.1 ms here)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import fearless as fl
from fearless import frames
from fearless.runtime import location


def test_the_user_frame_is_found_and_each_file_is_resolved_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frames.inside_fearless.cache_clear()
    resolved: list[str] = []
    real = Path.resolve

    def counting(self: Path, strict: bool = False) -> Path:
        resolved.append(str(self))
        return real(self, strict=strict)

    monkeypatch.setattr(Path, "resolve", counting)
    x = fl.asarray(np.zeros(64, np.float32))
    for _ in range(3):
        part = x.partition((32,))  # records where x moved: a user_location()
        part.unpartition()
    loc = location.user_location()
    assert loc is not None and loc.file == __file__
    assert resolved.count(__file__) == 1  # this test's file: resolved once, then cached
    assert len(resolved) == len(set(resolved))


def test_a_moved_tensor_still_names_the_line_it_moved_at() -> None:
    x = fl.asarray(np.zeros(64, np.float32))
    part = x.partition((32,))  # the line the error names
    moved_at = sys._getframe().f_lineno - 1
    with pytest.raises(fl.MovedError) as e:
        x.numpy()
    assert f"test_location.py:{moved_at}:" in str(e.value)  # the partition line, in the note
    part.unpartition()


def test_identical_kernels_of_two_files_each_name_their_own_file(tmp_path: Path) -> None:
    """A kernel's parse is kept by its code object, and two code objects of the same text at
    the same line compare equal whatever their file: each file's mistake must still point at
    that file (a cache keyed by equality once sent the second to the first's parse)."""
    import importlib.util

    text = (
        "import fearless as fl\nfrom fearless import simt\n\n\n@simt.kernel\n"
        "def kernel(a, c: simt.DisjointSlice[fl.f32]):\n    c[simt.thread.index_1d()] = 1.0\n"
    )
    found = []
    for name in ("first_copy", "second_copy"):
        path = tmp_path / f"{name}.py"
        path.write_text(text, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with pytest.raises(fl.FearlessError) as e:
            module.kernel.inspect(stage="ir")
        assert e.value.loc is not None
        found.append(e.value.loc.file)
    assert found == [str(tmp_path / "first_copy.py"), str(tmp_path / "second_copy.py")]
