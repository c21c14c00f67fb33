"""`fearless.ops.mamba2_chunk_forward` and `mamba2_chunk_backward` on the GPU at TileGym's test
shapes (tests/ops/test_mamba2.py's _E2E_SHAPE_CONFIGS: bf16, chunk sizes 64 and 128, one to four
groups), with TileGym's inputs (silu'd x, b, c, softplus'd dt, a = -U(1, 16), an initial state
from a recurrence) against the float64 sequential recurrence and float64 autograd through it,
with TileGym's tolerances."""

from __future__ import annotations

import pytest

from fearless import ops
from support.mamba2_ref import grad_reference, scan_reference

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

SHAPES = [  # B, T, G, H, N (state_size), P (head_size), chunk size (TileGym's)
    (1, 64, 1, 4, 16, 32, 64),
    (2, 128, 1, 4, 16, 32, 64),
    (1, 64, 2, 4, 16, 32, 64),
    (2, 128, 2, 8, 32, 64, 64),
    (1, 192, 1, 4, 16, 32, 64),
    (2, 256, 2, 8, 64, 64, 64),
    (2, 64, 1, 8, 16, 64, 64),
    (1, 192, 1, 4, 64, 64, 64),
    (1, 256, 4, 4, 128, 64, 128),
]


def _inputs(bsz, t, g, h, n, p, cs):  # type: ignore[no-untyped-def]
    """TileGym's inputs; the initial state is the final state of a chunk of such inputs."""
    torch.manual_seed(42)
    silu, bf = torch.nn.functional.silu, torch.bfloat16
    rn = lambda *s: torch.randn(*s, device="cuda", dtype=bf)  # noqa: E731
    x, b, c = silu(rn(bsz, t, h, p)), silu(rn(bsz, t, g, n)), silu(rn(bsz, t, g, n))
    a = -torch.empty(h, device="cuda").uniform_(1, 16)
    d = torch.randn(h, device="cuda")
    dt = torch.nn.functional.softplus(rn(bsz, t, h))
    xw, bw, dtw = silu(rn(bsz, cs, h, p)), silu(rn(bsz, cs, g, n)), rn(bsz, cs, h)
    with torch.no_grad():
        _, s0 = ops.mamba2_chunk_forward(
            xw, a, bw, bw, d, torch.nn.functional.softplus(dtw), None, cs
        )
    return x, a, b, c, d, dt, s0


def _np(*xs):  # type: ignore[no-untyped-def]
    return [x.double().cpu().numpy() for x in xs]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(map(str, s)))
def test_forward_at_tilegyms_shapes(shape: tuple) -> None:
    bsz, t, g, h, n, p, cs = shape
    x, a, b, c, d, dt, s0 = _inputs(bsz, t, g, h, n, p, cs)
    with torch.no_grad():
        out, state = ops.mamba2_chunk_forward(x, a, b, c, d, dt, s0, chunk_size=cs)
    want, want_s = scan_reference(*_np(x, a, b, c, d, dt, s0))
    torch.testing.assert_close(out.double().cpu(), torch.from_numpy(want), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(state.double().cpu(), torch.from_numpy(want_s), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("shape", SHAPES[:6], ids=lambda s: "-".join(map(str, s)))
def test_backward_at_tilegyms_shapes(shape: tuple) -> None:
    bsz, t, g, h, n, p, cs = shape
    x, a, b, c, d, dt, s0 = _inputs(bsz, t, g, h, n, p, cs)
    dy = torch.randn_like(x)
    dfin = torch.randn_like(s0)
    with torch.no_grad():
        grads = ops.mamba2_chunk_backward(x, a, b, c, d, dt, s0, dy, dfin, chunk_size=cs)
    want = grad_reference(*_np(x, a, b, c, d, dt, s0, dy, dfin))
    tols = (4e-2, 1e-2, 5e-2, 4e-2, 1e-2, 8e-2, 1e-2)  # TileGym's (dx, da, db, dc, dd, ddt, dinit)
    for got, ref, tol in zip(grads, want, tols, strict=True):
        scale = max(1.0, float(abs(ref).max()))  # da, dd sum over every token: relative to it
        torch.testing.assert_close(
            got.double().cpu() / scale, torch.from_numpy(ref) / scale, atol=tol, rtol=tol
        )
