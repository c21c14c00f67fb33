"""`fearless new`: the scaffolded project runs and its tests pass, on the simulator."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fearless.cli.main import main

SRC = Path(__file__).parents[1] / "src"


def test_new_project_runs_and_its_tests_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "my-kernels"
    assert main(["new", str(project)]) == 0
    assert {p.name for p in project.iterdir()} == {
        "kernels.py",
        "main.py",
        "test_kernels.py",
        "README.md",
    }
    env = {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "FEARLESS_TARGET": "sim",
        "FEARLESS_CACHE_DIR": str(tmp_path / "cache"),
    }
    run = subprocess.run(
        [sys.executable, "main.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SIMT vecadd ok: True" in run.stdout and "Tile add ok:    True" in run.stdout
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "3 passed" in tests.stdout


def test_new_says_which_python_runs_it_and_check_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    assert main(["new", str(project)]) == 0
    hint = capsys.readouterr().out
    assert f"{sys.executable} main.py" in hint and "pip install fearless" in hint
    readme = (project / "README.md").read_text()
    assert "pip install fearless" in readme and sys.executable in readme
    # the scaffold's deliberate aliasing launch stands in `pytest.raises(fl.BorrowError)`
    assert main(["check", str(project)]) == 0
    assert "E0502" not in capsys.readouterr().out


def test_new_refuses_a_non_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    assert main(["new", str(tmp_path / "x")]) == 2
    assert "not empty" in capsys.readouterr().err


def test_new_refuses_a_file_and_a_folder_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a_file").write_text("mine")
    assert main(["new", str(tmp_path / "a_file")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    blocked = tmp_path / "a_file" / "proj"  # under a file: no folder can be made there
    assert main(["new", str(blocked)]) == 2
    assert f"cannot write the project at {blocked}" in capsys.readouterr().err


def test_new_dot_names_the_folder_it_resolves_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "not a name"
    bad.mkdir()
    monkeypatch.chdir(bad)
    assert main(["new", "."]) == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert "'not a name' (the folder `.` resolves to) is not a valid project name" in said.err
    good = tmp_path / "proj_here"
    good.mkdir()
    monkeypatch.chdir(good)
    assert main(["new", "."]) == 0
    assert (good / "README.md").read_text().startswith("# proj_here\n")
    assert main(["new", "/"]) == 2
    assert "`/` names no folder to call the project after" in capsys.readouterr().err
