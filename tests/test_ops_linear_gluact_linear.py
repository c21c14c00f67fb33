"""`fearless.ops.linear_gluact_linear` (TileGym's fused GLU MLP): its semantics against the
float64 NumPy reference (tests/support/gluact_ref.py) on the simulator at small ragged shapes
(rows, in, out and final features not multiples of the tiles, leading axes), each act_type,
f32 / f16 / bf16; both kernel forms (fused, and gate-up then down) at small tiles, several
tiles on every axis; the call kinds (torch, NumPy, fl.Tensor); empty products; the torch
operator, its fake kernel and torch's opcheck; the refusals with their messages; the fused
kernel through tileiras.

The tuner is off here (FEARLESS_AUTOTUNE=0: the first configuration, the split form with
TileGym's tiles): timing every configuration per new shape on the simulator would cost seconds
per case, and both forms are run directly at small tiles."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_gluact import gluact_tuned, make_gluact_fused
from support.gluact_ref import gluact_inputs, gluact_reference

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 1.5e-2}
ACTS = ("silu", "relu", "gelu", "gelu-tanh")


@pytest.fixture(autouse=True)
def _first_configuration(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")
    yield


def _rel(got: Any, want: np.ndarray) -> float:
    if isinstance(got, torch.Tensor):
        got = got.double().numpy()
    got = np.asarray(got).astype(np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def _torch(arrays: tuple[np.ndarray, ...], dtype: str) -> list[Any]:
    return [torch.from_numpy(a).to(getattr(torch, dtype)) for a in arrays]


def _as_f64(tensors: list[Any]) -> list[np.ndarray]:
    """The tensors' values (after rounding to their dtype) as float64 arrays."""
    return [t.double().numpy() for t in tensors]


CASES = [  # lead (input's axes but in_features), K, I, N, act_type, dtype
    ((37,), 40, 72, 24, "silu", "float32"),  # one ragged row tile, two ragged I blocks
    ((2, 35), 72, 70, 80, "relu", "float32"),  # leading axes: 70 rows, two tiles; N of two
    ((3, 5), 24, 100, 40, "gelu", "bfloat16"),
    ((9,), 96, 33, 70, "gelu-tanh", "float16"),
    ((66,), 20, 50, 10, "silu", "bfloat16"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}-{c[4]}-{c[5]}")
def test_matches_the_float64_reference(case: tuple) -> None:
    lead, k, i, n, act, dtype = case
    x, wa, wn, w2 = _torch(gluact_inputs(lead, k, i, n, seed=k + i + n), dtype)
    want = gluact_reference(*_as_f64([x, wa, wn, w2]), act)
    got = ops.linear_gluact_linear(x, wa, wn, w2, act_type=act)
    assert isinstance(got, torch.Tensor) and got.dtype == x.dtype
    assert got.shape == (*lead, n)
    assert _rel(got, want) < TOL[dtype]


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "split"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_both_forms_at_small_tiles(fused: bool, dtype: str) -> None:
    """(16, 16) tiles of out, 16 intermediate columns and K steps of 16: every axis spans
    several tiles and ends in a partial one (M 37, K 40, I 50, N 45)."""
    dt = getattr(fl, dtype)
    np_dt = ml_dtypes.bfloat16 if dtype == "bf16" else np.float32
    x, wa, wn, w2 = gluact_inputs((37,), 40, 50, 45, seed=7, dtype=np_dt)
    out = fl.empty((37, 45), dtype=dt)
    fls = [fl.asarray(a) for a in (x, wa, wn, w2)]
    gluact_tuned.fn(
        "silu", *fls, out, lambda: fl.empty((37, 50), dtype=dt),
        shape=(16, 16), bi=16, bk=16, occupancy=None, fused=fused,
    )  # fmt: skip
    want = gluact_reference(*(a.astype(np.float64) for a in (x, wa, wn, w2)), "silu")
    assert _rel(out.numpy(), want) < TOL["float32" if dtype == "f32" else "bfloat16"]


def test_gelu_is_tanh_approximated_as_tilegyms() -> None:
    """TileGym's kernel maps 'gelu' and 'gelu-tanh' to one activation, the tanh form."""
    x, wa, wn, w2 = _torch(gluact_inputs((8,), 16, 24, 8, seed=1), "bfloat16")
    gelu = ops.linear_gluact_linear(x, wa, wn, w2, act_type="gelu")
    assert torch.equal(gelu, ops.linear_gluact_linear(x, wa, wn, w2, "gelu-tanh"))


def test_call_kinds() -> None:
    x, wa, wn, w2 = gluact_inputs((2, 6), 16, 24, 12, seed=3)
    want = gluact_reference(x, wa, wn, w2)
    got = ops.linear_gluact_linear(x, wa, wn, w2)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == (2, 6, 12)
    assert _rel(got, want) < TOL["float32"]
    fx, fa, fn, f2 = (fl.asarray(a) for a in (x, wa, wn, w2))
    got = ops.linear_gluact_linear(fx, fa, fn, f2, "silu")
    assert isinstance(got, fl.Tensor) and _rel(got.numpy(), want) < TOL["float32"]
    got = ops.linear_gluact_linear(x, wa, wn, w2, kernel_configs={"BLOCK_M": 64})  # ignored
    assert _rel(got, want) < TOL["float32"]


def test_empty_products() -> None:
    """No rows, no final features: empty results; no in or out features: zeros."""
    x, wa, wn, w2 = _torch(gluact_inputs((0,), 8, 16, 4), "float32")
    assert ops.linear_gluact_linear(x, wa, wn, w2).shape == (0, 4)
    x, wa, wn, w2 = _torch(gluact_inputs((3,), 8, 16, 0), "float32")
    assert ops.linear_gluact_linear(x, wa, wn, w2).shape == (3, 0)
    for k, i in ((0, 16), (8, 0)):
        x, wa, wn, w2 = _torch(gluact_inputs((3,), k, i, 5), "bfloat16")
        got = ops.linear_gluact_linear(x, wa, wn, w2)
        assert got.dtype == torch.bfloat16 and got.shape == (3, 5) and (got == 0).all()


def test_torch_operator_and_fake_kernel() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    args = _torch(gluact_inputs((4, 5), 24, 40, 16, seed=5), "float32")
    want = gluact_reference(*_as_f64(args), "relu")
    got = torch.ops.fearless.linear_gluact_linear(*args, "relu")
    assert got.dtype == torch.float32 and got.shape == (4, 5, 16)
    assert _rel(got, want) < TOL["float32"]
    with FakeTensorMode():
        fx = torch.empty(2, 7, 64, dtype=torch.bfloat16)
        fa = torch.empty(96, 64, dtype=torch.bfloat16)
        f2 = torch.empty(48, 96, dtype=torch.bfloat16)
        fake = torch.ops.fearless.linear_gluact_linear(fx, fa, fa, f2)
        assert fake.shape == (2, 7, 48) and fake.dtype == torch.bfloat16


def test_torch_library_opcheck() -> None:
    args = (*_torch(gluact_inputs((2, 3), 16, 24, 8, seed=2), "float32"), "silu")
    tests = ("test_schema", "test_autograd_registration", "test_faketensor")
    torch.library.opcheck(torch.ops.fearless.linear_gluact_linear.default, args, test_utils=tests)


def _refused(match: str, *args: Any, **kwargs: Any) -> fl.KernelTypeError:
    with pytest.raises(fl.KernelTypeError, match=match) as e:
        ops.linear_gluact_linear(*args, **kwargs)
    assert e.value.code == "E0701"
    return e.value


def test_refusals_are_fearless_errors() -> None:
    x, wa, wn, w2 = _torch(gluact_inputs((6,), 16, 24, 8), "float32")
    err = _refused(r"`act_type` .* must be 'silu', 'relu', 'gelu' or 'gelu-tanh', got 'swish'",
                   x, wa, wn, w2, "swish")  # fmt: skip
    assert "act_type='silu'" in str(err)
    _refused("got None", x, wa, wn, w2, act_type=None)
    _refused("unexpected keyword `use_autotune`", x, wa, wn, w2, use_autotune=False)
    _refused(r"`weight_act` .* must be \(out_features, 16\) .*got \(24, 12\)", x, wa[:, :12],
             wn, w2)  # fmt: skip
    err = _refused(r"`weight_noact` .* weight_act's shape \(24, 16\), got \(20, 16\)", x, wa,
                   wn[:20], w2)  # fmt: skip
    assert "gate_proj, up_proj and down_proj" in str(err)
    _refused(r"`weight2` .* must be \(final_features, 24\) .*got \(24, 8\)", x, wa, wn, w2.T)
    _refused(r"takes input \(\*, in_features\)", x, wa[0], wn, w2)
    _refused(r"takes input \(\*, in_features\)", x, wa, wn, w2[None])
    err = _refused("one dtype, but `input` is f32 and `weight2` is bf16", x, wa, wn,
                   w2.bfloat16())  # fmt: skip
    assert "convert `weight2`" in str(err)
    _refused("takes f32, f16, bf16 tensors, but `input` is f64", x.double(), wa, wn, w2)
    _refused("but `weight_act` is i32", x, wa.int(), wn, w2)
    _refused("has no backward yet", x.requires_grad_(), wa, wn, w2)


def test_the_fused_kernel_compiles_through_tileiras(cubin: Callable[..., bytes]) -> None:
    m, k, i, n = 256, 512, 1024, 256
    x, w2 = fl.zeros((m, k), dtype=fl.bf16), fl.zeros((n, i), dtype=fl.bf16)
    wa, wn = fl.zeros((i, k), dtype=fl.bf16), fl.zeros((i, k), dtype=fl.bf16)
    with fl.empty((m, n), dtype=fl.bf16).partition((64, 128)) as out:
        assert cubin(make_gluact_fused("silu", fl.bf16), out, x, wa, wn, w2, 64, 64)
