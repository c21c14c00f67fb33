"""`fearless.ops.gemma_attention_decode` on the GPU at TileGym's test shapes
(tests/ops/test_gemma_attention_decode.py: one query token, 8 query heads over 8 or 4 KV heads,
D 64, S 128 to 10024, windows 0 to 256, soft caps None to 50, f16 and bf16; tuned split and
pinned splits of 128 and 1024 keys) against the float64 reference of
tests/support/gemma_decode_ref.py, with TileGym's tolerances."""

from __future__ import annotations

import numpy as np
import pytest

from fearless import ops
from support.gemma_decode_ref import gemma_decode_reference

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

CASES = [  # (B, H, H_kv, S, D, window_size, soft_cap, dtype): TileGym's test_op
    (1, 8, 8, 128, 64, 0, None, "float16"),
    (1, 8, 8, 128, 64, 0, 10.0, "float16"),
    (1, 8, 8, 256, 64, 64, 10.0, "float16"),
    (1, 8, 4, 256, 64, 64, 10.0, "float16"),
    (1, 8, 8, 10024, 64, 0, None, "float16"),
    (1, 8, 8, 10019, 64, 256, 50.0, "bfloat16"),
]


@pytest.mark.parametrize("split", [None, 128, 1024])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_matches_the_reference(case: tuple, split: int | None) -> None:
    b, h, hk, s, d, w, cap, dtype = case
    torch.manual_seed(s)

    def data(*shape: int) -> object:
        return torch.empty(*shape, device="cuda").normal_(0.0, 0.5).to(getattr(torch, dtype))

    q, k, v = data(b, h, 1, d), data(b, hk, s, d), data(b, hk, s, d)
    got = ops.gemma_attention_decode(q, k, v, d**-0.5, w, cap, kv_len_per_split=split)
    assert got.is_cuda and got.shape == q.shape and got.dtype == q.dtype
    host = [x.double().cpu().numpy() for x in (q, k, v)]  # type: ignore[attr-defined]
    want = gemma_decode_reference(*host, d**-0.5, w, cap)
    np.testing.assert_allclose(got.double().cpu().numpy(), want, atol=1e-2, rtol=1e-2)
