"""TileGym's experimental mHC operators (DESIGN 2c): `fearless.ops.mhc_gemm_rms_scale`,
`mhc_apply_residual` and `mhc_sinkhorn` against the float64 NumPy references
(tests/support/mhc_ref.py) on the simulator at ragged shapes (K over several splits, M and N
over one tile, C over one tile, n of 2 to 5), f32 / f16 / bf16 with tf32 where TileGym takes it;
sinkhorn in place for every kind (a wider y's other columns kept); the torch operators (sinkhorn
a mutating op), FakeTensorMode, torch.compile and opcheck; refusals; tileiras compiles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops import kernels_mhc as K
from support.mhc_ref import (
    apply_residual_reference,
    gemm_rms_scale_reference,
    sinkhorn_reference,
)

torch = pytest.importorskip("torch")

TOL = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.5e-2}
ALPHAS = (0.8, 1.1, 0.9)  # TileGym's test's


def _randn(gen: Any, *shape: int, dtype: str = "float32") -> Any:
    return torch.randn(*shape, generator=gen).to(getattr(torch, dtype))


def _err(got: Any, want: np.ndarray) -> float:
    g = got.double().numpy() if isinstance(got, torch.Tensor) else np.asarray(got, np.float64)
    return float(np.abs(g - want).max() / max(np.abs(want).max(), 1.0))


@pytest.mark.parametrize(
    ("m", "k", "n", "xdt", "wdt", "bdt"),
    [
        (5, 70, 3, "bfloat16", "float32", "float32"),  # TileGym's dtypes: tf32 product
        (70, 300, 5, "float16", "float16", "float16"),  # M and N over a tile, K several splits
        (3, 1000, 2, "float32", "float32", "bfloat16"),  # y in bias's dtype
    ],
)
def test_gemm_rms_scale_matches_the_reference(m, k, n, xdt, wdt, bdt) -> None:  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(m + k)
    nn = n * n + 2 * n
    x, w, bias = (
        _randn(gen, m, k, dtype=xdt),
        _randn(gen, k, nn, dtype=wdt),
        _randn(gen, nn, dtype=bdt),
    )
    y, r = ops.mhc_gemm_rms_scale(x, w, n, *ALPHAS, bias)
    assert y.shape == (m, nn) and y.dtype == bias.dtype
    assert r.shape == (m, 1) and r.dtype == torch.float32
    in_tf32 = "float32" in (xdt, wdt)  # the product's operands in tf32, as TileGym's
    want_y, want_r = gemm_rms_scale_reference(
        x.float().numpy(), w.float().numpy(), n, ALPHAS, bias.float().numpy(), in_tf32
    )
    assert _err(r, want_r) < 1e-5  # the squares in f32 from x as given
    assert (
        _err(y, want_y) < TOL[bdt if bdt != "float32" else xdt if xdt != "bfloat16" else "float32"]
    )


@pytest.mark.parametrize(
    ("b", "n", "c", "xdt", "ydt"),
    [
        (3, 3, 40, "float32", "float32"),
        (2, 4, 1100, "bfloat16", "float32"),  # C over one tile; TileGym's dtypes
        (2, 2, 24, "float16", "float16"),
    ],
)
def test_apply_residual_matches_the_reference(b, n, c, xdt, ydt) -> None:  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(b * n + c)
    x, f = _randn(gen, b, n * c, dtype=xdt), _randn(gen, b, c, dtype=xdt)
    y = _randn(gen, b, n * n + 2 * n, dtype=ydt)
    out = ops.mhc_apply_residual(x, f, y, n)
    assert out.shape == x.shape and out.dtype == x.dtype
    want = apply_residual_reference(x.float().numpy(), f.float().numpy(), y.float().numpy(), n)
    assert _err(out, want) < TOL[xdt]
    got = ops.mhc_apply_residual(x.numpy() if xdt != "bfloat16" else x.float().numpy(),
                                 f.float().numpy(), y.float().numpy(), n)  # fmt: skip
    assert isinstance(got, np.ndarray) and _err(got, want) < TOL[xdt]


@pytest.mark.parametrize(
    ("m", "n", "extra", "dtype"),
    [(5, 3, 0, "float32"), (3, 4, 9, "bfloat16"), (2, 5, 0, "float16")],
)
def test_sinkhorn_in_place_matches_the_reference(m, n, extra, dtype) -> None:  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(m * n)
    # spread 3: far from converged, so 19 or 21 rounds would differ from 20 by ~3e-4
    y = (_randn(gen, m, n * n + 2 * n + extra) * 3).to(getattr(torch, dtype))
    want = sinkhorn_reference(y.float().numpy(), n)
    before = y.clone()
    assert ops.mhc_sinkhorn(y, n) is y
    assert _err(y, want) < TOL[dtype]
    keep = np.r_[0 : 2 * n, 2 * n + n * n : y.shape[1]]  # every other column untouched
    assert torch.equal(y[:, keep], before[:, keep])
    mat = y[:, 2 * n : 2 * n + n * n].double().reshape(m, n, n)
    np.testing.assert_allclose(mat.sum(1).numpy(), 1.0, atol=TOL[dtype] * 4)  # doubly stochastic


def test_sinkhorn_in_place_for_every_kind() -> None:
    gen = torch.Generator().manual_seed(3)
    y = _randn(gen, 4, 15)
    want = sinkhorn_reference(y.numpy(), 3)
    y_np = y.numpy().copy()
    assert ops.mhc_sinkhorn(y_np, 3) is y_np
    np.testing.assert_allclose(y_np, want, rtol=1e-5, atol=1e-6)
    y_fl = fl.asarray(y.numpy().copy())
    assert ops.mhc_sinkhorn(y_fl, 3) is y_fl
    np.testing.assert_allclose(y_fl.numpy(), want, rtol=1e-5, atol=1e-6)
    base = y.t().contiguous()  # y a transposed view: written through the copy
    assert ops.mhc_sinkhorn(base.t(), 3) is not None
    np.testing.assert_allclose(base.t().numpy(), want, rtol=1e-5, atol=1e-6)


def test_torch_operators_fake_and_compile() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    gen = torch.Generator().manual_seed(5)
    n, c = 2, 16
    x, w, bias = _randn(gen, 4, n * c), _randn(gen, n * c, 8), _randn(gen, 8)
    f = _randn(gen, 4, c)
    y, r = torch.ops.fearless.mhc_gemm_rms_scale(x, w, n, *ALPHAS, bias)
    want_y, _ = gemm_rms_scale_reference(x.numpy(), w.numpy(), n, ALPHAS, bias.numpy(), True)
    assert _err(y, want_y) < 1e-5 and r.shape == (4, 1)
    assert torch.ops.fearless.mhc_sinkhorn(y, n) is None
    out = torch.ops.fearless.mhc_apply_residual(x, f, y, n)
    assert _err(out, apply_residual_reference(x.numpy(), f.numpy(), y.numpy(), n)) < 1e-5
    with FakeTensorMode():
        fx, fw, fb = torch.empty(4, 32), torch.empty(32, 8), torch.empty(8, dtype=torch.bfloat16)
        fy, fr = torch.ops.fearless.mhc_gemm_rms_scale(fx, fw, n, *ALPHAS, fb)
        assert fy.shape == (4, 8) and fy.dtype == torch.bfloat16 and fr.dtype == torch.float32
        assert torch.ops.fearless.mhc_apply_residual(fx, torch.empty(4, 16), fy, n).shape == (4, 32)

    def layer(x, w, bias, f):  # type: ignore[no-untyped-def]
        y, _ = ops.mhc_gemm_rms_scale(x, w, n, *ALPHAS, bias)
        ops.mhc_sinkhorn(y, n)
        return ops.mhc_apply_residual(x, f, y, n) * 2

    got = torch.compile(layer, fullgraph=True, backend="aot_eager")(x, w, bias, f)
    ys, _ = ops.mhc_gemm_rms_scale(x, w, n, *ALPHAS, bias)
    want = apply_residual_reference(x.numpy(), f.numpy(), sinkhorn_reference(ys.numpy(), n), n)
    assert _err(got / 2, want) < 1e-5


def test_torch_library_opcheck() -> None:
    gen = torch.Generator().manual_seed(1)
    x, w, bias = _randn(gen, 3, 40), _randn(gen, 40, 8), _randn(gen, 8)
    torch.library.opcheck(torch.ops.fearless.mhc_gemm_rms_scale.default, (x, w, 2, *ALPHAS, bias))
    y = _randn(gen, 3, 8)
    torch.library.opcheck(
        torch.ops.fearless.mhc_apply_residual.default, (x, _randn(gen, 3, 20), y, 2)
    )
    torch.library.opcheck(torch.ops.fearless.mhc_sinkhorn.default, (y, 2))


def _refused(fn: Callable[..., Any], match: str, *args: Any) -> Any:
    with pytest.raises(fl.KernelTypeError, match=match) as e:
        fn(*args)
    assert e.value.code == "E0701"
    return e.value


def test_refusals_are_fearless_errors() -> None:
    x, w, bias = torch.randn(3, 40), torch.randn(40, 8), torch.randn(8)
    g = ops.mhc_gemm_rms_scale
    _refused(g, r"x \(M, K\), w \(K, N\) and bias \(N,\), got shapes \(3, 40\), \(39, 8\), \(8,\)",
             x, w[:39], 2, *ALPHAS, bias)  # fmt: skip
    _refused(g, r"got shapes \(3, 40\), \(40, 8\), \(7,\)", x, w, 2, *ALPHAS, bias[:7])
    assert _refused(g, "needs N >= 2n columns", x, w, 5, *ALPHAS, bias).help
    _refused(g, "no columns", x[:, :0], w[:0], 2, *ALPHAS, bias)
    _refused(g, "`n` .* must be an int", x, w, 2.0, *ALPHAS, bias)
    _refused(g, "`n` .* must be 1 or more", x, w, 0, *ALPHAS, bias)
    _refused(g, "`alpha_post` .* must be a number", x, w, 2, 0.8, "1", 0.9, bias)
    _refused(g, "takes f32, f16, bf16 tensors, but `w` is f64", x, w.double(), 2, *ALPHAS, bias)
    r = ops.mhc_apply_residual
    y = torch.randn(3, 8)
    _refused(
        r, r"with n = 2, got shapes \(3, 40\), \(3, 21\), \(3, 8\)", x, torch.randn(3, 21), y, 2
    )
    _refused(r, r"got shapes \(3, 40\), \(3, 20\), \(3, 7\)", x, torch.randn(3, 20), y[:, :7], 2)
    _refused(ops.mhc_sinkhorn, r"\(M, n\*n \+ 2\*n\) or wider, 8 columns for n = 2, got shape \(3, 7\)",
             y[:, :7].contiguous(), 2)  # fmt: skip
    for fn, args in (
        (g, (x.requires_grad_(), w, 2, *ALPHAS, bias)),
        (r, (x, torch.randn(3, 20), y, 2)),
        (ops.mhc_sinkhorn, (y.requires_grad_(), 2)),
    ):
        _refused(fn, "no backward", *args)


def test_a_y_sinkhorn_cannot_write_is_refused_before_the_kernel(monkeypatch: Any) -> None:
    """A read-only NumPy y (`np.broadcast_to`'s view, which the kernel would write a copy of)
    and a torch y with a broadcast dimension are refused at the call, before any launch."""

    def no_launch(*_: Any) -> None:
        raise AssertionError("the kernel ran before the refusal")

    from fearless.ops import mhc

    monkeypatch.setattr(mhc, "mhc_sinkhorn_tuned", no_launch)
    row = np.zeros((1, 8), np.float32)
    e = _refused(ops.mhc_sinkhorn, "`y` .* is a read-only NumPy array, but `mhc_sinkhorn` writes",
                 np.broadcast_to(row, (4, 8)), 2)  # fmt: skip
    assert __file__ in str(e) and "y.copy()" in (e.help or "")
    e = _refused(ops.mhc_sinkhorn, "`y` .* has a broadcast dimension",
                 torch.zeros(1, 8).expand(4, 8), 2)  # fmt: skip
    assert __file__ in str(e)
    # elements that share memory: each place would keep whichever row's result came last
    # (tests/test_ops_layout_mutations.py; both ran and wrote a wrong y)
    stride_0 = np.lib.stride_tricks.as_strided(np.ones(8, np.float32), (4, 8), (0, 4))
    e = _refused(ops.mhc_sinkhorn, "`y` .* has elements that share memory .* writes it in place",
                 stride_0, 2)  # fmt: skip
    assert __file__ in str(e) and "y.copy()" in (e.help or "")
    e = _refused(ops.mhc_sinkhorn, "`y` .* has elements that share memory",
                 torch.ones(20).as_strided((4, 8), (4, 1)), 2)  # fmt: skip
    assert "y.clone()" in (e.help or "")


def test_the_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    x, w, bias = fl.zeros((128, 1024), dtype=fl.bf16), fl.zeros((1024, 24)), fl.zeros(24)
    y_acc, r_acc = fl.empty((4, 128, 24)), fl.empty((4, 128, 1))
    with y_acc.partition((1, 64, 32)) as yp, r_acc.partition((1, 64, 1)) as rp:
        assert cubin(K.make_mhc_gemm_rms(fl.bf16, fl.f32), yp, rp, x, w, 2, 128)
    with (
        fl.empty((128, 24)).partition((64, 32)) as yp,
        fl.empty((128, 1)).partition((64, 1)) as rp,
    ):
        assert cubin(
            K.make_mhc_finalize(fl.f32), yp, rp, y_acc, r_acc, bias, 4, 1024, 0.8, 1.1, 0.9
        )
    xr, f, yc = (
        fl.zeros((64, 4, 1024), dtype=fl.bf16),
        fl.zeros((64, 1024), dtype=fl.bf16),
        fl.zeros((64, 24)),
    )
    with fl.empty((64, 4, 1024), dtype=fl.bf16).partition((1, 4, 1024)) as part:
        assert cubin(K.make_mhc_apply_residual(fl.bf16, fl.bf16, fl.f32), part, xr, f, yc)
    z = fl.empty((64, 4, 4))
    with z.partition((1, 4, 4)) as zp:
        assert cubin(K.make_mhc_sinkhorn(fl.f32), zp, yc, 4, 20)
    with fl.empty((64, 24)).partition((1, 32)) as yp:
        assert cubin(K.make_mhc_merge(fl.f32), yp, z, 4)
