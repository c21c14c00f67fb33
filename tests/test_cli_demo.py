"""`fearless demo`: its steps and report, on a NumPy stand-in for the API and on the real one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from fearless.cli import demo
from fearless.cli.main import main
from fearless.errors import BorrowError, MovedError

SRC = Path(__file__).resolve().parents[1] / "src"


class FakeTensor:
    def __init__(self, array: Any) -> None:
        self.array = np.array(array, copy=True)
        self.moved_at: str | None = None  # "file:line:col" of the partition() that moved it

    def numpy(self) -> Any:
        self.check_live()
        return self.array.copy()

    def check_live(self) -> None:
        if self.moved_at is not None:
            raise MovedError(
                "use of a moved tensor", notes=[f"the tensor moved at {self.moved_at}"]
            )

    def partition(self, tile: tuple[int, ...]) -> FakePartition:
        self.check_live()
        caller = sys._getframe(1)
        self.moved_at = f"{caller.f_code.co_filename}:{caller.f_lineno}:1"
        return FakePartition(self)


class FakePartition:
    def __init__(self, tensor: FakeTensor) -> None:
        self.tensor = tensor

    def unpartition(self) -> FakeTensor:
        self.tensor.moved_at = None
        return self.tensor


class FakeKernel:
    """Launches `body` on the arrays with NumPy; refuses an output that is also an input."""

    def __init__(self, body: Callable[..., None], borrow_check: bool = True) -> None:
        self.body = body
        self.borrow_check = borrow_check

    def __getitem__(self, config: tuple[int, int]) -> Callable[..., None]:
        def launch(*args: Any) -> None:
            arrays = [a for a in args if isinstance(a, FakeTensor)]
            if self.borrow_check and any(a is arrays[-1] for a in arrays[:-1]):
                raise BorrowError("cannot borrow `c` as mutable because it is also borrowed")
            self.body(*(a.array if isinstance(a, FakeTensor) else a for a in args))

        return launch


class FakeTileKernel:
    """Runs `body` on the arrays (a partition's tensor's included); refuses a moved tensor."""

    def __init__(self, body: Callable[..., None], refuse_moved: bool = True) -> None:
        self.body = body
        self.refuse_moved = refuse_moved

    def __call__(self, *args: Any) -> None:
        for a in args:
            if self.refuse_moved and isinstance(a, FakeTensor):
                a.check_live()
        self.body(*(a.tensor.array if isinstance(a, FakePartition) else a.array for a in args))


def vecadd(a: Any, b: Any, c: Any) -> None:
    c[:] = a + b


def saxpy(alpha: Any, x: Any, y: Any) -> None:
    y[:] = alpha * x + y


def add(z: Any, x: Any, y: Any) -> None:
    z[:] = x + y


def softmax(out: Any, x: Any) -> None:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    out[:] = e / e.sum(axis=1, keepdims=True)


def softmax_rows(x: Any, out: Any) -> None:
    softmax(out, x)


def stand_in(monkeypatch: pytest.MonkeyPatch, **kernels: FakeKernel | FakeTileKernel) -> None:
    fl = SimpleNamespace(
        get_target=lambda: "sim",
        from_numpy=FakeTensor,
        synchronize=lambda: None,
        f32=np.float32,
        BorrowError=BorrowError,
        MovedError=MovedError,
    )
    ks = SimpleNamespace(
        vecadd=FakeKernel(vecadd),
        saxpy=FakeKernel(saxpy),
        softmax_rows=FakeKernel(softmax_rows),
        add=FakeTileKernel(add),
        softmax=FakeTileKernel(softmax),
    )
    for name, kernel in kernels.items():
        setattr(ks, name, kernel)
    monkeypatch.setattr(demo, "load_api", lambda: (fl, ks))
    monkeypatch.setenv("FEARLESS_TARGET", "sim")


def test_demo_report_on_a_stand_in_api(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stand_in(monkeypatch)
    assert main(["demo", "--size", "4096"]) == 0
    out = capsys.readouterr().out
    assert "target: sim, the CPU simulator (chosen by FEARLESS_TARGET=sim;" in out
    assert "2^12 = 4,096 f32 elements" in out
    assert re.search(r"^  ✓ vecadd .*matches NumPy; first call .*, warm ", out, re.MULTILINE)
    assert re.search(r"^  ✓ saxpy .*matches NumPy", out, re.MULTILINE)
    assert re.search(r"^  ✓ unsafe .*rejected with BorrowError", out, re.MULTILINE)
    assert "      error[E0502]: cannot borrow `c` as mutable" in out
    assert "softmax of a 4 x 1,024 matrix, one row per block" in out
    assert re.search(r"^  ✓ tile add z = x \+ y .*matches NumPy; first call ", out, re.MULTILINE)
    assert re.search(r"^  ✓ softmax  row softmax .*matches NumPy", out, re.MULTILINE)
    assert re.search(r"^  ✓ moved    add\(zp, z, y\) rejected with MovedError", out, re.MULTILINE)
    assert "      error[E0382]: use of a moved tensor" in out
    assert re.search(r"= note: the tensor moved at .*demo\.py:\d+:", out)
    summary = out.rstrip().splitlines()[-1]
    assert "✗" not in out and summary.startswith(
        "Summary: SIMT vecadd, saxpy and softmax, Tile add"
    )


def test_demo_fails_when_the_unsafe_launch_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stand_in(monkeypatch, vecadd=FakeKernel(vecadd, borrow_check=False))
    assert main(["demo", "--size", "1000"]) == 1
    out = capsys.readouterr().out
    assert "  ✗ unsafe   vecadd[grid, block](a, b, a) was NOT rejected" in out
    assert "Summary: 1 of 7 steps failed" in out


def test_demo_fails_when_the_moved_tensor_is_used(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stand_in(monkeypatch, add=FakeTileKernel(add, refuse_moved=False))
    assert main(["demo", "--size", "2048"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^  ✓ tile add ", out, re.MULTILINE)  # the same kernel, used safely
    assert "  ✗ moved    add(zp, z, y) was NOT rejected although `z` moved" in out
    assert "error[E0382]" not in out
    assert "Summary: 1 of 7 steps failed" in out


def test_demo_fails_on_a_wrong_result(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def wrong(alpha: Any, x: Any, y: Any) -> None:
        y[:] = alpha * x - y

    def unnormalised(out: Any, x: Any) -> None:
        out[:] = np.exp(x - x.max(axis=1, keepdims=True))

    stand_in(monkeypatch, saxpy=FakeKernel(wrong), softmax=FakeTileKernel(unnormalised))
    assert main(["demo", "--size", "256"]) == 1
    out = capsys.readouterr().out
    assert "  ✗ saxpy    result differs from NumPy (max abs error" in out
    assert "  ✗ softmax  result differs from NumPy (max abs error" in out
    assert "Summary: 2 of 7 steps failed" in out


def test_demo_without_the_api_fails_in_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing() -> Any:
        raise ImportError("`fearless` has no get_target yet")

    monkeypatch.setattr(demo, "load_api", missing)
    monkeypatch.delenv("FEARLESS_TRACEBACK", raising=False)
    assert main(["demo"]) == 1
    captured = capsys.readouterr()
    assert "✗ the fearless API the demo needs is not available: ImportError" in captured.out
    assert "Traceback" not in captured.out + captured.err


def test_demo_on_the_simulator(tmp_path: Path) -> None:
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "FEARLESS_TARGET": "sim"}
    env["FEARLESS_CACHE_DIR"] = str(tmp_path / "cache")
    proc = subprocess.run(
        [sys.executable, "-m", "fearless", "demo"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "target: sim" in out
    for step in ("vecadd", "saxpy", "unsafe", "tile add", "softmax", "moved"):
        assert re.search(rf"^  ✓ {step} ", out, re.MULTILINE), step
    assert "rejected with BorrowError" in out
    assert "error[E0502]" in out and "demo.py" in out  # the diagnostic points at the launch
    # The Tile diagnostic points at the launch that used `z` and names the line where it moved.
    assert "add(zp, z, y) rejected with MovedError before it ran" in out
    assert "error[E0382]: use of a moved tensor" in out
    assert re.search(r"--> .*demo\.py:\d+:\d+\n.*\n.*\|\s+add\(zp, z, y\)", out)
    assert re.search(r"= note: the tensor moved at .*demo\.py:\d+:\d+", out)
    assert "Summary: SIMT vecadd, saxpy and softmax, Tile add and softmax" in out


@pytest.mark.parametrize("size", ["0", "-5", "many"])
def test_demo_size_must_be_a_positive_whole_number(
    size: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", f"--size={size}"]) == 2
    err = capsys.readouterr().err
    assert f"argument --size: '{size}' is not a" in err
