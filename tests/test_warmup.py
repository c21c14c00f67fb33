"""runtime/warmup.py: the first kernel a process defines on a track starts that track's
toolchain warm-up on a thread (once per track, only for the GPU target, its failures left to
the compile), and the tracks' warm-ups do what a first compile would otherwise wait for
(on the CPU: a Tile first compile to a cubin 0.20 -> 0.12 s, SIMT 0.15 -> 0.09 s, once
the warm-up has run)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import fearless as fl
from fearless import config, simt, tile
from fearless.runtime import target, warmup


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """No track warmed yet, an empty disk cache (a cache that holds this version's kernels
    skips the warm-up), the GPU target chosen, and each track's work recorded."""
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(warmup, "_started", set())
    monkeypatch.setattr(config, "target_override", lambda: None)  # the tests' FEARLESS_TARGET
    monkeypatch.setattr(target, "current_target", lambda: target.Target.CUDA)
    monkeypatch.setattr(warmup, "current_target", lambda: target.Target.CUDA)
    ran: list[str] = []
    monkeypatch.setattr(sys.modules["fearless.tile.compiles"], "warm", lambda: ran.append("tile"))
    monkeypatch.setattr(sys.modules["fearless.simt.api"], "warm", lambda: ran.append("simt"))
    return ran


def test_the_first_kernel_of_each_track_starts_its_warm_up_once(fresh: list[str]) -> None:
    threads = []
    for _ in range(2):
        threads.append(warmup.start("tile", lambda: fresh.append("tile")))
        threads.append(warmup.start("simt", lambda: fresh.append("simt")))
    started = [t for t in threads if t is not None]
    assert len(started) == 2 and [t.daemon for t in started] == [True, True]
    for t in started:
        t.join()
    assert sorted(fresh) == ["simt", "tile"]


def test_defining_kernels_warms_each_track_once(fresh: list[str]) -> None:
    def body(x: tile.Part[fl.f32]) -> None:
        x.store(tile.zeros((4,), fl.f32))

    def thread_body(c: simt.DisjointSlice[fl.f32]) -> None:
        c[simt.thread.index_1d()] = 1.0

    tile.kernel(body), tile.kernel(body), simt.kernel(thread_body), simt.kernel(thread_body)
    for t in list(threading.enumerate()):
        if t.name.startswith("fearless-warmup-"):
            t.join()
    assert sorted(fresh) == ["simt", "tile"]


def test_no_warm_up_on_the_simulator_and_a_failure_is_left_to_the_compile(
    fresh: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config, "target_override", lambda: "sim")
    assert warmup.start("tile", lambda: fresh.append("tile")) is None
    monkeypatch.setattr(config, "target_override", lambda: None)

    def broken() -> None:
        raise fl.ToolchainError("no tileiras")

    thread = warmup.start("simt", broken)
    assert thread is not None
    thread.join()  # nothing raised on the thread, nothing recorded
    assert fresh == []


def test_the_tracks_warm_ups_load_what_a_first_compile_needs() -> None:
    """Tile: cuda-tile's encoders imported and tileiras's versions listed; SIMT: llvmlite and
    LLVM's NVPTX set-up (no GPU needed for either)."""
    from fearless.backends.llvm import ptx
    from fearless.backends.tileir import cuda_tile
    from fearless.simt.compiler import warm as warm_simt
    from fearless.tile.compiler import warm as warm_tile

    warm_tile()
    assert "cuda.tile._bytecode" in sys.modules
    assert cuda_tile._listed_versions.cache_info().currsize >= 1
    warm_simt()
    assert ptx._initialise_once.cache_info().currsize == 1


def test_no_warm_up_once_this_version_compiled_into_the_cache(
    fresh: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A cache that holds a kernel this version compiled on a track: first calls are mostly
    hits, which need no toolchain, so that track skips its warm-up (the other does not)."""
    from fearless import cache

    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    assert not cache.built_here("tile")
    cache.mark_built("tile")
    assert cache.built_here("tile") and not cache.built_here("simt")
    assert warmup.start("tile", lambda: fresh.append("tile")) is None
    thread = warmup.start("simt", lambda: fresh.append("simt"))
    assert thread is not None
    thread.join()
    assert fresh == ["simt"]


def test_a_compile_marks_its_track_built(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from fearless import cache

    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))

    @tile.kernel
    def fill(x: tile.Part[fl.f32]) -> None:
        x.store(tile.zeros((4,), fl.f32))

    x = fl.asarray(np.zeros(8, np.float32)).partition((4,))
    fill.inspect(x, stage="resources")  # a cubin compiled: a miss
    assert cache.built_here("tile") and not cache.built_here("simt")
