"""`fearless.ops.persistent_layer_norm` on the GPU at TileGym's test shapes
(tests/ops/test_layer_norm_legacy.py::Test_PersistentLayerNorm: (256, 256), (1024, 1024),
(4096, 512), (30000, 1024) bf16, eps 1e-6) against its reference (torch's layer_norm, and the
rows' mean and biased-variance rstd) with its tolerances; and given mean and rstd."""

from __future__ import annotations

import pytest

from fearless import ops

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


@pytest.mark.parametrize("m,n", [(256, 256), (1024, 1024), (4096, 512), (30000, 1024)])
def test_matches_tilegyms_reference(m: int, n: int) -> None:
    x = torch.randn(m, n, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, dtype=torch.bfloat16, device="cuda")
    y, mean, rstd, _, _ = ops.persistent_layer_norm(x, (n,), w, b, 1e-6)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (n,), w, b, 1e-6),
                               atol=1e-2, rtol=1e-2)  # fmt: skip
    torch.testing.assert_close(mean, x.mean(-1).float(), atol=1e-2, rtol=1e-2)
    want_rstd = (1.0 / torch.sqrt(x.var(-1, unbiased=False) + 1e-6)).float()
    torch.testing.assert_close(rstd, want_rstd, atol=1e-2, rtol=1e-2)
    y2, m2, _, _, _ = ops.persistent_layer_norm(x, (n,), w, b, 1e-6, mean, rstd)
    assert m2 is mean
    torch.testing.assert_close(y2, y, atol=1e-2, rtol=1e-2)
