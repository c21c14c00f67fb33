"""One argument binder (runtime/binder.py): the same rule and the same message for a refused
argument on both tracks, cold and warm, on the simulator (the GPU launchers' generated code is
covered with a fake driver in test_launch_overhead_paths.py and test_tile_launch_fast.py)."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import simt, tile
from fearless.runtime.binder import arity_error, dtype_error, scalar_error, scalar_fits


@simt.kernel
def scale_simt(x: simt.Slice[fl.f32], a: fl.f32, n: fl.i32, out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = x[i] * a + fl.f32(n)


@tile.kernel
def scale_tile(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], a: fl.f32, n: fl.i32):
    z.store(tile.load_like(x, z) * a + n.astype(fl.f32))


def _simt(*scalars: object) -> None:
    x = np.ones(64, np.float32)
    scale_simt[1, 64](x, *scalars, np.zeros(64, np.float32))


def _tile(*scalars: object) -> None:
    z = fl.zeros(64, dtype=fl.f32)
    zp = z.partition((64,))
    try:
        scale_tile(zp, fl.from_numpy(np.ones(64, np.float32)), *scalars)
    finally:
        zp.unpartition()


@pytest.mark.parametrize(
    ("value", "dtype", "fits"),
    [
        (True, fl.i32, False),  # a bool is no integer argument (both tracks)
        (np.bool_(True), fl.f32, False),
        (True, fl.bool_, True),
        (1, fl.bool_, False),
        (2**31 - 1, fl.i32, True),
        (2**31, fl.i32, False),
        (1.5, fl.i64, False),
        (3, fl.f32, True),
        (1e40, fl.f32, False),  # finite, past f32's largest: would become inf
        (float("inf"), fl.f32, True),
        (float("nan"), fl.f16, True),
        (1e5, fl.f16, False),
        (65504.0, fl.f16, True),
        (1e39, fl.bf16, False),
        (3.0e38, fl.bf16, True),
        ("1", fl.f32, False),
    ],
)
def test_scalar_fits_is_one_rule(value: object, dtype: fl.DType, fits: bool) -> None:  # type: ignore[name-defined]
    assert scalar_fits(value, dtype) is fits


@pytest.mark.parametrize("launch", [_simt, _tile], ids=["simt", "tile"])
@pytest.mark.parametrize(
    ("a", "n", "bad", "shown"),
    [(1e40, 3, "a", "1e+40"), (2.0, True, "n", "True"), (2.0, 2**40, "n", str(2**40))],
)
def test_scalar_refusals_read_the_same_on_both_tracks(
    launch: object, a: object, n: object, bad: str, shown: str
) -> None:
    launch(2.0, 3)  # type: ignore[operator]  # warm the launch path first
    with pytest.raises(fl.KernelTypeError) as info:
        launch(a, n)  # type: ignore[operator]
    text = str(info.value)
    assert f"argument `{bad}` = {shown} does not fit the parameter's type" in text
    assert "error[E0701]" in text


def test_dtype_and_arity_read_the_same_on_both_tracks() -> None:
    with pytest.raises(
        fl.KernelTypeError, match=r"argument `x` has element type f64, but `scale_simt` expects f32"
    ):
        scale_simt[1, 64](np.ones(64), 2.0, 3, np.zeros(64, np.float32))
    z = fl.zeros(64, dtype=fl.f32)
    zp = z.partition((64,))
    with pytest.raises(
        fl.KernelTypeError, match=r"argument `x` has element type f64, but `scale_tile` expects f32"
    ):
        scale_tile(zp, fl.from_numpy(np.ones(64)), 2.0, 3)
    with pytest.raises(
        fl.KernelTypeError, match=r"`scale_simt` takes 4 arguments \(x, a, n, out\) but 1 was given"
    ):
        scale_simt[1, 64](np.ones(64, np.float32))
    with pytest.raises(
        fl.KernelTypeError, match=r"`scale_tile` takes 4 arguments \(z, x, a, n\) but 1 was given"
    ):
        scale_tile(zp)
    zp.unpartition()


def test_error_constructors_carry_codes_and_help() -> None:
    assert arity_error("k", ["a"], 2).code == "E0061"
    e = dtype_error("k", "x", "f64", fl.bf16)
    assert e.code == "E0701" and "torch.bfloat16" in str(e) and "fl.bf16" in str(e)
    assert "fl.f16(x)" in str(scalar_error("a", 1e9, fl.f16))
