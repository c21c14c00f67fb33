"""`fearless.ops.fused_add_rms_norm` on the GPU at Llama-3-8B's hidden 4096 in bf16 (a decode
step's one token and a prefill's 4096), against torch's unfused add then rms_norm, with the
gradients of a training step."""

from __future__ import annotations

import pytest

from fearless import ops

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


@pytest.mark.parametrize("tokens", [1, 4096])
def test_matches_torch_with_gradients(tokens: int) -> None:
    torch.manual_seed(tokens)
    x, r = (torch.randn(tokens, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    leaves = [t.clone().requires_grad_() for t in (x, r, w)]
    y, s = ops.fused_add_rms_norm(*leaves, 1e-5)
    assert y.is_cuda and torch.equal(s, x + r)
    ref = [t.float().requires_grad_() for t in (x, r, w)]
    s_ref = (ref[0] + ref[1]).bfloat16().float()  # the sum as the unfused bf16 add stores it
    y_ref = torch.nn.functional.rms_norm(s_ref, (4096,), ref[2], 1e-5)
    torch.testing.assert_close(y.float(), y_ref, atol=3e-2, rtol=1e-2)
    (y.float().square().sum() + s.float().sum()).backward()
    (y_ref.square().sum() + s_ref.sum()).backward()
    for got, want in zip(leaves, ref, strict=True):
        assert got.grad is not None and want.grad is not None
        err = (got.grad.float() - want.grad).norm() / want.grad.norm()
        assert float(err) < 2e-2
