"""fl.autotune's argument copies on the GPU (tests/test_autotune_redteam.py has the CPU side):
a GPU tensor's contents kept on the GPU and put back, zeroed, read back to compare; and a
tuned SIMT kernel that adds into `out` (restore_value, reset_to_zero, or neither, warned about)
gives what a warm call gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fearless as fl
from fearless import autotune_timing, simt

pytestmark = pytest.mark.gpu


@simt.kernel
def add(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = out[i] + x[i]


def test_a_gpu_tensor_is_kept_zeroed_and_read_on_the_gpu() -> None:
    fl.set_target("cuda")
    try:
        t = fl.asarray(np.arange(1000, dtype=np.float32))
        keep = autotune_timing.keep("t", t)
        autotune_timing.zero("t", t)()
        assert not t.numpy().any()
        keep()
        assert np.array_equal(t.numpy(), np.arange(1000, dtype=np.float32))
        seen = autotune_timing._contents(t)
        assert isinstance(seen, np.ndarray) and not autotune_timing._differs(seen, t.numpy())
    finally:
        fl.set_target(None)


@pytest.mark.parametrize("declared", ["restore_value", "reset_to_zero", "neither"])
def test_a_tuned_accumulation_on_the_gpu_is_applied_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, declared: str
) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "1")
    names = {declared: ["out"]} if declared != "neither" else {}

    @fl.autotune(configs=[{"block": 64}, {"block": 128}], key=["x"], **names)
    def acc(x: fl.Tensor, out: fl.Tensor, *, block: int) -> None:
        add[(len(out) + block - 1) // block, block](x, out)

    fl.set_target("cuda")
    try:
        x, out = fl.ones(4096), fl.full(4096, 5.0)
        if declared == "neither":
            with pytest.warns(fl.FearlessWarning, match="changed `out` again"):
                acc(x, out)
        else:
            acc(x, out)
        assert np.array_equal(out.numpy(), np.full(4096, 6.0, np.float32))
        acc(x, out)  # warm
        assert np.array_equal(out.numpy(), np.full(4096, 7.0, np.float32))
    finally:
        fl.set_target(None)
