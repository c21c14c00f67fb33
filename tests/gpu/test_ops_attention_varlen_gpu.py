"""`fearless.ops.fmha_varlen` and `fmha_decode` on the GPU at TileGym's shapes (fmha_varlen:
its cuTile kernel's padded (B, H, L, D) layout with per-sequence lengths, GQA, causal and not;
fmha_decode: tests/ops/test_flash_decode.py's B 2, 32 heads, D 64, S 9 / 119 / 256 / 8192,
groups 1 / 4 / 8, f16) against torch's SDPA per sequence, with TileGym's tolerances; and
`fmha` in fp8 (tests/ops/test_attention.py's float8_e5m2 case, and e4m3fn), within two of fp8's
steps near 1 of SDPA over the same fp8 inputs."""

from __future__ import annotations

import math

import pytest

from fearless import ops

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _varlen_ref(q, k, v, causal, ql, kl):  # type: ignore[no-untyped-def]
    """torch SDPA per sequence (bottom-right causal through an explicit mask), in f32."""
    out = torch.zeros_like(q, dtype=torch.float32)
    group = q.shape[1] // k.shape[1]
    for b, (nq, nk) in enumerate(zip(ql, kl, strict=True)):
        if nq == 0 or nk == 0:
            continue
        qq = q[b : b + 1, :, :nq].float()
        kk = k[b : b + 1, :, :nk].float().repeat_interleave(group, 1)
        vv = v[b : b + 1, :, :nk].float().repeat_interleave(group, 1)
        mask = None
        if causal:
            pos = torch.arange(nq, device=q.device)[:, None] + nk - nq
            mask = torch.arange(nk, device=q.device)[None, :] <= pos
        o = torch.nn.functional.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask)
        if mask is not None:  # rows that see no key: 0, as fearless
            o = torch.where(mask.any(-1)[None, None, :, None], o, 0.0)
        out[b, :, :nq] = o[0]
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(
    "h,hk,lq,s,ql,kl",
    [
        (32, 32, 1024, 1024, [1024, 517, 1], [1024, 1000, 77]),
        (32, 8, 512, 2048, [512, 300, 64], [2048, 300, 1500]),
        (16, 2, 300, 257, [300, 129], [257, 33]),
    ],
)
def test_fmha_varlen_matches_torch(dtype, causal, h, hk, lq, s, ql, kl) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    b, d = len(ql), 128
    q = torch.randn(b, h, lq, d, device="cuda", dtype=dtype)
    k = torch.randn(b, hk, s, d, device="cuda", dtype=dtype)
    v = torch.randn(b, hk, s, d, device="cuda", dtype=dtype)
    qlt = torch.tensor(ql, dtype=torch.int32, device="cuda")
    klt = torch.tensor(kl, dtype=torch.int32, device="cuda")
    got = ops.fmha_varlen(q, k, v, None, causal, qlt, klt)
    assert got.is_cuda and got.shape == q.shape and got.dtype == dtype
    torch.testing.assert_close(
        got.float(), _varlen_ref(q, k, v, causal, ql, kl), atol=1e-2, rtol=1e-2
    )


@pytest.mark.parametrize("split", [None, 256])
@pytest.mark.parametrize("group", [1, 4, 8])
@pytest.mark.parametrize("s", [9, 119, 256, 8192])
def test_fmha_decode_matches_torch(s: int, group: int, split: object) -> None:
    torch.manual_seed(42)
    q = torch.randn(2, 32, 1, 64, device="cuda").half()
    k = torch.randn(2, 32 // group, s, 64, device="cuda").half()
    v = torch.randn(2, 32 // group, s, 64, device="cuda").half()
    scale = 1.0 / math.sqrt(64)
    got = ops.fmha_decode(q, k, v, scale, split)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)
    torch.testing.assert_close(got, want, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype", ["float8_e5m2", "float8_e4m3fn"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("h,hk,lq,s", [(32, 32, 1024, 1024), (32, 8, 300, 1000)])
def test_fmha_in_fp8(dtype: str, causal: bool, h: int, hk: int, lq: int, s: int) -> None:
    torch.manual_seed(3)
    kind = getattr(torch, dtype)
    q = torch.randn(2, h, lq, 128, device="cuda").half().to(kind)
    k = torch.randn(2, hk, s, 128, device="cuda").half().to(kind)
    v = torch.randn(2, hk, s, 128, device="cuda").half().to(kind)
    got = ops.fmha(q, k, v, scaling=1 / math.sqrt(128), is_causal=causal)
    assert got.is_cuda and got.shape == q.shape and got.dtype == kind
    qf, kf, vf = q.float(), k.float(), v.float()
    want = _varlen_ref(qf, kf, vf, causal, [lq, lq], [s, s])
    # TileGym's (and FlashAttention-3's) fp8 attention rounds P to fp8 for the second product
    # and the output to fp8: each P is off by up to half a unit in its last place, r = 2^-(m+1)
    # of it (m mantissa bits: e5m2 2, e4m3 3), which moves the output by up to r * (P @ |v|)
    # (large in the first causal rows, whose P are few and large), and the output's own rounding
    # adds r * |o|; 0.02 covers the f32 sums (TileGym's own test takes atol 3 for e5m2)
    r = 2.0 ** -(3 if dtype == "float8_e5m2" else 4)
    spread = _varlen_ref(qf, kf, vf.abs(), causal, [lq, lq], [s, s])
    bound = r * (spread + want.abs()) + 0.02
    assert bool(((got.float() - want).abs() <= bound).all())
