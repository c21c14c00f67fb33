"""`fearless.ops.persistent_layer_norm` (DESIGN 2c, TileGym's persistent layer norm forward):
against the float64 NumPy reference (tests/support/layer_norm_ref.py) on the simulator at
ragged shapes (D not a power of two, more row tiles than blocks so that blocks walk several,
a last partial row tile), f32 / f16 / bf16, a 3-d input, weight and bias None or of another
dtype; the five values TileGym returns; given mean and rstd used instead of computed; the
kernel's persistent walk at a small host grid; NumPy and fl.Tensor inputs; the torch operator,
FakeTensorMode, torch.compile and opcheck; refusals; both kernel forms through tileiras."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_persistent_norm import make_persistent_layer_norm
from support.layer_norm_ref import layer_norm_reference

torch = pytest.importorskip("torch")

TOL = {"float32": 2e-5, "float16": 4e-3, "bfloat16": 3e-2}


def _data(shape, dtype, seed=0):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(seed + sum(shape))
    d = shape[-1]
    x = (torch.randn(*shape, generator=gen) * 2 + 0.5).to(getattr(torch, dtype))
    w = torch.randn(d, generator=gen).to(getattr(torch, dtype))
    b = torch.randn(d, generator=gen).to(getattr(torch, dtype))
    return x, w, b


def _close(got: Any, want: np.ndarray, tol: float) -> None:
    g = got.double().numpy() if isinstance(got, torch.Tensor) else np.asarray(got, np.float64)
    np.testing.assert_allclose(g, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((37, 50), "float32"), ((45, 200), "float16"), ((3, 7, 96), "bfloat16"), ((1, 24), "float32")],
)
def test_matches_the_float64_reference(shape: tuple[int, ...], dtype: str) -> None:
    x, w, b = _data(shape, dtype)
    y, mean, rstd, bd, nw = ops.persistent_layer_norm(x, (shape[-1],), w, b, 1e-6)
    assert y.shape == x.shape and y.dtype == x.dtype
    rows = x.numel() // shape[-1]
    assert mean.shape == rstd.shape == (rows,) and mean.dtype == rstd.dtype == torch.float32
    assert bd == 1 << (shape[-1] - 1).bit_length() and nw == 8
    want, m, r = layer_norm_reference(*(t.float().numpy() for t in (x, w, b)), 1e-6)
    _close(y, want, TOL[dtype])
    _close(mean, m, 1e-5)
    _close(rstd, r, 1e-4)


def test_weight_and_bias_none_or_of_another_dtype() -> None:
    x, w, b = _data((20, 40), "float32")
    y, *_ = ops.persistent_layer_norm(x, 40, None, None, 1e-5)
    _close(y, layer_norm_reference(x.numpy(), None, None, 1e-5)[0], 2e-5)
    y, *_ = ops.persistent_layer_norm(x.half(), 40, w, b.bfloat16(), 1e-5)
    want = layer_norm_reference(x.half().float().numpy(), w.half().float().numpy(),
                                b.bfloat16().half().float().numpy(), 1e-5)[0]  # fmt: skip
    assert y.dtype == torch.float16
    _close(y, want, TOL["float16"])


def test_given_mean_and_rstd_are_used_not_computed() -> None:
    x, w, b = _data((33, 48), "float32")
    mean = torch.linspace(-1, 1, 33)
    rstd = torch.linspace(0.5, 2, 33)
    y, m, r, _, _ = ops.persistent_layer_norm(x, 48, w, b, 1e-5, mean, rstd)
    assert m is mean and r is rstd
    want = layer_norm_reference(x.numpy(), w.numpy(), b.numpy(), 1e-5, mean.numpy(), rstd.numpy())
    _close(y, want[0], 2e-5)


@pytest.mark.parametrize("shape", [(5, 0), (2, 3, 0)])
def test_rows_of_no_columns_have_one_statistic_each(shape: tuple[int, ...]) -> None:
    """D = 0: no kernel runs, and each row still gets its mean and rstd, torch's
    native_layer_norm's 0 and NaN (they were once of shape (0,)); given ones of (rows,) are
    taken."""
    rows = int(np.prod(shape[:-1]))
    for x in (torch.zeros(shape), np.zeros(shape, np.float32)):
        y, mean, rstd, *_ = ops.persistent_layer_norm(x, 0, None, None, 1e-5)
        assert tuple(y.shape) == shape and tuple(mean.shape) == tuple(rstd.shape) == (rows,)
        assert (np.asarray(mean) == 0).all() and np.isnan(np.asarray(rstd)).all()
    given = torch.zeros(rows), torch.ones(rows)
    y, mean, rstd, *_ = ops.persistent_layer_norm(torch.zeros(shape), 0, None, None, 1e-5, *given)
    assert mean is given[0] and rstd is given[1]


def test_blocks_walk_their_row_tiles_at_a_small_grid() -> None:
    """Launched on 3 blocks over 10 tiles of 4 rows (the last partial): each block walks tiles
    b, b + 3, ...; every row written once, with its mean and rstd."""
    x, w, b = (fl.asarray(t.numpy()) for t in _data((38, 20), "float32"))
    y, mean, rstd = fl.empty((38, 20)), fl.full((38,), np.nan), fl.full((38,), np.nan)
    with y.partition((4, 32)) as part:
        make_persistent_layer_norm(fl.f32, True).launch(3, part, mean, rstd, x, w, b, 1e-5)
    want, m, r = layer_norm_reference(x.numpy(), w.numpy(), b.numpy(), 1e-5)
    _close(y.numpy(), want, 2e-5)
    _close(mean.numpy(), m, 1e-5)
    _close(rstd.numpy(), r, 1e-5)


def test_numpy_and_fl_inputs() -> None:
    x, w, b = (t.numpy() for t in _data((9, 30), "float32"))
    y, mean, rstd, _, _ = ops.persistent_layer_norm(x, 30, w, b, 1e-5)
    assert all(isinstance(t, np.ndarray) for t in (y, mean, rstd))
    want = layer_norm_reference(x, w, b, 1e-5)
    _close(y, want[0], 2e-5)
    y, mean, _, _, _ = ops.persistent_layer_norm(fl.asarray(x), 30, fl.asarray(w), None, 1e-5)
    assert isinstance(y, fl.Tensor) and isinstance(mean, fl.Tensor)
    _close(mean.numpy(), want[1], 1e-5)


def test_torch_operator_fake_and_compile() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    x, w, b = _data((2, 5, 40), "bfloat16")
    want = layer_norm_reference(*(t.float().numpy() for t in (x, w, b)), 1e-6)
    y, m, r = torch.ops.fearless.persistent_layer_norm(x, w, b, 1e-6)
    _close(y, want[0], TOL["bfloat16"])
    _close(m, want[1], 1e-5)
    _close(r, want[2], 1e-4)
    with FakeTensorMode():
        fy, fm, fr_ = torch.ops.fearless.persistent_layer_norm(
            torch.empty(3, 4, 64, dtype=torch.float16), None, None, 1e-5
        )
        assert (
            fy.shape == (3, 4, 64) and fy.dtype == torch.float16 and fm.shape == fr_.shape == (12,)
        )
        given = torch.ops.fearless.persistent_layer_norm(
            torch.empty(12, 64), None, None, 1e-5, torch.empty(12), torch.empty(12)
        )
        assert given[1].shape == (0,)

    def norm(x, w, b):  # type: ignore[no-untyped-def]
        y, mean, rstd, _, _ = ops.persistent_layer_norm(x, (40,), w, b, 1e-6)
        return y.float() * 2, mean * rstd

    y2, m2 = torch.compile(norm, fullgraph=True, backend="aot_eager")(x, w, b)
    _close(y2 / 2, want[0], TOL["bfloat16"])
    _close(m2, want[1] * want[2], 1e-4)


def test_torch_library_opcheck() -> None:
    op = torch.ops.fearless.persistent_layer_norm.default
    x, w, b = _data((6, 40), "float32")
    torch.library.opcheck(op, (x, w, b, 1e-5))
    torch.library.opcheck(op, (x, None, b, 1e-5, torch.zeros(6), torch.ones(6)))


def _refused(match: str, *args: Any) -> Any:
    with pytest.raises(fl.KernelTypeError, match=match) as e:
        ops.persistent_layer_norm(*args)
    assert e.value.code == "E0701"
    return e.value


def test_refusals_are_fearless_errors() -> None:
    x, w, b = _data((6, 40), "float32")
    err = _refused("takes mean and rstd both or neither, got only mean", x, 40, w, b, 1e-5,
                   torch.zeros(6))  # fmt: skip
    assert "pass both" in str(err)
    _refused(r"`rstd` .* must have shape \(6,\), one value per row .* got \(5,\)", x, 40, w, b,
             1e-5, torch.zeros(6), torch.ones(5))  # fmt: skip
    _refused(r"`weight` .* has shape \(39,\)", x, 40, w[:39], b, 1e-5)
    _refused("`eps` .* must be a number", x, 40, w, b, "small")
    _refused("takes f32, f16, bf16 tensors, but `input` is f64", x.double(), 40, w, b, 1e-5)
    _refused("has no backward yet", x.requires_grad_(), 40, w, b, 1e-5)


@pytest.mark.parametrize(("dtype", "compute"), [("bf16", True), ("f16", False)])
def test_the_kernel_compiles_through_tileiras(
    cubin: Callable[..., bytes], dtype: str, compute: bool
) -> None:
    dt = getattr(fl, dtype)
    x, w, b = (
        fl.zeros((4096, 1000), dtype=dt),
        fl.zeros((1000,), dtype=dt),
        fl.zeros((1000,), dtype=dt),
    )
    mean, rstd = fl.zeros((4096,)), fl.zeros((4096,))
    with fl.empty((4096, 1000), dtype=dt).partition((8, 1024)) as part:
        args = (part, mean, rstd, x, w, b, 1e-6) if compute else (part, x, w, b, mean, rstd)
        assert cubin(make_persistent_layer_norm(dt, compute), *args)
