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
    said = capsys.readouterr()
    assert status == 1
    assert "error[E0594]" in said.err and "1 failed" in said.out  # the diagnostic on stderr
    assert "error[E0594]" not in said.out


def test_compile_missing_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "no/such/file.py"]) == 2
    assert "no such file" in capsys.readouterr().err


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
    said = capsys.readouterr()
    out, err = said.out, said.err
    assert status == 1, out + err
    assert "kernel(s) into" not in out  # no claim that anything is in the cache
    assert f"error[E0900]: cannot store compiled kernels in the cache folder {folder}: " in err
    if where != "proc":
        assert f"{tmp_path / 'a-file'} is a file, not a folder" in err
    assert "FEARLESS_CACHE_DIR" in err  # the fix


def test_compile_fails_when_the_disk_cache_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FEARLESS_NO_DISK_CACHE", "1")
    assert main(["compile", str(ROOT / "examples" / "simt_kernels.py")]) == 1
    said = capsys.readouterr()
    assert "FEARLESS_NO_DISK_CACHE=1" in said.err and "kernel(s) into" not in said.out
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


SIMT_KERNEL = """\
import fearless as fl
from fearless import simt


@simt.kernel
def copy(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i]
"""

TILE_KERNEL = """\
import fearless as fl
from fearless import tile


@tile.kernel
def add(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))
"""


def test_each_file_imports_its_own_neighbours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two folders, each with its own helpers.py: the second file gets its own helpers, not
    the first's left in sys.modules."""
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    files = []
    for project in ("p1", "p2"):
        (tmp_path / project).mkdir()
        (tmp_path / project / "helpers.py").write_text(f"WHO = {project!r}\n")
        kernels = tmp_path / project / "kernels.py"
        kernels.write_text("import helpers\nprint('helpers of', helpers.WHO)\n" + SIMT_KERNEL)
        files.append(str(kernels))
    assert main(["compile", *files]) == 0
    out = capsys.readouterr().out
    assert "helpers of p1" in out and "helpers of p2" in out
    assert "helpers" not in sys.modules


def test_a_file_that_exits_at_import_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    first = tmp_path / "first.py"
    first.write_text("import sys\nsys.exit()\n" + SIMT_KERNEL)
    second = tmp_path / "second.py"
    second.write_text(SIMT_KERNEL)
    argv = sys.argv[:]
    assert main(["compile", str(first), str(second)]) == 2
    assert sys.argv == argv
    err = capsys.readouterr().err
    assert f"fearless compile: error: {first} exits when imported (sys.exit())" in err
    assert 'under `if __name__ == "__main__":`' in err


def test_compile_follows_fearless_arch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    kernels = tmp_path / "arch_kernels.py"
    kernels.write_text(SIMT_KERNEL)
    monkeypatch.setenv("FEARLESS_ARCH", "sm_80")
    assert main(["compile", str(kernels)]) == 0
    assert "arch_kernels.py::copy  sm_80" in capsys.readouterr().out
    assert main(["compile", str(kernels), "--arch", "sm_90"]) == 0  # --arch wins
    assert "arch_kernels.py::copy  sm_90" in capsys.readouterr().out
    monkeypatch.setenv("FEARLESS_ARCH", "sm_12")
    assert main(["compile", str(kernels)]) == 2
    err = capsys.readouterr().err
    assert "FEARLESS_ARCH='sm_12' is not an arch" in err and "sm_80, sm_90, sm_90a" in err


def test_imported_kernels_are_compiled_from_their_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SIMT or a Tile kernel a file imports is not the file's: neither is listed."""
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "simt_defs.py").write_text(SIMT_KERNEL)
    (tmp_path / "tile_defs.py").write_text(TILE_KERNEL)
    user = tmp_path / "user.py"
    user.write_text("from simt_defs import copy\nfrom tile_defs import add\n")
    assert main(["compile", str(user)]) == 0
    out = capsys.readouterr().out
    assert "::copy" not in out and "::add" not in out
    assert "compiled 0 kernel(s)" in out and "Tile kernel(s) left" not in out


def test_a_folder_is_not_a_python_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "."]) == 2
    assert "`.` is a folder, not a Python file" in capsys.readouterr().err
