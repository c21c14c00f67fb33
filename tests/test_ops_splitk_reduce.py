"""`fearless.ops.splitk_reduce` (DESIGN 2c, TileGym's merge of split-KV decode partials):
against the float64 NumPy reference (tests/support/splitk_ref.py) on the simulator at ragged
shapes (D not a power of two and over one tile, split counts of 1, 3, 19 and 40: several
steps of the online loop), f32 / f16 / bf16 partials, lse in f32 or bf16, an output dtype other
than the partials'; in place (attn_out is written and returned, for torch, NumPy and fl.Tensor,
and for a non-contiguous torch attn_out); empty splits (-inf) and heads with no key; the torch
operator (a mutating op), FakeTensorMode and torch.compile; refusals; tileiras compiles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_attention_splitk import make_splitk_reduce
from support.splitk_ref import splitk_reduce_reference

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.5e-2}


def _inputs(b, h, s, d, dtype, ldtype="float32", seed=0):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(seed + 7 * s + d)
    o = torch.randn(b, h, s, d, generator=gen).to(getattr(torch, dtype))
    lse = (torch.randn(b, h, s, generator=gen) * 2.0 + 5.0).to(getattr(torch, ldtype))
    return o, lse


def _rel(got: Any, want: np.ndarray) -> float:
    g = got.double().numpy() if isinstance(got, torch.Tensor) else np.asarray(got, np.float64)
    return float(np.abs(g - want).max() / np.abs(want).max())


@pytest.mark.parametrize(
    ("b", "h", "s", "d", "dtype", "ldtype", "odtype"),
    [
        (2, 3, 3, 40, "float32", "float32", "float32"),
        (1, 2, 19, 200, "float16", "float32", "float16"),  # D over one tile of 128
        (2, 2, 40, 24, "bfloat16", "bfloat16", "bfloat16"),  # 40 splits: several steps
        (1, 3, 1, 72, "float32", "float32", "bfloat16"),  # one split; f32 partials, bf16 out
    ],
)
def test_matches_the_float64_reference(b, h, s, d, dtype, ldtype, odtype) -> None:  # type: ignore[no-untyped-def]
    o, lse = _inputs(b, h, s, d, dtype, ldtype)
    out = torch.full((b, h, d), float("nan"), dtype=getattr(torch, odtype))
    got = ops.splitk_reduce(o, lse, out, s * 128)
    assert got is out and out.dtype == getattr(torch, odtype)
    want = splitk_reduce_reference(o.float().numpy(), lse.float().numpy())
    assert _rel(out, want) < TOL[odtype if odtype != "float32" else dtype]


def test_in_place_for_every_kind() -> None:
    o, lse = _inputs(2, 2, 5, 24, "float32")
    want = splitk_reduce_reference(o.numpy(), lse.numpy())
    out_np = np.zeros((2, 2, 24), np.float32)
    assert ops.splitk_reduce(o.numpy(), lse.numpy(), out_np, 5) is out_np
    np.testing.assert_allclose(out_np, want, rtol=1e-5, atol=1e-6)
    out_fl = fl.zeros((2, 2, 24))
    assert ops.splitk_reduce(fl.asarray(o.numpy()), fl.asarray(lse.numpy()), out_fl, 5) is out_fl
    np.testing.assert_allclose(out_fl.numpy(), want, rtol=1e-5, atol=1e-6)
    base = torch.zeros(2, 24, 2)  # attn_out a transposed view: written through the copy
    strided = base.transpose(1, 2)
    ops.splitk_reduce(o, lse, strided, 5)
    np.testing.assert_allclose(base.transpose(1, 2).numpy(), want, rtol=1e-5, atol=1e-6)


def test_empty_splits_weigh_nothing_and_no_key_gives_zero() -> None:
    """A split with lse -inf adds nothing (its partial output is ignored); a head whose every
    split is -inf gives 0 (TileGym: NaN)."""
    o, lse = _inputs(1, 3, 20, 16, "float32")
    lse[0, 0, 3:] = -float("inf")  # only splits 0..2 of head 0 hold keys
    lse[0, 1, :] = -float("inf")
    o[0, 0, 3:] = 1e4
    out = torch.empty(1, 3, 16)
    ops.splitk_reduce(o, lse, out, 0)
    want0 = splitk_reduce_reference(o[:, :1, :3].numpy(), lse[:, :1, :3].numpy())
    np.testing.assert_allclose(out[:, :1].numpy(), want0, rtol=1e-5, atol=1e-6)
    assert (out[0, 1] == 0).all()
    want2 = splitk_reduce_reference(o[:, 2:].numpy(), lse[:, 2:].numpy())
    np.testing.assert_allclose(out[:, 2:].numpy(), want2, rtol=1e-5, atol=1e-6)


def test_torch_operator_fake_and_compile() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    o, lse = _inputs(2, 4, 6, 32, "bfloat16")
    want = splitk_reduce_reference(o.float().numpy(), lse.numpy())
    out = torch.empty(2, 4, 32, dtype=torch.bfloat16)
    assert torch.ops.fearless.splitk_reduce(o, lse, out, 700) is None
    assert _rel(out, want) < TOL["bfloat16"]
    with FakeTensorMode():
        fo, fl_, fout = torch.empty(2, 4, 6, 32), torch.empty(2, 4, 6), torch.empty(2, 4, 32)
        assert torch.ops.fearless.splitk_reduce(fo, fl_, fout, 6) is None

    def decode_tail(o, lse):  # type: ignore[no-untyped-def]
        out = torch.empty(o.shape[0], o.shape[1], o.shape[3], dtype=o.dtype)
        return ops.splitk_reduce(o, lse, out, 768) * 2

    got = torch.compile(decode_tail, fullgraph=True, backend="aot_eager")(o, lse)
    assert _rel(got / 2, want) < TOL["bfloat16"]


def test_torch_library_opcheck() -> None:
    args = (torch.randn(2, 3, 5, 16), torch.randn(2, 3, 5) + 4, torch.empty(2, 3, 16), 80)
    torch.library.opcheck(torch.ops.fearless.splitk_reduce.default, args)


def _refused(match: str, *args: Any) -> Any:
    with pytest.raises(fl.KernelTypeError, match=match) as e:
        ops.splitk_reduce(*args)
    assert e.value.code == "E0701"
    return e.value


def test_refusals_are_fearless_errors() -> None:
    o, lse = _inputs(2, 3, 4, 16, "float16")
    out = torch.empty(2, 3, 16, dtype=torch.float16)
    _refused(r"attn_out \(B, H, D\), got shapes \(2, 3, 4, 16\), \(2, 3, 4\) and \(2, 3, 8\)",
             o, lse, out[..., :8], 4)  # fmt: skip
    _refused(r"got shapes .* \(2, 3, 3\)", o, lse[..., :3], out, 4)
    _refused(r"got attn_splitk_out of shape \(2, 3, 4\)", o[..., 0], lse, out, 4)
    err = _refused("one split or more", o[:, :, :0], lse[:, :, :0], out, 4)
    assert err.help
    _refused("`S_kv` .* must be an int", o, lse, out, 4.0)
    _refused("`S_kv` .* must be 0 or more", o, lse, out, -1)
    _refused("takes f32, f16, bf16 tensors, but `lse_splitk_out` is f64", o, lse.double(), out, 4)
    _refused("requires grad", o.float().requires_grad_(), lse, out, 4)


def test_an_attn_out_it_cannot_write_is_refused_before_the_kernel(monkeypatch: Any) -> None:
    """A read-only NumPy attn_out (`np.broadcast_to`'s view: non-contiguous, so the kernel
    would write a copy and only the write-back would find out) and a torch attn_out with a
    broadcast dimension are refused at the call, before any launch."""
    from fearless.ops import attention_splitk

    monkeypatch.setattr(attention_splitk, "splitk_reduce_tuned", _no_launch)
    o, lse = _inputs(1, 2, 4, 16, "float32")
    frozen = np.zeros((1, 2, 16), np.float32)
    frozen.flags.writeable = False
    for out in (np.broadcast_to(np.zeros((1, 1, 16), np.float32), (1, 2, 16)), frozen):
        e = _refused("`attn_out` .* is a read-only NumPy array, but `splitk_reduce` writes it",
                     o.numpy(), lse.numpy(), out, 4)  # fmt: skip
        assert __file__ in str(e) and "copy()" in (e.help or "")
    e = _refused("`attn_out` .* has a broadcast dimension", o, lse,
                 torch.zeros(1, 1, 16).expand(1, 2, 16), 4)  # fmt: skip
    assert __file__ in str(e)
    # a writeable NumPy view of stride 0 (tests/test_ops_layout_mutations.py): it ran, and both
    # heads held the last head's result
    stride_0 = np.lib.stride_tricks.as_strided(np.zeros(16, np.float32), (1, 2, 16), (0, 0, 4))
    e = _refused("`attn_out` .* has elements that share memory .* writes it in place",
                 o.numpy(), lse.numpy(), stride_0, 4)  # fmt: skip
    assert __file__ in str(e)


def _no_launch(*_: Any) -> None:
    raise AssertionError("the kernel ran before the refusal")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_the_kernel_compiles_through_tileiras(cubin: Callable[..., bytes], dtype: str) -> None:
    dt = getattr(fl, dtype)
    o, lse = fl.zeros((2, 16, 16, 512), dtype=dt), fl.zeros((2, 16, 16))
    with fl.empty((2, 16, 512), dtype=dt).partition((1, 1, 128)) as part:
        assert cubin(make_splitk_reduce(dt, fl.f32, dt), part, o, lse, 16)
