"""`fearless.ops.nvfp4_quantize` on the GPU: at TileGym's test shapes
(tests/ops/experimental/test_nvfp4_quantize.py: whole, partial-row, partial-column and
single-row blocks; bf16, f16 and f32; s_enc = 6 * 448 / amax) and at a large one, byte for
byte against the NumPy reference of tests/support/nvfp4_ref.py, also for zeros, scales that
round to 0 or past 448, and s_enc 1; and, where TileGym's cuTile kernel runs (its fp4 type
needs TileIR bytecode 13.3 and a Blackwell GPU), byte for byte against TileGym's output."""

from __future__ import annotations

import tempfile
from typing import Any

import numpy as np
import pytest

from fearless.ops.nvfp4 import nvfp4_quantize
from support.nvfp4_ref import nvfp4_reference

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

SHAPES = [  # TileGym's, then a large one
    (128, 64),
    (512, 256),
    (128, 80),
    (256, 48),
    (64, 64),
    (192, 64),
    (160, 80),
    (17, 64),
    (33, 48),
    (1, 64),
    (4096, 7168),
]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def _host(x: Any) -> np.ndarray:
    """A CUDA tensor's values on the host, bf16 as ml_dtypes' (through its raw bits)."""
    if x.dtype == torch.bfloat16:
        import ml_dtypes

        return x.cpu().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return x.cpu().numpy()  # type: ignore[no-any-return]


def _check(x: Any, s_enc: float) -> tuple[Any, Any]:
    packed, scales = nvfp4_quantize(x, s_enc)
    assert packed.is_cuda and scales.is_cuda
    assert packed.dtype == torch.uint8 and scales.dtype == torch.uint8
    want_packed, want_scales = nvfp4_reference(_host(x), s_enc)
    np.testing.assert_array_equal(scales.cpu().numpy(), want_scales)
    np.testing.assert_array_equal(packed.cpu().numpy(), want_packed)
    return packed, scales


def _tilegyms_s_enc(x: Any) -> float:
    return 6.0 * 448.0 / (x.abs().max().item() + 1e-12)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows,cols", SHAPES)
def test_matches_the_reference_at_tilegyms_shapes(rows: int, cols: int, dtype: Any) -> None:
    torch.manual_seed(rows * 7 + cols)
    x = torch.randn(rows, cols, dtype=dtype, device="cuda")
    _check(x, _tilegyms_s_enc(x))


def test_zeros_tiny_and_huge_scales() -> None:
    """0 / 0 (the codes of an all-zero group), scales rounded to 0 (saturated codes) and past
    448 (saturated to 448: the GPU converts to f8 with cvt.satfinite): the same bytes as the
    reference, which the simulator gives."""
    _check(torch.zeros(130, 96, dtype=torch.bfloat16, device="cuda"), 1.0)
    mags = 2.0 ** torch.arange(-19, 13, dtype=torch.float64)
    x = torch.rand(128, 512, dtype=torch.float64) * 2 - 1
    x = x * mags.repeat_interleave(16)[None, :]
    x[:, ::16] = mags[None, :]
    x = x.float().cuda()
    _check(x, 1.0)
    _check(x, 3.7)


def _tilegym_kernel() -> Any:
    """TileGym's cuTile launcher, or a skip where it cannot run here."""
    pytest.importorskip("tilegym")
    try:
        from cuda.tile._bytecode.version import BytecodeVersion
        from cuda.tile._cext import dev_features_enabled
        from cuda.tile._compile import _get_max_supported_bytecode_version

        ok = dev_features_enabled() and (
            _get_max_supported_bytecode_version(tempfile.gettempdir(), allow_dev=True)
            >= BytecodeVersion.V_13_3
        )
    except Exception as exc:  # any failure: TileGym's kernel cannot run here
        pytest.skip(f"cuTile cannot say whether it has fp4: {exc}")
    if not ok:
        pytest.skip("TileGym's kernel needs TileIR bytecode 13.3 (fp4_e2m1fn, pack_to_bytes)")
    if torch.cuda.get_device_capability()[0] < 10:
        pytest.skip("TileGym's kernel casts to fp4, which cuTile takes on sm_100 and newer")
    from tilegym.ops.cutile.experimental.nvfp4_quantize import tile_nvfp4_quantize

    return tile_nvfp4_quantize


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows,cols", SHAPES)
def test_matches_tilegym_byte_for_byte(rows: int, cols: int, dtype: Any) -> None:
    tilegym_quantize = _tilegym_kernel()
    torch.manual_seed(rows + cols)
    x = torch.randn(rows, cols, dtype=dtype, device="cuda")
    s_enc = _tilegyms_s_enc(x)
    packed, scales = nvfp4_quantize(x, s_enc)
    want_packed, want_scales = tilegym_quantize(x, s_enc=s_enc)
    assert torch.equal(scales, want_scales)
    assert torch.equal(packed, want_packed)


def test_matches_tilegym_on_zeros_and_tiny_groups() -> None:
    """fearless gives code 0 for 0 / 0 (a zero over a zero scale); this is where TileGym's
    fp4 cast of that NaN shows whether the GPU agrees."""
    tilegym_quantize = _tilegym_kernel()
    x = torch.zeros(128, 128, device="cuda")
    x[:, 64:] = 1e-6 * torch.randn(128, 64, device="cuda")  # scales that round to 0
    packed, scales = nvfp4_quantize(x, 1.0)
    want_packed, want_scales = tilegym_quantize(x, s_enc=1.0)
    assert torch.equal(scales, want_scales)
    assert torch.equal(packed, want_packed)
