"""fearless.ops.fused_linear_cross_entropy on the GPU at TileGym's test shapes (its experimental
op's and its Liger suite's), against torch's CUDA F.cross_entropy(F.linear(...)) in f32 of the
same rounded inputs: the loss, the gradients through autograd, and chunk-size consistency."""

from __future__ import annotations

from typing import Any

import pytest

import fearless as fl
from fearless import ops
from fearless.ops import kernels_linear_ce

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _reference(h: Any, w: Any, t: Any, b: Any, reduction: str) -> Any:
    logits = F.linear(h.float(), w.float(), None if b is None else b.float())
    return F.cross_entropy(logits.reshape(-1, w.shape[0]), t.reshape(-1), reduction=reduction)


def _inputs(lead: tuple[int, ...], hd: int, v: int, dt: Any, bias: bool = False) -> list[Any]:
    g = torch.Generator(device="cuda").manual_seed(0)
    h = torch.randn(*lead, hd, device="cuda", generator=g).to(dt)
    w = torch.randn(v, hd, device="cuda", generator=g).to(dt)
    t = torch.randint(0, v, lead, device="cuda", generator=g)
    t.view(-1)[: max(1, t.numel() // 4)] = -100
    b = torch.randn(v, device="cuda", generator=g).to(dt) if bias else None
    return [h, w, t, b]


# TileGym's tests/ops/experimental shapes (B, S, H, V, dtype, reduction), chunk_size=128
@pytest.mark.parametrize(
    ("lead", "hd", "v", "dt", "reduction"),
    [
        ((2, 128), 256, 2048, torch.float16, "mean"),
        ((2, 64), 256, 2048, torch.bfloat16, "mean"),
        ((1, 256), 384, 4096, torch.float16, "sum"),
    ],
)
def test_forward_matches_torch(
    lead: tuple[int, ...], hd: int, v: int, dt: Any, reduction: str
) -> None:
    h, w, t, _ = _inputs(lead, hd, v, dt)
    got = ops.fused_linear_cross_entropy(h, w, t, chunk_size=128, reduction=reduction)
    want = _reference(h, w, t, None, reduction)
    torch.testing.assert_close(got.float(), want, rtol=3e-2, atol=3e-2)


# TileGym's Liger suite shapes (BT, H, V, dtype), with and without bias, every reduction
@pytest.mark.parametrize(
    ("bt", "hd", "v", "dt"),
    [
        (4, 64, 128, torch.float32),
        (8, 128, 256, torch.float32),
        (4, 64, 128, torch.float16),
        (4, 64, 128, torch.bfloat16),
        (6, 64, 150, torch.float32),
        (63, 41, 41, torch.float32),
        (1024, 1024, 4096, torch.float32),
        # four chunks in bf16: grad_weight and grad_bias add into themselves chunk by chunk
        # (accum_dtype None, the weight's dtype: dw_into / db_into)
        (1024, 256, 1024, torch.bfloat16),
    ],
)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("bias", [False, True])
def test_loss_and_gradients_match_torch(
    bt: int, hd: int, v: int, dt: Any, reduction: str, bias: bool
) -> None:
    h, w, t, b = _inputs((bt,), hd, v, dt, bias)
    leaves = [x.detach().clone().requires_grad_() if x is not None else None for x in (h, w, b)]
    loss = ops.fused_linear_cross_entropy(
        leaves[0], leaves[1], t, leaves[2], chunk_size=256, reduction=reduction
    )
    ref_leaves = [x.detach().float().requires_grad_() if x is not None else None for x in (h, w, b)]
    want = _reference(ref_leaves[0], ref_leaves[1], t, ref_leaves[2], reduction)
    tol = 5e-3 if dt == torch.float32 else 3e-2
    torch.testing.assert_close(loss.float(), want, rtol=tol, atol=tol)
    dy = torch.rand_like(want) + 0.5
    loss.backward(dy.to(loss.dtype))
    want.backward(dy)
    for got, ref in zip(leaves, ref_leaves, strict=True):
        if ref is None:
            continue
        scale = float(
            ref.grad.abs().max()
        )  # dW and db are sums over tokens: relative to their largest
        torch.testing.assert_close(got.grad.float(), ref.grad, rtol=tol * 3, atol=tol * 3 * scale)


def test_chunk_size_does_not_change_the_loss() -> None:
    """TileGym's chunk-size consistency: (2, 257) tokens, chunks of 64 and 512."""
    h, w, t, _ = _inputs((2, 257), 192, 3072, torch.float16)
    a = ops.fused_linear_cross_entropy(h, w, t, chunk_size=64)
    b = ops.fused_linear_cross_entropy(h, w, t, chunk_size=512)
    torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("n", range(len(kernels_linear_ce.CE_CONFIGS)))
def test_every_row_kernel_configuration_matches_torch(n: int) -> None:
    """Each configuration of the row kernel the tuner may choose (rows per block, chunk,
    occupancy, the lanes' log-sum-exp), on bf16 logits over a vocabulary that is no power of
    two with ignored rows: the loss and the logits' gradient in place, against torch's."""
    config = kernels_linear_ce.CE_CONFIGS[n]
    g = torch.Generator(device="cuda").manual_seed(n)
    x = (torch.randn(96, 5003, device="cuda", generator=g) * 3).to(torch.bfloat16)
    t = torch.randint(0, 5003, (96,), device="cuda", generator=g)
    t[::7] = -100
    logits = x.clone()
    loss = torch.zeros(96, device="cuda")
    scale = torch.full((96,), 0.25, device="cuda")
    args = [fl.asarray(a) for a in (logits, loss, t, scale)]  # shared, not copied
    kernels_linear_ce.cross_entropy_tuned.fn(*args, -100, True, **config)
    torch.cuda.synchronize()
    xf = x.float().requires_grad_()
    want = F.cross_entropy(xf, t, reduction="none", ignore_index=-100)
    (want * 0.25).sum().backward()
    torch.testing.assert_close(loss, want.detach(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(logits.float(), xf.grad, rtol=2e-2, atol=2e-3)
