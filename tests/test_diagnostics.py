"""What users see when something goes wrong: no compiler frames, and bugs in fearless reported
as internal compiler errors with a reproducer."""

from __future__ import annotations

import traceback
from pathlib import Path

import numpy as np
import pytest

import fearless as fl
from fearless import config, simt, tile
from fearless.crash import InternalCompilerError


@simt.kernel
def writes_slice(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    a[i] = 1.0


@simt.kernel
def fine(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i]


def test_compile_errors_carry_no_compiler_frames() -> None:
    with pytest.raises(fl.SafetyError) as info:
        writes_slice[1, 32](np.ones(4, np.float32), np.ones(4, np.float32))
    frames = traceback.extract_tb(info.value.__traceback__)
    internal = [
        f for f in frames if "/fearless/frontend/" in f.filename or "/fearless/ir/" in f.filename
    ]
    assert internal == []
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_bug_in_fearless_is_an_internal_compiler_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import fearless.simt.compiler as compiler

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated frontend bug")

    monkeypatch.setattr(compiler, "build_kernel_ir", broken)
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))

    @simt.kernel
    def k(c: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(c):
            c[i] = 1.0

    with pytest.raises(InternalCompilerError) as info:
        k.inspect(stage="ir")
    text = str(info.value)
    assert "internal compiler error: RuntimeError: simulated frontend bug" in text
    assert "this is a bug in fearless" in text
    crashes = list((tmp_path / "crashes").glob("ice-*.txt"))
    assert len(crashes) == 1
    report = crashes[0].read_text()
    assert "def k(c: simt.DisjointSlice[fl.f32]):" in report and "simulated frontend bug" in report


def test_bug_in_the_tile_compiler_is_an_internal_compiler_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    tile_compiles = sys.modules["fearless.tile.compiles"]

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated tile frontend bug")

    monkeypatch.setattr(tile_compiles, "build_ir", broken)
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(config, "_target_override", "sim")

    @tile.kernel
    def k(out: tile.Part[fl.f32]):
        out.store(tile.full((16,), 1.0, fl.f32))

    part = fl.zeros(64).partition((16,))
    for call in (lambda: k(part), lambda: k.inspect(stage="ir")):
        with pytest.raises(InternalCompilerError, match="simulated tile frontend bug") as info:
            call()
        assert "this is a bug in fearless" in str(info.value)
    crashes = list((tmp_path / "crashes").glob("ice-*.txt"))
    assert crashes and "def k(out: tile.Part[fl.f32]):" in crashes[0].read_text()


def test_traceback_env_keeps_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_TRACEBACK", "1")
    with pytest.raises(fl.SafetyError) as info:
        writes_slice.inspect(stage="ir")
    frames = traceback.extract_tb(info.value.__traceback__)
    assert any("/fearless/simt/access.py" in f.filename for f in frames)


@pytest.mark.parametrize("replayable", [True, False], ids=["replayable", "plain"])
def test_an_operators_argument_error_carries_no_frames_of_the_operator(replayable: bool) -> None:
    """fearless.ops refusals name the user's line; the operator's own frames (its checks, the
    shared argument helpers) are cut, as the tracks' entry points cut the compiler's."""
    from fearless import ops

    q = np.zeros((1, 4, 2, 2, 16), np.float32)
    k = np.zeros((1, 8, 2, 16), np.float32)
    with pytest.raises(fl.KernelTypeError, match="must be") as info:
        if replayable:  # start_q of the wrong type (ops/_arguments.py's `integer`)
            ops.attention_sink(q, k, k, np.zeros(4, np.float32), 0.25, None, "x")
        else:  # splitk_reduce's S_kv of the wrong type
            parts, lse = np.zeros((1, 2, 4, 16), np.float32), np.zeros((1, 2, 4), np.float32)
            ops.splitk_reduce(parts, lse, np.zeros((1, 2, 16), np.float32), "x")
    files = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    # the one frame kept is the wrapper's that raises it (ops/_replay.py's or, for an
    # operator that is not replayed, ops/_route.py's clean_op_errors)
    wrappers = ("_replay.py", "_route.py")
    assert not [f for f in files if "/fearless/ops/" in f and not f.endswith(wrappers)], files
    assert info.value.__suppress_context__


def test_traceback_env_keeps_an_operators_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    from fearless import ops

    monkeypatch.setenv("FEARLESS_TRACEBACK", "1")
    q = np.zeros((1, 4, 2, 2, 16), np.float32)
    k = np.zeros((1, 8, 2, 16), np.float32)
    with pytest.raises(fl.KernelTypeError) as info:
        ops.attention_sink(q, k, k, np.zeros(4, np.float32), 0.25, None, "x")
    files = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    assert any(f.endswith("ops/_arguments.py") for f in files), files
