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
