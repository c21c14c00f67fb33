"""`tile.truediv(a, b, rounding_mode=tile.RoundingMode..., flush_to_zero=...)` (issue 11):
cuTile Python's division with its rounding modes, lowered to Tile IR's divf flags."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import config, tile
from support.tile_truediv_kernels import divide


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


def _run(x: np.ndarray, y: np.ndarray, mode: int) -> np.ndarray:
    part = fl.empty(x.shape).partition((128,))
    divide(part, fl.asarray(x), fl.asarray(y), mode)
    return part.unpartition().numpy()


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_the_simulator_divides_exactly_in_every_mode(mode: int) -> None:
    rng = np.random.default_rng(mode)
    x = rng.standard_normal(300).astype(np.float32)
    y = rng.standard_normal(300).astype(np.float32) + 3
    np.testing.assert_array_equal(_run(x, y, mode), x / y)


def test_flush_to_zero_flushes_subnormal_inputs_and_results() -> None:
    tiny = np.float32(1e-40)  # subnormal in f32
    x = np.array([tiny, 1.0, 1e-30], np.float32)
    y = np.array([1.0, tiny, 1e10], np.float32)
    got = _run(x, y, 1)
    assert got[0] == 0 and np.isinf(got[1]) and got[2] == 0  # 1e-40 is subnormal: zero
    exact = _run(x, y, 0)
    assert exact[0] == tiny and exact[2] != 0


def test_the_modes_reach_the_ir_and_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    args = (fl.empty(256).partition((128,)), fl.zeros(256), fl.zeros(256))
    text = divide.inspect(*args[:3], 1)
    assert "kind='div', rounding='approx', flush_to_zero=True" in text
    assert "rounding='full'" in divide.inspect(*args[:3], 2)
    for mode in (0, 1, 2):
        assert cubin(divide, *args, mode)


def test_wrong_uses_are_refused() -> None:
    @tile.kernel
    def ints(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
        v = tile.load_like(x, out)
        out.store(tile.truediv(v, v).astype(fl.i32))

    with pytest.raises(fl.KernelTypeError, match=r"`tile\.truediv` takes float tiles"):
        ints(fl.zeros(8, dtype=fl.i32).partition((8,)), fl.zeros(8, dtype=fl.i32))

    @tile.kernel
    def half(out: tile.Part[fl.f16], x: tile.Tensor[fl.f16]):
        v = tile.load_like(x, out)
        out.store(tile.truediv(v, v, rounding_mode=tile.RoundingMode.APPROX))

    with pytest.raises(fl.KernelTypeError, match="is for f32 tiles"):
        half(fl.zeros(8, dtype=fl.f16).partition((8,)), fl.zeros(8, dtype=fl.f16))

    @tile.kernel
    def number(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        v = tile.load_like(x, out)
        out.store(tile.truediv(v, v, rounding_mode=3))

    with pytest.raises(fl.CompileError, match=r"must be a `tile\.RoundingMode`"):
        number(fl.zeros(8).partition((8,)), fl.zeros(8))
