"""`fearless.ops.fmha_variant` (TileGym's fmha_variant) on the simulator against a float64
NumPy reference (tests/support/fmha_variant_ref.py): both layouts, GQA, per-sequence lengths,
causal bottom-right per sequence, the window, the three biases, the random mask and Triton's
dropout mask (bit for bit, through a NumPy Philox checked against Random123's known answers);
small tiles, so that key tiles are skipped and masked; rows with no key; the refusals; the
kernel through tileiras."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless.ops.attention_fmha_variant import fmha_variant
from fearless.ops.kernels_attention_fmha_variant import fmha_variant_launch, make_fmha_variant

torch = pytest.importorskip("torch")
from support.fmha_variant_ref import fmha_variant_ref, philox4x32, triton_rand  # noqa: E402

TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def _qkv(b, n, nk, sq, skv, d, dtype, layout="bnsd", dv=None, seed=0):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed + sq * 1000 + skv)
    dt = getattr(torch, dtype)

    def make(n_, s, dd):  # type: ignore[no-untyped-def]
        shape = (n_, s, b, dd) if layout == "nsbd" else (b, n_, s, dd)
        return torch.randn(*shape, generator=g).to(dt)

    return make(n, sq, d), make(nk, skv, d), make(nk, skv, dv or d)


def _rel(got, want) -> float:  # type: ignore[no-untyped-def]
    want = np.asarray(want)
    return float(
        np.linalg.norm(got.double().numpy() - want) / max(float(np.linalg.norm(want)), 1e-30)
    )


def _extras(b, n, sq, skv, spec):  # type: ignore[no-untyped-def]
    """The case's keyword arguments, tensors drawn from `spec`'s names."""
    g = torch.Generator().manual_seed(7)
    kw = dict(spec)
    if kw.get("bias_type") == "vector":
        kw["bias"] = torch.randn(b, 1, 1, skv, generator=g)  # broadcast over heads, f32
    elif kw.get("bias_type") == "matrix":
        kw["bias"] = torch.randn(1, n, sq, skv, generator=g).to(
            getattr(torch, kw.pop("bias_dtype"))
        )
    elif kw.get("bias_type") == "alibi":
        kw["bias"] = torch.tensor([2.0 ** -(8 * (h + 1) / n) for h in range(n)])
    if "mask" in kw:
        dt = kw.pop("mask")
        m = torch.rand(b, n, sq, skv, generator=g) < 0.3
        kw["random_mask"] = m if dt == "bool" else m.to(torch.int8)
    return kw


CASES = [  # ((B, N, N_kv, S_q, S_kv, D), dtype, layout, kwargs)
    ((2, 4, 2, 37, 70, 16), "float32", "bnsd", {}),  # GQA, causal bottom-right
    ((2, 2, 2, 70, 37, 16), "bfloat16", "bnsd", {}),  # S_q > S_kv: rows with no key
    ((2, 2, 1, 33, 20, 64), "float16", "bnsd", {"is_causal": False, "scaling": 0.3}),
    ((2, 4, 2, 40, 50, 16), "float32", "nsbd", {"q_lens": [40, 17], "kv_lens": [50, 30]}),
    ((3, 2, 2, 30, 45, 16), "float16", "bnsd", {"q_lens": [30, 0, 9], "kv_lens": [45, 20, 0]}),
    ((1, 2, 2, 40, 60, 16), "float32", "bnsd", {"window_size": 3}),
    ((2, 2, 1, 45, 30, 16), "float32", "nsbd", {"window_size": 5, "is_causal": False}),
    ((2, 4, 2, 30, 40, 16), "float32", "bnsd", {"bias_type": "vector", "is_causal": False}),
    ((1, 2, 2, 30, 40, 16), "float16", "bnsd", {"bias_type": "matrix", "bias_dtype": "float16"}),
    ((2, 4, 4, 30, 50, 16), "float32", "nsbd", {"bias_type": "alibi", "kv_lens": [50, 31]}),
    ((2, 2, 2, 30, 40, 16), "float32", "bnsd", {"mask": "bool"}),
    ((1, 2, 1, 30, 40, 16), "bfloat16", "nsbd", {"mask": "int8", "is_causal": False}),
    ((2, 2, 1, 30, 40, 16), "float32", "bnsd", {"dropout": 0.3, "seed": 1234}),
    ((2, 2, 2, 20, 30, 16), "float32", "nsbd", {"dropout": 0.5, "seed": -5, "q_lens": [20, 7],
                                                "bias_type": "alibi", "window_size": 4}),
    ((1, 2, 2, 25, 25, 128), "float16", "bnsd", {"dropout": 0.1, "seed": 2**64 - 3}),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, (*c[0], c[1], c[2]))))
def test_matches_the_reference(case: tuple) -> None:
    (b, n, nk, sq, skv, d), dtype, layout, spec = case
    q, k, v = _qkv(b, n, nk, sq, skv, d, dtype, layout)
    kw = _extras(b, n, sq, skv, spec)
    got = fmha_variant(q, k, v, layout=layout, **kw)
    np_kw = {x: (y.float().numpy() if isinstance(y, torch.Tensor) else y) for x, y in kw.items()}
    want = fmha_variant_ref(q.float(), k.float(), v.float(), layout=layout, **np_kw)
    assert got.dtype == q.dtype and got.shape == q.shape
    assert torch.isfinite(got).all()
    assert _rel(got, want) < TOL[dtype]


def test_v_has_its_own_head_size() -> None:
    q, k, v = _qkv(2, 2, 1, 20, 30, 16, "float32", dv=40)
    got = fmha_variant(q, k, v, q_lens=[20, 11])
    assert got.shape == (2, 2, 20, 40)
    assert _rel(got, fmha_variant_ref(q, k, v, q_lens=[20, 11])) < 1e-5


SMALL = [  # (nsbd, causal, window, bias, mask, dropout): (16, 16) tiles, several key tiles
    (False, True, 0, None, None, False),
    (True, True, 5, "alibi", None, False),
    (False, False, 9, "matrix", "bool", False),
    (True, False, 0, "vector", "int8", True),
    (False, True, 20, None, None, True),
]


@pytest.mark.parametrize("spec", SMALL, ids=str)
def test_small_tiles(spec: tuple) -> None:
    """The kernel with (16, 16) tiles (the simulator's tuner takes the first, 128-row
    configuration): key tiles skipped on both sides of the window and masked at the lengths."""
    nsbd, causal, window, bias_type, mask, dropout = spec
    layout = "nsbd" if nsbd else "bnsd"
    b, n, nk, sq, skv, d = 2, 2, 1, 50, 70, 16
    q, k, v = _qkv(b, n, nk, sq, skv, d, "float32", layout)
    ql, kl = np.array([50, 21], np.int32), np.array([70, 40], np.int32)
    kw = _extras(b, n, sq, skv, {"bias_type": bias_type, "bias_dtype": "float32"}
                 if bias_type else {})  # fmt: skip
    if mask:
        kw.update(_extras(b, n, sq, skv, {"mask": mask}))
    p, seed = (0.25, 99) if dropout else (0.0, 0)
    bias = kw.get("bias")
    rmask = kw.get("random_mask")
    out = fl.empty(((n, sq, b, d) if nsbd else (b, n, sq, d)), dtype=fl.f32)
    bias_form = None
    if bias is not None:
        has_b, has_h = (False, False) if bias_type == "alibi" else (bias.shape[0] > 1,
                                                                     bias.shape[1] > 1)  # fmt: skip
        bias_form = (bias_type, fl.f32, has_b, has_h)
    mask_form = None
    if rmask is not None:
        mask_form = (fl.bool_ if rmask.dtype == torch.bool else fl.i8, True, True)
    flags = (nsbd, causal, window > 0, bias_form, mask_form, dropout)
    fq, fk, fv, fb, fm = (
        None if x is None else fl.asarray(x.numpy()) for x in (q, k, v, bias, rmask)
    )
    scalars = (d**-0.5, window, p, 1.0 - p, seed, 0, n // nk)
    lens = fl.asarray(ql), fl.asarray(kl)
    fmha_variant_launch(fq, fk, fv, fb, fm, *lens, out, scalars, flags, 16, 16)
    want = fmha_variant_ref(
        q, k, v, None, causal, ql, kl, bias_type, None if bias is None else bias.numpy(),
        p, seed, window, None if rmask is None else rmask.numpy(), layout,
    )  # fmt: skip
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_the_reference_philox_is_random123s() -> None:
    """Random123's known answers for Philox4x32-10 (kat_vectors), so that the reference's
    dropout mask is Triton's `tl.rand`."""
    u = lambda *xs: [np.array([x], np.uint32) for x in xs]  # noqa: E731
    kats = [
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        (
            (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
            (0xA4093822, 0x299F31D0),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
        ),
    ]
    for ctr, key, want in kats:
        got = philox4x32(u(*ctr), *key)
        assert [int(x[0]) for x in got] == list(want)
    r = triton_rand(3, np.arange(100_000))
    assert r.dtype == np.float32 and r.min() >= 0.0 and r.max() < 1.0
    assert abs(float((r > 0.3).mean()) - 0.7) < 0.01


def test_dropout_is_deterministic_per_seed() -> None:
    q, k, v = _qkv(1, 2, 2, 24, 24, 16, "float32")
    a = fmha_variant(q, k, v, dropout=0.4, seed=11)
    assert torch.equal(a, fmha_variant(q, k, v, dropout=0.4, seed=11))
    assert not torch.equal(a, fmha_variant(q, k, v, dropout=0.4, seed=12))
    assert not torch.equal(a, fmha_variant(q, k, v))
    torch.manual_seed(5)  # seed None: torch.initial_seed()
    want = fmha_variant_ref(q, k, v, dropout=0.4, seed=5)
    assert _rel(fmha_variant(q, k, v, dropout=0.4), want) < 1e-5


def test_rows_with_no_key_and_padded_rows_give_zeros() -> None:
    q, k, v = _qkv(2, 2, 2, 12, 12, 16, "float32")
    m = torch.zeros(2, 2, 12, 12, dtype=torch.bool)
    m[:, :, 3] = True  # row 3 sees nothing
    got = fmha_variant(q, k, v, random_mask=m, q_lens=[12, 5], is_causal=False)
    assert torch.equal(got[:, :, 3], torch.zeros(2, 2, 16))
    assert torch.equal(got[1, :, 5:], torch.zeros(2, 7, 16))
    assert torch.count_nonzero(got[0, :, 4:]) > 0
    assert torch.equal(fmha_variant(q, k[:, :, :0], v[:, :, :0]), torch.zeros_like(q))


def test_numpy_and_fl_tensors() -> None:
    q, k, v = (x.numpy() for x in _qkv(1, 2, 1, 10, 14, 16, "float32"))
    got = fmha_variant(q, k, v, kv_lens=np.array([9], np.int64))
    assert isinstance(got, np.ndarray)
    want = fmha_variant_ref(q, k, v, kv_lens=[9])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    fq, fk, fv = (fl.asarray(x) for x in (q, k, v))
    got_fl = fmha_variant(fq, fk, fv, kv_lens=[9])
    assert isinstance(got_fl, fl.Tensor)
    np.testing.assert_allclose(got_fl.numpy(), want, rtol=1e-5, atol=1e-5)


def test_refusals_are_fearless_errors() -> None:
    q, k, v = _qkv(2, 4, 2, 6, 8, 16, "float32")
    bad: list[tuple[dict, str]] = [
        ({"layout": "bsnd"}, "'bnsd' or 'nsbd'"),
        ({"layout": "nsbd"}, "layout nsbd"),
        ({"bias_type": "diag", "bias": q}, "bias_type"),
        ({"bias_type": "vector"}, "but no bias"),
        ({"bias": torch.zeros(2, 4, 1, 8)}, "no bias_type"),
        ({"bias_type": "vector", "bias": torch.zeros(2, 4, 6, 8)}, r"\(1 or 2, 1 or 4, 1, 8\)"),
        ({"bias_type": "matrix", "bias": torch.zeros(3, 4, 6, 8)}, r"\(1 or 2, 1 or 4, 6, 8\)"),
        ({"bias_type": "alibi", "bias": torch.zeros(2)}, "one slope per head"),
        ({"bias_type": "matrix", "bias": torch.zeros(2, 4, 6, 8, dtype=torch.int32)}, "takes"),
        ({"dropout": 1.0}, r"in \[0, 1\)"),
        ({"dropout": "x"}, "must be a number"),
        ({"dropout": 0.1, "seed": 2**64}, "64 bits"),
        ({"seed": 1.5}, "an int or None"),
        ({"window_size": -1}, "0 or more"),
        ({"window_size": 2.0}, "0 or more"),
        ({"random_mask": torch.zeros(2, 4, 6, 8)}, "takes"),
        ({"random_mask": torch.zeros(2, 4, 6, 7, dtype=torch.bool)}, "random_mask"),
        ({"q_lens": [6]}, "one length per sequence"),
        ({"q_lens": [6, 7]}, "outside 0..6"),
        ({"kv_lens": torch.tensor([1.0, 2.0])}, "int32 or int64"),
        ({"kv_lens": torch.tensor([1, -1])}, "outside 0..8"),
        ({"scaling": "a"}, "must be a number"),
    ]
    for kw, match in bad:
        with pytest.raises(fl.FearlessError, match=match):
            fmha_variant(q, k, v, **kw)
    k3 = torch.zeros(2, 3, 8, 16)
    with pytest.raises(fl.FearlessError, match="multiple of N_kv"):
        fmha_variant(q, k3, k3)
    with pytest.raises(fl.FearlessError, match="dtypes"):
        fmha_variant(q, k.half(), v.half())
    with pytest.raises(fl.FearlessError, match="shapes"):
        fmha_variant(q, k[..., :8], v)
    with pytest.raises(fl.FearlessError, match="requires grad"):
        fmha_variant(q.requires_grad_(), k, v)


# the nsbd layout's compile repeats the bnsd one's in another form: behind `slow` (CI's time)
@pytest.mark.parametrize("nsbd", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_the_kernel_compiles_through_tileiras(cubin: Callable[..., bytes], nsbd: bool) -> None:
    shape = (4, 256, 2, 128) if nsbd else (2, 4, 256, 128)
    kv_shape = (2, 200, 2, 128) if nsbd else (2, 2, 200, 128)
    q = fl.zeros(shape, dtype=fl.bf16)
    kv = fl.zeros(kv_shape, dtype=fl.bf16)
    tile_shape = (1, 128, 1, 128) if nsbd else (1, 1, 128, 128)
    out = fl.empty(shape, dtype=fl.bf16).partition(tile_shape)
    bias = fl.zeros((2, 4, 256, 200), dtype=fl.f32)
    mask = fl.zeros((2, 1, 256, 200), dtype=fl.i8)
    lens = fl.zeros((2,), dtype=fl.i32)
    flags = (nsbd, True, True, ("matrix", fl.f32, True, True), (fl.i8, True, False), True)
    kernel = make_fmha_variant(fl.bf16, *flags, occupancy=2)
    args = (0.1, 8, 0.1, 0.9, 1, 2, 128, 64, 2)
    assert cubin(kernel, out, q, kv, kv, bias, mask, lens, lens, *args)
