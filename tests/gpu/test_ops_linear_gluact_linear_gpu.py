"""`fearless.ops.linear_gluact_linear` on the GPU: at Olmo3-like MLP shapes (TileGym's caller,
FusedOlmo3MLP: hidden 1024 / 2048, intermediate 2816 / 5504, bf16, SwiGLU) against the torch
reference (the same bf16 values, products in f32); at ragged shapes (rows, in, out and final
features not multiples of any tile) for each act_type and dtype against the float64 NumPy
reference (tests/support/gluact_ref.py); and every configuration of the tuner's space (both
kernel forms, every tile shape) run directly, so that each compiles and agrees."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_gluact import GLUACT_CONFIGS, gluact_tuned
from support.gluact_ref import gluact_inputs, gluact_reference

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

TOL = {torch.float32: 1e-4, torch.float16: 3e-3, torch.bfloat16: 1.5e-2}


def _rel(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want))


@pytest.mark.parametrize("lead,hidden,inter", [((2, 128), 1024, 2816), ((4, 256), 2048, 5504)])
def test_matches_the_torch_reference_at_olmo3_shapes(
    lead: tuple[int, ...], hidden: int, inter: int
) -> None:
    torch.manual_seed(0)
    dt = torch.bfloat16
    x = torch.randn(*lead, hidden, device="cuda", dtype=dt)
    wa = torch.randn(inter, hidden, device="cuda", dtype=dt) / hidden**0.5
    wn = torch.randn(inter, hidden, device="cuda", dtype=dt) / hidden**0.5
    w2 = torch.randn(hidden, inter, device="cuda", dtype=dt) / inter**0.5
    got = ops.linear_gluact_linear(x, wa, wn, w2, act_type="silu")
    assert got.is_cuda and got.dtype == dt and got.shape == (*lead, hidden)
    xf = x.float()
    want = (torch.nn.functional.silu(xf @ wa.float().T) * (xf @ wn.float().T)) @ w2.float().T
    diff = (got.float() - want).norm() / want.norm()
    assert diff < 1e-2


@pytest.mark.parametrize("act", ["silu", "relu", "gelu", "gelu-tanh"])
@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16])
def test_matches_the_float64_reference_at_ragged_shapes(act: str, dt: Any) -> None:
    lead, k, i, n = (3, 83), 1000, 1376, 517
    arrays = gluact_inputs(lead, k, i, n, seed=11)
    x, wa, wn, w2 = (torch.from_numpy(a).to(dt).cuda() for a in arrays)
    got = ops.linear_gluact_linear(x, wa, wn, w2, act)
    assert got.dtype == dt and got.shape == (*lead, n)
    want = gluact_reference(*(t.double().cpu().numpy() for t in (x, wa, wn, w2)), act)
    assert _rel(got.double().cpu().numpy(), want) < TOL[dt]


@pytest.mark.parametrize("index", range(len(GLUACT_CONFIGS)))
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_every_configuration_runs_and_agrees(index: int, dtype: str) -> None:
    cfg = GLUACT_CONFIGS[index]
    dt = getattr(fl, dtype)
    np_dt = ml_dtypes.bfloat16 if dtype == "bf16" else np.float16
    m, k, i, n = 300, 520, 700, 260
    arrays = gluact_inputs((m,), k, i, n, seed=index, dtype=np_dt)
    out = fl.empty((m, n), dtype=dt)
    gluact_tuned.fn(
        "silu", *(fl.asarray(a) for a in arrays), out, lambda: fl.empty((m, i), dtype=dt), **cfg
    )
    want = gluact_reference(*(a.astype(np.float64) for a in arrays), "silu")
    assert _rel(out.numpy(), want) < TOL[torch.bfloat16 if dtype == "bf16" else torch.float16]
