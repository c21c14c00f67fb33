"""`fearless.ops.fused_add_rms_norm` (Liger's and vLLM's fused residual add + RMS norm) on the
simulator: (y, s) against torch's unfused add then rms_norm in f32, f16 and bf16 at ragged
widths and leading shapes; NumPy and fl.Tensor inputs; gradients through torch autograd
against the unfused ops' (weight or none), torch.compile and torch's opcheck; the refusals; the
kernel through tileiras."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_rows import make_add_rms_norm

torch = pytest.importorskip("torch")

# y's bound: one step of the dtype's rounding near the outputs' size (the reference rounds once,
# from f32); s is the same add, so it is exact
TOL = {"float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}


def _unfused(x: Any, r: Any, w: Any, eps: float) -> tuple[Any, Any]:
    s = x + r
    y = torch.nn.functional.rms_norm(
        s.float(), (s.shape[-1],), None if w is None else w.float(), eps
    )
    return y, s


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(5, 96), (2, 3, 40), (1, 1000), (17, 8)])
def test_matches_the_unfused_add_and_norm(dtype: str, shape: tuple[int, ...]) -> None:
    g = torch.Generator().manual_seed(sum(shape))
    dt = getattr(torch, dtype)
    x, r = (torch.randn(*shape, generator=g).to(dt) for _ in range(2))
    w = torch.randn(shape[-1], generator=g).to(dt)
    y, s = ops.fused_add_rms_norm(x, r, w, 1e-6)
    y_ref, s_ref = _unfused(x, r, w, 1e-6)
    assert y.dtype == s.dtype == dt and y.shape == s.shape == x.shape
    assert torch.equal(s, s_ref)
    assert float((y.float() - y_ref).abs().max()) <= TOL[dtype] * max(1.0, float(y_ref.abs().max()))


def test_numpy_fl_tensors_default_weight_and_eps() -> None:
    rng = np.random.default_rng(0)
    x, r = (rng.standard_normal((6, 48)).astype(np.float32) for _ in range(2))
    y, s = ops.fused_add_rms_norm(x, r)
    assert isinstance(y, np.ndarray) and isinstance(s, np.ndarray)
    want, _ = _unfused(torch.from_numpy(x), torch.from_numpy(r), None, 2.0**-23)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(s, x + r)
    fy, fs = ops.fused_add_rms_norm(fl.asarray(x), fl.asarray(r), fl.ones(48), 1e-5)
    assert isinstance(fy, fl.Tensor) and isinstance(fs, fl.Tensor)
    np.testing.assert_array_equal(fs.numpy(), x + r)


@pytest.mark.parametrize("with_weight", [True, False])
def test_gradients_match_the_unfused_ops(with_weight: bool) -> None:
    """Both outputs carry gradient (the next sublayer reads y, the residual stream goes on
    with s): x and residual get rms_norm's backward on s plus s's own gradient."""
    g = torch.Generator().manual_seed(3)
    x, r = (torch.randn(4, 3, 64, generator=g, dtype=torch.float64).float() for _ in range(2))
    w = torch.randn(64, generator=g) if with_weight else None
    leaves = [t.clone().requires_grad_() for t in (x, r)] + (
        [w.clone().requires_grad_()] if w is not None else []
    )
    y, s = ops.fused_add_rms_norm(*leaves[:2], leaves[2] if w is not None else None, 1e-5)
    (y.square().sum() + (3 * s).sin().sum()).backward()
    ref = [t.clone().requires_grad_() for t in (x, r)] + (
        [w.clone().requires_grad_()] if w is not None else []
    )
    s_ref = ref[0] + ref[1]
    y_ref = torch.nn.functional.rms_norm(s_ref, (64,), ref[2] if w is not None else None, 1e-5)
    (y_ref.square().sum() + (3 * s_ref).sin().sum()).backward()
    for got, want in zip(leaves, ref, strict=True):
        assert got.grad is not None and want.grad is not None
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-5)


def test_torch_compile_and_opcheck() -> None:
    def block(x: Any, r: Any, w: Any) -> Any:
        y, s = ops.fused_add_rms_norm(x, r, w, 1e-6)
        return y.sum() + s.square().sum()

    g = torch.Generator().manual_seed(4)
    x, r, w = torch.randn(3, 32, generator=g), torch.randn(3, 32, generator=g), torch.randn(32)
    leaves = [t.clone().requires_grad_() for t in (x, r, w)]
    torch.compile(block, fullgraph=True, backend="aot_eager")(*leaves).backward()
    ref = [t.clone().requires_grad_() for t in (x, r, w)]
    s = ref[0] + ref[1]
    (torch.nn.functional.rms_norm(s, (32,), ref[2], 1e-6).sum() + s.square().sum()).backward()
    for got, want in zip(leaves, ref, strict=True):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-5)
    torch.library.opcheck(torch.ops.fearless.fused_add_rms_norm.default, (x, r, w, 1e-6))


def test_refusals_are_fearless_errors_python_can_catch() -> None:
    x = torch.randn(4, 16)
    cases = [
        ((x, torch.randn(4, 8)), "one shape and dtype"),
        ((x, x.half()), "one shape and dtype"),
        ((x, x, torch.randn(8)), "weight"),
        ((x.int(), x.int()), "takes f32, f16, bf16"),
        ((torch.tensor(1.0), torch.tensor(2.0)), "has none"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match) as e:
            ops.fused_add_rms_norm(*args)
        assert isinstance(e.value, fl.ArgumentError) and e.value.loc is not None
        assert e.value.loc.file == __file__


def test_the_kernel_compiles_through_tileiras(cubin: Callable[..., bytes]) -> None:
    """Llama-3-8B's hidden 4096 in bf16, four rows a block, TileGym's memory hints."""
    x = fl.zeros((300, 4096), dtype=fl.bf16)
    y, s = (fl.empty(x.shape, dtype=fl.bf16).partition((4, 4096)) for _ in range(2))
    kernel = make_add_rms_norm(fl.bf16, mem=True).options(occupancy=1)
    assert cubin(kernel, y, s, x, x, fl.ones(4096, dtype=fl.bf16), 1e-5)
