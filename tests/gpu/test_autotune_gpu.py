"""fl.autotune on the GPU: device-event timing picks a configuration, the result is right, the
winner is stored under the GPU's name, and a second autotuned object reads it back untimed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import fearless as fl
from fearless import simt

pytestmark = pytest.mark.gpu


@simt.kernel
def scale(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = x[i] * 2.0


def make(calls: list[int]):
    @fl.autotune(configs=[{"block": 32}, {"block": 128}, {"block": 512}], key=["x"])
    def run(x: fl.Tensor, out: fl.Tensor, *, block: int) -> None:
        calls.append(block)
        scale[(len(out) + block - 1) // block, block](x, out)

    return run


def test_autotune_times_on_the_device(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "1")  # also under a run that sets it to 0
    fl.set_target("cuda")
    try:
        n = 1 << 22
        x, out = fl.asarray(np.arange(n, dtype=np.float32)), fl.zeros(n)
        calls: list[int] = []
        run = make(calls)
        run(x, out)
        assert np.array_equal(out.numpy(), np.arange(n, dtype=np.float32) * 2)
        seconds = next(iter(run.timings.values()))
        assert all(t is not None and 0 < t < 0.01 for t in seconds)  # device time, not host
        stored = list((tmp_path / "autotune").rglob("*.json"))
        assert len(stored) == 1 and json.loads(stored[0].read_text())["best"]
        again: list[int] = []
        make(again)(x, out)
        assert len(again) == 1  # read back from disk, not tuned
        assert again[0] == calls[-1]
    finally:
        fl.set_target(None)


def test_a_tile_kernel_tunes_on_the_device_after_compiling_ahead(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The tuner's first pass compiles every configuration on worker threads without running
    it (tile/compile_ahead.py); the timing pass then finds them compiled, and the result is right."""
    from fearless import tile

    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "1")

    @fl.autotune(configs=[{"occupancy": 1}, {"occupancy": 2}, {"occupancy": 4}], key=["x"])
    @tile.kernel
    def doubled(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        out.store(tile.load_like(x, out) * 2.0)

    fl.set_target("cuda")
    try:
        x = fl.asarray(np.arange(1 << 20, dtype=np.float32))
        part = fl.empty(1 << 20).partition((1024,))
        doubled(part, x)
        assert np.array_equal(part.unpartition().numpy(), np.arange(1 << 20) * 2.0)
        timings = next(iter(doubled.timings.values()))
        assert all(t is not None and 0 < t < 0.01 for t in timings)
        for occupancy in (1, 2, 4):
            kernel = doubled.fn.options(occupancy=occupancy)
            assert (
                kernel.compiles.cubins and not kernel.compiles.ahead
            )  # compiled ahead, then taken
    finally:
        fl.set_target(None)
