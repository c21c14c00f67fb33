"""TileGym's experimental mHC operators on the GPU at TileGym's test shapes
(tests/ops/experimental/test_mhc.py: gemm (128, 1024 / 1000) with n 4 and 8, x bf16, w and
bias f32, alphas 0.8 / 1.1 / 0.9, tf32 reference; sinkhorn (256, n*n + 2n) f32 with n 4 and 8;
apply_residual (128, 4, 1024), (64, 8, 2048), (128, 2, 1024), x and f_out bf16, y f32) against
its torch references restated, with its tolerances."""

from __future__ import annotations

import pytest

from fearless import ops

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

ALPHAS = (0.8, 1.1, 0.9)


@pytest.mark.parametrize(("m", "k", "n"), [(128, 1024, 4), (128, 1024, 8), (128, 1000, 8)])
def test_gemm_rms_scale_matches_tilegyms_reference(m: int, k: int, n: int) -> None:
    torch.manual_seed(0)
    nn = n * n + 2 * n
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(k, nn, device="cuda")
    bias = torch.randn(nn, device="cuda")
    y, r = ops.mhc_gemm_rms_scale(x, w, n, *ALPHAS, bias)
    xf = x.float()
    allow = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        prod = xf @ w
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allow
    rms = torch.sqrt(xf.pow(2).mean(1, keepdim=True))
    scale = torch.full((nn,), ALPHAS[2], device="cuda")
    scale[:n], scale[n : 2 * n] = ALPHAS[0], ALPHAS[1]
    lin = prod * scale / rms + bias
    want = lin.clone()
    want[:, :n] = torch.sigmoid(lin[:, :n])
    want[:, n : 2 * n] = 2 * torch.sigmoid(lin[:, n : 2 * n])
    torch.testing.assert_close(y, want, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(r, rms, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("n", [4, 8])
def test_sinkhorn_matches_tilegyms_reference(n: int) -> None:
    torch.manual_seed(0)
    y = torch.randn(256, n * n + 2 * n, device="cuda")
    want = y.clone()
    mat = torch.exp(y[:, 2 * n :].reshape(-1, n, n))
    for _ in range(20):
        mat = mat / mat.sum(2, keepdim=True)
        mat = mat / mat.sum(1, keepdim=True)
    want[:, 2 * n :] = mat.reshape(-1, n * n)
    assert ops.mhc_sinkhorn(y, n) is y
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("m", "n", "c"), [(128, 4, 1024), (64, 8, 2048), (128, 2, 1024)])
def test_apply_residual_matches_tilegyms_reference(m: int, n: int, c: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(m, n * c, device="cuda", dtype=torch.bfloat16)
    f = torch.randn(m, c, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(m, n * n + 2 * n, device="cuda")
    out = ops.mhc_apply_residual(x, f, y, n)
    h_res = y[:, 2 * n :].view(m, n, n)
    want = h_res @ x.view(m, n, c).float() + y[:, n : 2 * n, None] * f[:, None].float()
    torch.testing.assert_close(out, want.to(x.dtype).view(m, n * c), rtol=1.6e-2, atol=1e-2)
