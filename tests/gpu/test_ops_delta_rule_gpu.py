"""`fearless.ops.recurrent_gated_delta_rule` and `chunk_gated_delta_rule` on the GPU at
TileGym's test shapes (tests/ops/test_recurrent_gated_delta_rule.py and
test_chunk_gated_delta_rule.py: decode, T16..T2048 and Qwen3.5's T10782, K/V 64..256, chunk
sizes 32 and 64, initial and final states, l2norm; f32 and bf16 inputs scaled as TileGym's),
against the float64 NumPy references with TileGym's tolerances; and TileGym's correlated-keys
case (a near-singular chunk solve) with its tolerances."""

from __future__ import annotations

import pytest

from fearless import ops
from support.delta_rule_ref import chunk_reference, recurrent_reference

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

RECURRENT = [  # B, T, H, K, V, initial state, final state, l2norm (TileGym's)
    (2, 1, 4, 64, 64, False, False, False),
    (1, 1, 16, 128, 128, True, True, True),
    (2, 16, 4, 64, 64, False, False, False),
    (1, 32, 8, 128, 128, False, True, False),
    (2, 8, 4, 64, 64, True, True, False),
    (1, 16, 4, 64, 128, False, False, False),
    (2, 8, 4, 128, 64, False, False, True),
    (1, 1, 1, 64, 64, False, False, False),
    (1, 64, 4, 64, 64, False, False, False),
]

CHUNK = [  # B, T, H, K, V, chunk size, initial state, final state, l2norm (TileGym's)
    (1, 1, 1, 64, 64, 64, False, False, False),
    (2, 1, 4, 64, 64, 64, False, False, False),
    (2, 16, 4, 64, 64, 64, False, False, False),
    (1, 32, 8, 128, 128, 64, False, True, False),
    (2, 64, 4, 64, 64, 64, False, False, False),
    (2, 8, 4, 64, 64, 64, True, True, False),
    (1, 16, 4, 64, 128, 64, False, False, False),
    (2, 8, 4, 128, 64, 64, False, False, True),
    (2, 4, 8, 256, 128, 64, True, True, False),
    (1, 100, 4, 64, 64, 64, False, False, False),
    (2, 128, 4, 64, 64, 32, False, False, False),
    (1, 37, 4, 64, 64, 64, False, False, False),
    (2, 65, 4, 128, 128, 64, False, True, False),
    (2, 512, 8, 128, 128, 64, False, False, True),
    (2, 2048, 8, 128, 128, 64, False, False, True),
    (1, 10782, 8, 128, 128, 64, False, False, True),
]


def _inputs(b, t, h, k, v, dtype, init):  # type: ignore[no-untyped-def]
    torch.manual_seed(42)
    q = torch.randn(b, t, h, k, device="cuda", dtype=dtype) * 0.1
    kk = torch.randn(b, t, h, k, device="cuda", dtype=dtype) * 0.1
    vv = torch.randn(b, t, h, v, device="cuda", dtype=dtype) * 0.1
    g = -torch.abs(torch.randn(b, t, h, device="cuda", dtype=dtype)) * 0.5
    beta = torch.sigmoid(torch.randn(b, t, h, device="cuda", dtype=dtype))
    s0 = torch.randn(b, h, k, v, device="cuda") * 0.01 if init else None
    return q, kk, vv, g, beta, s0


def _np(*xs):  # type: ignore[no-untyped-def]
    return [None if x is None else x.double().cpu().numpy() for x in xs]


def _close(got, want, atol, rtol) -> None:  # type: ignore[no-untyped-def]
    want = torch.from_numpy(want).to(got.device, torch.float32)
    torch.testing.assert_close(got.float(), want, atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("case", RECURRENT, ids=lambda c: "-".join(map(str, c)))
def test_recurrent_at_tilegyms_shapes(case, dtype) -> None:  # type: ignore[no-untyped-def]
    b, t, h, k, v, init, final, l2 = case
    q, kk, vv, g, beta, s0 = _inputs(b, t, h, k, v, dtype, init)
    out, state = ops.recurrent_gated_delta_rule(q, kk, vv, g, beta, s0, final, l2)
    want, want_s = recurrent_reference(*_np(q, kk, vv, g, beta, s0), l2)
    atol, rtol = (1e-4, 1e-3) if dtype == torch.float32 else (2e-3, 5e-3)
    assert out.is_cuda and out.dtype == dtype and (state is not None) == final
    _close(out, want, atol, rtol)
    if final:
        _close(state, want_s, atol, rtol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("case", CHUNK, ids=lambda c: "-".join(map(str, c)))
def test_chunked_at_tilegyms_shapes(case, dtype) -> None:  # type: ignore[no-untyped-def]
    b, t, h, k, v, cs, init, final, l2 = case
    q, kk, vv, g, beta, s0 = _inputs(b, t, h, k, v, dtype, init)
    out, state = ops.chunk_gated_delta_rule(q, kk, vv, g, beta, cs, s0, final, l2)
    assert torch.isfinite(out).all()
    qn, kn, vn, gn, bn, sn = _np(q, kk, vv, g, beta, s0)
    want, want_s = chunk_reference(qn, kn, vn, gn, bn, cs, sn, l2)
    atol, rtol = (1e-3, 2e-3) if dtype == torch.float32 else (2e-3, 5e-3)
    _close(out, want, atol, rtol)
    if final:
        _close(state, want_s, atol, rtol)


@pytest.mark.parametrize("l2", [False, True], ids=["prenormalized", "in_kernel_l2"])
def test_correlated_keys_keep_the_chunk_solve_stable(l2: bool) -> None:
    torch.manual_seed(0)
    b, t, h, k, v, dt = 1, 64, 1, 128, 128, torch.bfloat16
    base = torch.randn(b, 1, h, k, device="cuda")
    key = (base + 0.02 * torch.randn(b, t, h, k, device="cuda")).to(dt)
    if not l2:
        key = torch.nn.functional.normalize(key.float(), dim=-1).to(dt)
    q = torch.randn(b, t, h, k, device="cuda", dtype=dt) * 0.1
    vv = torch.randn(b, t, h, v, device="cuda", dtype=dt) * 0.1
    g = -torch.rand(b, t, h, device="cuda") * 0.02
    beta = torch.sigmoid(torch.randn(b, t, h, device="cuda", dtype=dt) + 2)
    out, state = ops.chunk_gated_delta_rule(q, key, vv, g, beta, 64, None, True, l2)
    assert torch.isfinite(out).all() and torch.isfinite(state).all()
    want, want_s = chunk_reference(*_np(q, key, vv, g, beta), 64, None, l2)
    _close(out, want, 2e-3, 5e-3)
    _close(state, want_s, 3e-3, 5e-3)
