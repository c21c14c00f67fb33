"""`fearless.ops.group_gemm` on the GPU: 4 groups a persistent launch
(ops/kernels_group_gemm.py, tuple parameters), at TileGym's test shapes
(tests/ops/test_group_gemm.py: f16 torch.rand, the reference in f32 cast back; B (N, K)
transposed by `.t()`) and ragged ones, tuned, against torch; and the simulator's result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fearless import ops
from fearless.ops import functional as F

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


@pytest.mark.parametrize(
    "shapes",
    [
        [(256, 128, 128)] * 4,
        [(256, 1024, 128), (256, 512, 128), (256, 256, 128), (256, 128, 128)],
        [(1000, 333, 70), (17, 64, 1024), (4096, 512, 256), (1, 128, 8)],
        [(1024, 1024, 1024)] * 16,
    ],
    ids=["square", "k_varies", "ragged", "sixteen"],
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("trans_b", [False, True])
def test_group_launches_match_torch(
    shapes: list[tuple[int, int, int]],
    dtype: torch.dtype,
    trans_b: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    launches: list[int] = []
    real = F.group_gemm_tuned
    monkeypatch.setattr(F, "group_gemm_tuned", lambda *a, **k: (launches.append(1), real(*a, **k)))
    g = torch.Generator(device="cuda").manual_seed(0)
    As = [torch.rand(m, k, device="cuda", generator=g, dtype=dtype) for m, k, _ in shapes]
    Bs = [
        torch.rand(n, k, device="cuda", generator=g, dtype=dtype).t()
        if trans_b
        else torch.rand(k, n, device="cuda", generator=g, dtype=dtype)
        for _, k, n in shapes
    ]
    got = ops.group_gemm(As, Bs)
    assert len(launches) == -(-len(shapes) // F.GROUPS_PER_LAUNCH)
    for c, a, b in zip(got, As, Bs, strict=True):
        want = (a.float() @ b.float()).to(dtype)
        torch.testing.assert_close(c, want, rtol=1e-2, atol=1e-2 * a.shape[1] ** 0.5)


def test_the_gpu_agrees_with_the_simulator(sim_and_gpu: Callable[..., Any]) -> None:
    rng = np.random.default_rng(3)
    shapes = [(100, 64, 48), (33, 32, 130), (256, 128, 64)]
    As = [rng.standard_normal((m, k)).astype(np.float16) for m, k, _ in shapes]
    Bs = [rng.standard_normal((k, n)).astype(np.float16) for _, k, n in shapes]

    def body() -> list[np.ndarray]:
        return [np.asarray(c, np.float32) for c in ops.group_gemm(As, Bs)]

    sim, gpu = sim_and_gpu(body)
    for s, d in zip(sim, gpu, strict=True):
        np.testing.assert_allclose(s, d, rtol=2e-3, atol=2e-2)
