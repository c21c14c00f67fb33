"""`fearless.ops.w8a8_block_fp8_matmul` on the GPU: at TileGym's shapes
(tests/suites/unsloth/test_fp8.py: M, N, K of 128, 256, 512 x 1024 x 512, 1024 x 2048 x 1024,
block [128, 128], f32 output, A and B from normals * 0.1, scales in [0.1, 1.1)) against its
torch reference restated (dequantise, then multiply in f32) with its tolerances; and at
vLLM-like ragged shapes (M of 1 and 83, N of 7748, DeepSeek-V3's K of 7168, blocks [128, 128]
and [64, 64], bf16 and f16 outputs) against the float64 NumPy reference with vLLM's measure
(mean absolute difference over mean magnitude below 1e-3)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from fearless import ops
from support.fp8_block_ref import fp8_block_matmul_reference

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _tilegym_reference(A, B, As, Bs, block_n, block_k):  # type: ignore[no-untyped-def]
    """TileGym's reference, vectorised: A and B dequantised per block in f32, A @ B^T."""
    k = A.shape[-1]
    a = A.float() * As.repeat_interleave(block_k, 1)[:, :k]
    s = Bs.repeat_interleave(block_n, 0).repeat_interleave(block_k, 1)
    b = B.float() * s[: B.shape[0], :k]
    return a @ b.T


@pytest.mark.parametrize(
    "M,N,K", [(128, 128, 128), (256, 256, 256), (512, 1024, 512), (1024, 2048, 1024)]
)
def test_matches_tilegyms_reference(M: int, N: int, K: int) -> None:
    torch.manual_seed(42)
    A = (torch.randn(M, K, device="cuda") * 0.1).to(torch.float8_e4m3fn)
    B = (torch.randn(N, K, device="cuda") * 0.1).to(torch.float8_e4m3fn)
    As = torch.rand(M, K // 128, device="cuda") + 0.1
    Bs = torch.rand(N // 128, K // 128, device="cuda") + 0.1
    got = ops.w8a8_block_fp8_matmul(A, B, As, Bs, [128, 128])
    assert got.is_cuda and got.dtype == torch.float32 and got.shape == (M, N)
    want = _tilegym_reference(A, B, As, Bs, 128, 128)
    torch.testing.assert_close(got, want, rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize(
    "M,N,K,block,dtype",
    [
        (1, 7748, 7168, [128, 128], torch.bfloat16),
        (83, 7748, 7168, [128, 128], torch.bfloat16),
        (83, 1000, 4096, [64, 64], torch.float16),
        (2048, 4096, 7168, [128, 128], torch.bfloat16),
    ],
)
def test_matches_the_float64_reference_at_ragged_shapes(M, N, K, block, dtype) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    bn, bk = block
    fp8_max = torch.finfo(torch.float8_e4m3fn).max
    A = ((torch.rand(M, K, device="cuda") - 0.5) * 2 * fp8_max).to(torch.float8_e4m3fn)
    B = ((torch.rand(N, K, device="cuda") - 0.5) * 2 * fp8_max).to(torch.float8_e4m3fn)
    As = torch.rand(M, -(-K // bk), device="cuda") * 1e-2
    Bs = torch.rand(-(-N // bn), -(-K // bk), device="cuda") * 1e-2
    got = ops.w8a8_block_fp8_matmul(A, B, As, Bs, block, dtype)
    assert got.dtype == dtype and got.shape == (M, N)
    raw = [t.cpu().view(torch.uint8).numpy() for t in (A, B)]
    a, b = (r.view(ml_dtypes.float8_e4m3fn) for r in raw)
    want = fp8_block_matmul_reference(a, b, As.cpu().numpy(), Bs.cpu().numpy(), bn, bk)
    # rounded to the output's dtype first, as vLLM's reference is: bf16's rounding of the
    # exact product alone is 1.4e-3 of its magnitude on this measure (f16's 1.8e-4)
    want = torch.from_numpy(want).to(dtype).double().numpy()
    diff = np.abs(got.double().cpu().numpy() - want).mean() / np.abs(want).mean()
    assert diff < 1e-3
