"""Conditional expressions `a if c else b` in Tile kernels: an elementwise select of tiles and
numbers (as cuTile Python's `where`) on a run-time condition, one arm on a compile-time one;
the simulator against NumPy, the IR, and the bytecode through tileiras.
"""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless.ir.tile.printer import print_function
from fearless.runtime.target import Target
from support.tile_ifexp_kernels import _run, signed_relu

RNG = np.random.default_rng(12)


def _expected(x: np.ndarray, scale: int) -> np.ndarray:
    w = np.maximum(x, np.float32(0.0))
    u = w * np.float32(3.0) if scale > 1 else w
    blocks = -(-len(x) // 64)
    padded = np.zeros(blocks * 64, np.float32)
    padded[: len(x)] = x
    sums = padded.reshape(blocks, 64).sum(axis=1, dtype=np.float32)
    sign = np.repeat(np.where(sums > 0, 1.0, -1.0).astype(np.float32), 64)[: len(x)]
    return u * sign


@pytest.mark.parametrize("scale", [1, 2])
def test_select_of_tiles_and_numbers_matches_numpy(scale: int) -> None:
    fl.set_target("sim")
    try:
        x = RNG.standard_normal(300).astype(np.float32)
        np.testing.assert_allclose(_run(x, scale), _expected(x, scale), rtol=1e-6)
    finally:
        fl.set_target(None)


def _signature(scale: int):  # type: ignore[no-untyped-def]
    zp = fl.zeros(300, dtype=fl.f32).partition((64,))
    x = fl.zeros(300, dtype=fl.f32)
    return signed_relu.signature_of((zp, x, scale), Target.SIM)[0]


def test_compile_time_condition_lowers_one_arm() -> None:
    one = print_function(signed_relu.ir_for(_signature(1)).fn)
    three = print_function(signed_relu.ir_for(_signature(3)).fn)
    # Two selects either way (`v > 0`, the sum's sign); the Const picked one arm statically.
    assert one.count("tile.select") == three.count("tile.select") == 2
    assert "3.0" in three and "3.0" not in one


def test_bytecode_compiles() -> None:
    ct = signed_relu.compile(_signature(2), "sm_90")
    assert ct.cubin[:4] == b"\x7fELF"
