"""`fearless.ops.splitk_reduce` on the GPU at TileGym's test shapes
(tests/ops/test_splitk_reduce.py: batch 1 and 2, 16 and 32 heads, D 512, 1, 2, 8 and 16
splits, f16 and bf16, lse from normals * 2 + 5) against its torch reference restated, with its
tolerances; and 64 splits (its perf shapes)."""

from __future__ import annotations

import math

import pytest

from fearless import ops

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _reference(o, lse):  # type: ignore[no-untyped-def]
    o, lse = o.float(), lse.float()
    w = torch.exp2(lse - lse.max(-1, keepdim=True)[0]) / math.log(2)
    return (o * w.unsqueeze(-1)).sum(2) / w.sum(-1, keepdim=True)


@pytest.mark.parametrize("b", [1, 2])
@pytest.mark.parametrize("h", [16, 32])
@pytest.mark.parametrize("splits", [1, 2, 8, 16, 64])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_matches_tilegyms_reference(b: int, h: int, splits: int, dtype: torch.dtype) -> None:
    torch.manual_seed(42)
    o = torch.randn(b, h, splits, 512, device="cuda", dtype=dtype)
    lse = torch.randn(b, h, splits, device="cuda") * 2.0 + 5.0
    out = torch.empty(b, h, 512, device="cuda", dtype=dtype)
    assert ops.splitk_reduce(o, lse, out, splits * 128) is out
    want = _reference(o, lse).to(dtype)
    torch.testing.assert_close(out, want, atol=1e-2, rtol=1e-2)
