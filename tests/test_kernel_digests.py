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


def test_it_refuses_to_record_another_checkouts_kernels(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A copy of the tool in another checkout, where `fearless` still imports from this one (an
    editable install), would record this tree's kernels for that one: refused, exit 2."""
    other = tmp_path / "clone" / "tools"
    other.mkdir(parents=True)
    (other / "kernel_digests.py").write_text((REPO / "tools" / "kernel_digests.py").read_text())
    spec = importlib.util.spec_from_file_location(
        "kernel_digests_copy", other / "kernel_digests.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.record(tmp_path / "out.json", ["--co", "-q"]) == 2
    assert "not from this checkout's" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


KERNEL_TEST = """
import numpy as np

import fearless as fl
from fearless import tile


@tile.kernel
def twice(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) * 2.0)


def test_twice() -> None:
    z = fl.empty(100, dtype=fl.f32)
    with z.partition((64,)) as zp:
        twice(zp, fl.asarray(np.ones(100, np.float32)))
"""


def test_recording_digests_every_kernel_a_test_builds(tmp_path: Path) -> None:
    """The tool wraps the IR builder where fearless calls it: a test file's one kernel, run on
    the simulator, comes back as one key with one digest (session 30 moved the builder and the
    tool, still wrapping the old place, recorded nothing)."""
    pytest.importorskip("cuda.tile", reason="the digests are of cuda-tile's bytecode")
    import subprocess
    import sys

    (tmp_path / "test_one_kernel.py").write_text(KERNEL_TEST)
    out = tmp_path / "digests.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "kernel_digests.py"), str(out), str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.read_text())
    assert [key.split()[0] for key in record] == ["twice"]
    assert all(len(digests) == 1 for digests in record.values())
