"""tools/kernel_digests.py's comparison (a developer tool, not part of the package): what it calls
the same, changed and unmatched, and its exit status."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "kernel_digests", REPO / "tools" / "kernel_digests.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(path: Path, digests: dict[str, str]) -> Path:
    path.write_text(json.dumps(digests))
    return path


def test_identical_records_compare_clean(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a = _write(tmp_path / "a.json", {"k1 sig": "00ff", "k2 sig": "ab12"})
    assert _tool().compare(a, a) == 0
    assert "2 the same, 0 changed, 0 + 0 unmatched" in capsys.readouterr().out


def test_a_moved_digest_or_a_lost_kernel_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    a = _write(tmp_path / "a.json", {"k1 sig": "00ff", "k2 sig": "ab12", "k3 sig": "cc"})
    b = _write(tmp_path / "b.json", {"k1 sig": "00ff", "k2 sig": "ab13", "k4 sig": "dd"})
    assert _tool().compare(a, b) == 1
    out = capsys.readouterr().out
    assert (
        "changed  k2 sig" in out and "before only  k3 sig" in out and "after only   k4 sig" in out
    )
    assert "1 the same, 1 changed, 1 + 1 unmatched" in out


def test_without_arguments_it_prints_its_usage(capsys: pytest.CaptureFixture) -> None:
    assert _tool().main([]) == 2
    assert "--compare BEFORE.json AFTER.json" in capsys.readouterr().out
