"""`fearless compile`: ahead-of-time compilation of a file's SIMT kernels into the cache."""

from __future__ import annotations

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


@pytest.mark.parametrize("where", ["file", "below-a-file", "proc"])
def test_compile_fails_when_the_cache_cannot_store(
    where: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "a-file").write_text("")
    folder = {
        "file": tmp_path / "a-file",
        "below-a-file": tmp_path / "a-file" / "cache",
        "proc": Path("/proc/fearless-cache"),
    }[where]
    if where == "proc" and not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    monkeypatch.delenv("FEARLESS_NO_DISK_CACHE", raising=False)
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(folder))
    status = main(["compile", str(ROOT / "examples" / "simt_kernels.py")])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "kernel(s) into" not in out  # no claim that anything is in the cache
    assert f"error[E0900]: cannot store compiled kernels in the cache folder {folder}: " in out
    if where != "proc":
        assert f"{tmp_path / 'a-file'} is a file, not a folder" in out
    assert "FEARLESS_CACHE_DIR" in out  # the fix


def test_compile_fails_when_the_disk_cache_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FEARLESS_NO_DISK_CACHE", "1")
    assert main(["compile", str(ROOT / "examples" / "simt_kernels.py")]) == 1
    out = capsys.readouterr().out
    assert "FEARLESS_NO_DISK_CACHE=1" in out and "kernel(s) into" not in out
    assert list(tmp_path.iterdir()) == []


def test_compile_shows_the_error_of_a_file_that_does_not_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    bad = tmp_path / "raises.py"
    bad.write_text("def setup():\n    raise RuntimeError('no config file')\n\n\nsetup()\n")
    assert main(["compile", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert f'File "{bad}", line 5, in <module>' in err
    assert f'File "{bad}", line 2, in setup' in err
    assert err.rstrip().endswith("RuntimeError: no config file")
    assert err.count('  File "') == 2  # the file's frames only: none of fearless or importlib


def test_compile_shows_a_syntax_error_as_python_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    bad = tmp_path / "typo.py"
    bad.write_text("x = 1\ndef f(:\n    pass\n")
    assert main(["compile", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith(f'  File "{bad}", line 2\n    def f(:\n          ^\n')
    assert err.rstrip().endswith("SyntaxError: invalid syntax")
