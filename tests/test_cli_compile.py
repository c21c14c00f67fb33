"""`fearless compile`: ahead-of-time compilation of a file's SIMT kernels into the cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fearless import simt
from fearless.cli.main import main

ROOT = Path(__file__).parents[1]


def test_compile_examples_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    status = main(["compile", str(ROOT / "examples" / "simt_kernels.py"), "--arch", "sm_90"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "simt_kernels.py::vecadd  sm_90" in out and "simt_kernels.py::gather  sm_90" in out
    sys.path.insert(0, str(ROOT / "examples"))
    import simt_kernels

    count = sum(isinstance(v, simt.Kernel) for v in vars(simt_kernels).values())
    assert count >= 12
    assert f"compiled {count} kernel(s)" in out
    assert len(list(tmp_path.rglob("*.pkl"))) == count
    # a second run finds every kernel in the cache
    assert main(["compile", str(ROOT / "examples" / "simt_kernels.py")]) == 0


def test_compile_reports_a_kernel_that_does_not_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    status = main(["compile", str(ROOT / "tests" / "compile_fail" / "slice_write.py")])
    out = capsys.readouterr().out
    assert status == 1
    assert "error[E0594]" in out and "1 failed" in out


def test_compile_missing_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "no/such/file.py"]) == 2
    assert "no such file" in capsys.readouterr().out
