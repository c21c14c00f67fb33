"""`fearless.ops.nvfp4_quantize` (TileGym's experimental NVFP4 quantization) on the simulator,
byte for byte against the NumPy reference of tests/support/nvfp4_ref.py: f32, f16 and bf16
inputs; partial last row and column blocks (their scales 0); s_enc other than 1 (TileGym's
6 * 448 / amax too); zeros; ties of the e2m1 rounding (to the even code) and values past
6 * scale (saturated); scales from f8e4m3fn's subnormals to past 448 (saturated to 448), and scales that
round to 0; the swizzled scale layout and the nibble order spelled out on their own; the call
kinds (NumPy, fl.Tensor, torch); empty inputs; the refusals; the kernel through tileiras."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import fearless as fl
from fearless.ops.kernels_nvfp4 import make_nvfp4_quantize
from fearless.ops.nvfp4 import nvfp4_quantize
from support.nvfp4_ref import e2m1_codes, nvfp4_reference

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(44)


def _quantize(x: Any, s_enc: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    packed, scales = nvfp4_quantize(x, s_enc)
    assert isinstance(packed, np.ndarray) and isinstance(scales, np.ndarray)
    assert packed.dtype == np.uint8 and scales.dtype == np.uint8
    return packed, scales


def _check(x: np.ndarray, s_enc: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = x.shape
    packed, scales = _quantize(x, s_enc)
    tiles = -(-rows // 128) * -(-cols // 64)
    assert packed.shape == (rows, cols // 2) and scales.shape == (tiles * 512,)
    want_packed, want_scales = nvfp4_reference(x, s_enc)
    np.testing.assert_array_equal(scales, want_scales)
    np.testing.assert_array_equal(packed, want_packed)
    return packed, scales


CASES = [  # rows, cols, dtype, s_enc (None: TileGym's 6 * 448 / amax)
    (128, 64, np.float32, 1.0),  # one whole block
    (256, 192, BF16, None),  # whole blocks, 2 x 3
    (200, 80, np.float16, 1.0),  # partial last row block and column block (one group of 4)
    (17, 48, BF16, 0.37),  # one partial block: 17 rows, 3 groups
    (1, 16, np.float32, 3.0),  # a single row and group
    (131, 208, np.float32, None),  # 3 rows into the second row block; last block of 1 group
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}-{np.dtype(c[2]).name}")
def test_matches_the_reference(case: tuple) -> None:
    rows, cols, dtype, s_enc = case
    x = (RNG.standard_normal((rows, cols)) * 2.5).astype(dtype)
    x[0, :4] = [0.0, -0.0, 7.5, -1e-3]
    if s_enc is None:
        s_enc = 6.0 * 448.0 / float(np.abs(x.astype(np.float32)).max())
    _, scales = _check(x, s_enc)
    # groups and rows past x's end have scale 0; every group inside one at least 2^-9
    grid = _unswizzle(scales, rows, cols)
    bm, bn = -(-rows // 128), -(-cols // 64)
    inside = (np.arange(bm * 128)[:, None] < rows) & (np.arange(bn * 4)[None, :] * 16 < cols)
    assert (grid[~inside] == 0).all()
    if s_enc >= 1.0:
        assert (grid[inside] > 0).all()


def _unswizzle(scales: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """The (row blocks * 128, column blocks * 4) grid of scale bytes, the layout undone."""
    bm, bn = -(-rows // 128), -(-cols // 64)
    grid = np.zeros((bm * 128, bn * 4), np.uint8)
    for m in range(bm):
        for n in range(bn):
            block = scales[(m * bn + n) * 512 : (m * bn + n + 1) * 512]
            for r in range(128):
                for c in range(4):
                    grid[m * 128 + r, n * 4 + c] = block[(r % 32) * 16 + (r // 32) * 4 + c]
    return grid


def test_the_scale_layout_and_the_nibble_order() -> None:
    """Every group a distinct power-of-two scale, its values the group's own index pattern:
    the swizzle (byte (r % 32) * 16 + (r // 32) * 4 + c of block m * NUM_N_BLOCKS + n) and
    the low nibble holding the even column, checked without the reference."""
    rows, cols = 256, 128
    exps = (np.arange(rows)[:, None] + 3 * np.arange(cols // 16)[None, :]) % 9 - 4
    amax = 6.0 * 2.0**exps  # scale 2^exps exactly
    x = np.repeat(amax, 16, axis=1).astype(np.float32)
    x[:, 1::2] *= -0.5  # odd columns: -3 * scale, code 0xD; even: 6 * scale, code 0x7
    packed, scales = _quantize(x)
    grid = _unswizzle(scales, rows, cols)
    want = (2.0**exps).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    np.testing.assert_array_equal(grid, want)
    assert (packed == 0xD7).all()


def test_e2m1_rounding_ties_saturation_and_signs() -> None:
    """One group of scale 1 (max 6): its values on each rounding boundary go to the even
    code; values past 6 (a group rounded down to its scale) saturate; -0.0 keeps its sign."""
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0]
    want = [0, 2, 2, 4, 4, 6, 6, 7]
    x = np.zeros((2, 32), np.float32)
    x[0, :8], x[0, 8:16] = ties, [-t for t in ties]
    x[0, 16:32] = [6.0, 0.26, 0.74, 1.26, 1.74, 2.6, 3.4, 5.1, -0.0, -0.1, 0.1, 0, 0, 0, 0, 0]
    x[1, :16] = 6.5  # scale 6.5 / 6 rounds to 1.125: 6.5 / 1.125 = 5.78 -> 6
    x[1, 16:] = 1e3 * np.linspace(-1, 1, 16)  # scale 166.7 -> 160: 1000 / 160 = 6.25 -> 6
    packed, _ = _check(x)
    codes = np.stack([packed & 0xF, packed >> 4], -1).reshape(2, 32)
    assert codes[0, :8].tolist() == want
    assert codes[0, 8:16].tolist() == [c | 8 for c in want]
    assert codes[0, 16:27].tolist() == [7, 1, 1, 3, 3, 5, 5, 7, 8, 8, 0]
    assert (codes[1, :16] == 7).all() and codes[1, 16] == 15 and codes[1, 31] == 7


def test_zeros_tiny_and_huge_groups() -> None:
    """All zeros: scale bytes 0 (2^-16 rounds to 0 in f8e4m3fn) and codes 0. Group maxima
    from 2^-19 to 2^12: scales that round to 0 (their nonzero values saturate), f8e4m3fn
    subnormals and normals, and scales past 448, which saturate to 448 (byte 0x7E, as the GPU
    converts to f8e4m3fn; its values then saturate to code 7)."""
    packed, scales = _check(np.zeros((130, 96), BF16))
    assert (packed == 0).all() and (scales == 0).all()
    x = np.zeros((128, 64 * 8), np.float32)
    mags = 2.0 ** np.arange(-19, 13, dtype=np.float64)  # one per group: 2^-19 .. 2^12
    x[:, :] = np.repeat(mags, 16)[None, :] * RNG.uniform(-1, 1, (128, 64 * 8))
    x[:, ::16] = mags[None, :]  # each group's max: its magnitude
    packed, scales = _check(x)
    bytes_ = set(scales.tolist())
    assert {0, 1, 0x7E} <= bytes_ and 0x7F not in bytes_ and any(0x08 <= b < 0x7E for b in bytes_)
    _check(x * 1e3, 1e3)  # s_enc scales the scales: more saturate


def test_encoder_of_the_reference_agrees_with_ml_dtypes() -> None:
    """The reference's e2m1 rounding against ml_dtypes' float4_e2m1fn on finite values."""
    v = np.concatenate([RNG.uniform(-7, 7, 4000), np.arange(-26, 27) / 4]).astype(np.float32)
    want = v.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    np.testing.assert_array_equal(e2m1_codes(v), want)


def test_call_kinds() -> None:
    torch = pytest.importorskip("torch")
    x = (RNG.standard_normal((70, 96)) * 4).astype(np.float32)
    want_packed, want_scales = nvfp4_reference(x.astype(BF16), 2.0)
    t = torch.from_numpy(x).to(torch.bfloat16)
    packed, scales = nvfp4_quantize(t, s_enc=torch.tensor(2.0))
    assert isinstance(packed, torch.Tensor) and packed.dtype == torch.uint8
    assert isinstance(scales, torch.Tensor) and scales.dtype == torch.uint8
    np.testing.assert_array_equal(packed.numpy(), want_packed)
    np.testing.assert_array_equal(scales.numpy(), want_scales)
    fp, fs = nvfp4_quantize(fl.asarray(x.astype(BF16)), 2.0)
    assert isinstance(fp, fl.Tensor) and fp.dtype == fl.u8 and isinstance(fs, fl.Tensor)
    np.testing.assert_array_equal(fp.numpy(), want_packed)
    np.testing.assert_array_equal(fs.numpy(), want_scales)


def test_empty_inputs() -> None:
    packed, scales = _quantize(np.zeros((0, 64), np.float32))
    assert packed.shape == (0, 32) and scales.shape == (0,)
    packed, scales = _quantize(np.zeros((5, 0), np.float16))
    assert packed.shape == (5, 0) and scales.shape == (0,)


def _refused(match: str, *args: Any, **kwargs: Any) -> None:
    with pytest.raises(fl.KernelTypeError, match=match) as e:
        nvfp4_quantize(*args, **kwargs)
    assert e.value.code == "E0701"


def test_refusals() -> None:
    torch = pytest.importorskip("torch")
    _refused("takes f32, f16, bf16 tensors, but `x` is i8", np.zeros((128, 64), np.int8))
    _refused("takes f32, f16, bf16 tensors, but `x` is f64", np.zeros((128, 64)))
    _refused("quantizes a matrix", np.zeros((4, 128, 64), np.float32))
    _refused("quantizes a matrix", np.zeros(64, np.float32))
    _refused("a multiple of 16", np.zeros((128, 63), np.float32))
    _refused("must be a tensor", [[1.0] * 16])
    _refused("`s_enc` .* must be a number", np.zeros((1, 16), np.float32), "2")
    _refused("requires grad", torch.zeros(2, 16, requires_grad=True))


def test_the_kernel_compiles_through_tileiras(cubin: Callable[..., bytes]) -> None:
    for dt in (fl.f32, fl.bf16):
        x = fl.zeros((300, 208), dtype=dt)
        with (
            fl.empty((300, 104), dtype=fl.u8).partition((128, 32)) as p,
            fl.empty((3, 4, 512), dtype=fl.u8).partition((1, 1, 512)) as s,
        ):
            assert cubin(make_nvfp4_quantize(dt), p, s, x, 1.0)
