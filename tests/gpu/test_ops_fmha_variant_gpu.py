"""`fearless.ops.fmha_variant` on the GPU at TileGym-like shapes (B 2, 16 or 32 heads, GQA,
S 512 to 2048, D 64 and 128, f16 and bf16; both layouts; lengths, window, the three biases,
the random mask, dropout) against torch in f32 with explicit masks, with TileGym's tolerances;
dropout's reference takes Triton's `tl.rand` mask from tests/support/fmha_variant_ref.py."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from fearless.ops.attention_fmha_variant import fmha_variant

torch = pytest.importorskip("torch")
from support.fmha_variant_ref import triton_rand  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _reference(q, k, v, kw: dict[str, Any], layout: str):  # type: ignore[no-untyped-def]
    """fmha_variant in f32 torch on the GPU: masks built explicitly, 0 for padded rows and rows
    that see no key."""
    if layout == "nsbd":
        q, k, v = (x.permute(2, 0, 1, 3) for x in (q, k, v))
    q, k, v = (x.float() for x in (q, k, v))
    b, n, s_q, d = q.shape
    n_kv, s_kv = k.shape[1], k.shape[2]
    k, v = (x.repeat_interleave(n // n_kv, 1) for x in (k, v))
    dev = q.device
    ql = kw.get("q_lens")
    kl = kw.get("kv_lens")
    ql = torch.full((b,), s_q, device=dev) if ql is None else torch.as_tensor(ql, device=dev)
    kl = torch.full((b,), s_kv, device=dev) if kl is None else torch.as_tensor(kl, device=dev)
    i = torch.arange(s_q, device=dev)[None, None, :, None]
    j = torch.arange(s_kv, device=dev)[None, None, None, :]
    pos = i + (kl - ql)[:, None, None, None]
    seen = (j < kl[:, None, None, None]) & (i < ql[:, None, None, None])
    if kw.get("is_causal", True):
        seen = seen & (j <= pos)
    if kw.get("window_size", 0):
        seen = seen & ((j - pos).abs() <= kw["window_size"])
    s = q @ k.transpose(-1, -2) * kw.get("scaling", 1.0 / math.sqrt(d))
    bias_type = kw.get("bias_type")
    if bias_type in ("vector", "matrix"):
        s = s + kw["bias"].float()
    elif bias_type == "alibi":
        s = s - kw["bias"].float()[None, :, None, None] * (pos - j).abs()
    if kw.get("random_mask") is not None:
        seen = seen & ~kw["random_mask"].bool()
    s = s.masked_fill(~seen, -math.inf)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    if kw.get("dropout", 0.0):
        offs = np.arange(b * n * s_q * s_kv, dtype=np.int64).reshape(b, n, s_q, s_kv)
        kept = torch.from_numpy(triton_rand(kw["seed"], offs) > np.float32(kw["dropout"]))
        p = torch.where(kept.to(dev), p / (1.0 - kw["dropout"]), 0.0)
    out = p @ v
    return out.permute(1, 2, 0, 3) if layout == "nsbd" else out


def _inputs(b, n, nk, s_q, s_kv, d, dtype, layout):  # type: ignore[no-untyped-def]
    def make(heads: int, s: int) -> Any:
        shape = (heads, s, b, d) if layout == "nsbd" else (b, heads, s, d)
        return torch.randn(*shape, device="cuda", dtype=dtype)

    return make(n, s_q), make(nk, s_kv), make(nk, s_kv)


CASES = [  # ((B, N, N_kv, S_q, S_kv, D), layout, kwargs)
    ((2, 32, 32, 1024, 1024, 128), "bnsd", {}),
    ((2, 32, 8, 512, 2048, 128), "bnsd", {"is_causal": False}),
    ((2, 16, 4, 1024, 1024, 64), "nsbd", {"q_lens": [1024, 517], "kv_lens": [1024, 900]}),
    ((2, 16, 16, 1024, 1024, 128), "bnsd", {"window_size": 128}),
    ((2, 16, 16, 1024, 1024, 64), "nsbd", {"window_size": 64, "is_causal": False}),
    ((2, 16, 16, 1024, 1024, 128), "bnsd", {"bias_type": "vector"}),
    ((2, 16, 16, 1024, 1024, 128), "bnsd", {"bias_type": "matrix"}),
    ((2, 16, 16, 1024, 1024, 128), "nsbd", {"bias_type": "alibi", "kv_lens": [1024, 700]}),
    ((2, 16, 16, 1024, 1024, 128), "bnsd", {"random_mask": True}),
    ((2, 8, 8, 512, 512, 64), "bnsd", {"dropout": 0.2, "seed": 1234}),
    ((2, 8, 2, 512, 512, 128), "nsbd", {"dropout": 0.1, "seed": 7, "bias_type": "alibi"}),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[1]}-{sorted(c[2])}-{c[0][3]}")
def test_fmha_variant_matches_torch(case: tuple, dtype: Any) -> None:
    torch.manual_seed(0)
    (b, n, nk, s_q, s_kv, d), layout, spec = case
    q, k, v = _inputs(b, n, nk, s_q, s_kv, d, dtype, layout)
    kw = dict(spec)
    if kw.get("bias_type") == "vector":
        kw["bias"] = torch.randn(b, n, 1, s_kv, device="cuda", dtype=dtype)
    elif kw.get("bias_type") == "matrix":
        kw["bias"] = torch.randn(b, n, s_q, s_kv, device="cuda", dtype=dtype)
    elif kw.get("bias_type") == "alibi":
        kw["bias"] = torch.tensor([2.0 ** -(8 * (h + 1) / n) for h in range(n)], device="cuda")
    if kw.get("random_mask"):
        kw["random_mask"] = torch.rand(b, n, s_q, s_kv, device="cuda") < 0.2
    for name in ("q_lens", "kv_lens"):
        if name in kw:
            kw[name] = torch.tensor(kw[name], dtype=torch.int32, device="cuda")
    got = fmha_variant(q, k, v, layout=layout, **kw)
    assert got.is_cuda and got.shape == q.shape and got.dtype == dtype
    want = _reference(q, k, v, kw, layout)
    torch.testing.assert_close(got.float(), want, atol=1e-2, rtol=1e-2)
