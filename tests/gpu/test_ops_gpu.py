"""fearless.ops on the H200 against torch.nn.functional, with torch tensors in and out."""

from __future__ import annotations

import pytest

from fearless import ops

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _close(got, want, dt) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(got, torch.Tensor) and got.device == want.device and got.dtype == want.dtype
    tol = {torch.float32: 2e-4, torch.float16: 1e-2, torch.bfloat16: 4e-2}[dt]
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16])
def test_row_ops_match_torch(dt) -> None:  # type: ignore[no-untyped-def]
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(512, 4000, device="cuda", generator=g).to(dt)
    w = torch.randn(4000, device="cuda", generator=g).to(dt)
    b = torch.randn(4000, device="cuda", generator=g).to(dt)
    _close(ops.softmax(x), torch.softmax(x.float(), -1).to(dt), dt)
    _close(
        ops.rms_norm(x, (4000,), w, 1e-6),
        F.rms_norm(x.float(), (4000,), w.float(), 1e-6).to(dt),
        dt,
    )
    _close(
        ops.layer_norm(x, (4000,), w, b),
        F.layer_norm(x.float(), (4000,), w.float(), b.float()).to(dt),
        dt,
    )


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
def test_gemms_match_torch(dt) -> None:  # type: ignore[no-untyped-def]
    a = torch.randn(1000, 768, device="cuda").to(dt)
    b = torch.randn(768, 1200, device="cuda").to(dt)
    _close(ops.matmul(a, b), (a.float() @ b.float()).to(dt), dt)
    A = torch.randn(4, 300, 256, device="cuda").to(dt)
    B = torch.randn(4, 256, 200, device="cuda").to(dt)
    _close(ops.bmm(A, B), torch.bmm(A.float(), B.float()).to(dt), dt)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_activations_match_torch(dt) -> None:  # type: ignore[no-untyped-def]
    x = torch.randn(64, 2, 1024, device="cuda").to(dt)
    _close(ops.relu(x), F.relu(x), dt)
    _close(ops.gelu(x), F.gelu(x.float()).to(dt), dt)
    _close(ops.gelu(x, approximate="tanh"), F.gelu(x.float(), approximate="tanh").to(dt), dt)
    a, gate = x[..., :512], x[..., 512:]
    _close(ops.silu_and_mul(x), (F.silu(a.float()) * gate.float()).to(dt), dt)
    _close(ops.geglu(x), (a.float() * F.gelu(gate.float())).to(dt), dt)  # TileGym's halves
    _close(ops.swiglu(x, x), (F.silu(x.float()) * x.float()).to(dt), dt)


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
def test_every_gated_configuration_matches_torch(dt) -> None:  # type: ignore[no-untyped-def]
    """Each configuration of the gated activations' tuner (tuning is off in the GPU tests, so
    the wide ones run here only), at d = 5504 (128 its power-of-two factor) and 100 rows."""
    from fearless.ops._io import from_torch
    from fearless.ops.kernels_activation import GATED_CONFIGS, gated_tuned

    x = torch.randn(100, 2 * 5504, device="cuda").to(dt)
    a, b = x[:, :5504].float(), x[:, 5504:].float()
    for kind, want in (("silu", F.silu(a) * b), ("gelu_tanh", a * F.gelu(b, approximate="tanh"))):
        for cfg in GATED_CONFIGS:
            out = torch.empty(100, 5504, device="cuda", dtype=dt)
            gated_tuned.fn(kind, from_torch(x), from_torch(out), **cfg)
            _close(out, want.to(dt), dt)


def test_dropout() -> None:
    x = torch.randn(1 << 20, device="cuda")
    y = ops.dropout(x, 0.25, seed=3)
    assert abs((y == 0).float().mean().item() - 0.25) < 0.01
    torch.testing.assert_close(y, ops.dropout(x, 0.25, seed=3))
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / 0.75)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_rope_and_transpose_match_torch(dt) -> None:  # type: ignore[no-untyped-def]
    b, hq, hk, s, d = 2, 32, 8, 512, 128
    q = torch.randn(b, hq, s, d, device="cuda").to(dt)
    k = torch.randn(b, hk, s, d, device="cuda").to(dt)
    ang = torch.randn(s, d // 2, device="cuda")
    cos, sin = torch.cat([ang.cos()] * 2, -1).to(dt), torch.cat([ang.sin()] * 2, -1).to(dt)

    def ref(x):  # type: ignore[no-untyped-def]
        x1, x2 = x[..., : d // 2].float(), x[..., d // 2 :].float()
        return (x.float() * cos.float() + torch.cat([-x2, x1], -1) * sin.float()).to(dt)

    qr, kr = ops.rope(q, k, cos, sin)
    _close(qr, ref(q), dt)
    _close(kr, ref(k), dt)
    x = torch.randn(1000, 3000, device="cuda").to(dt)
    _close(ops.transpose(x), x.t().contiguous(), dt)
