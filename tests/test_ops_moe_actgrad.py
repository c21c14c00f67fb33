"""`fearless.ops.moe_actgrad_bwd` (TileGym's MoE down-projection activation-gradient backward)
on the simulator against the float64 reference of tests/support/moe_actgrad_ref.py: every
activation, ragged expert groups (empty experts, groups that straddle row tiles, columns past
I), f16 / bf16, ds added to, b2 / db2 unused; NumPy and fl.Tensor callers; the torch operator
(a mutating op) and its fake kernel; the refusals (indices, offsets, shapes, dtypes, aliasing);
the kernel through tileiras."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_moe_actgrad import launch, make_moe_actgrad
from support.moe_actgrad_ref import GLU, moe_actgrad_reference

torch = pytest.importorskip("torch")

KINDS = ("swiglu", "geglu", "reglu", "silu", "relu", "gelu", "relu_sq")
TOL = {"float32": 2e-5, "float16": 1e-2, "bfloat16": 4e-2}


@pytest.fixture(autouse=True)
def _first_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")  # the first configuration


def _inputs(  # type: ignore[no-untyped-def]
    kind: str,
    counts: list[int],
    tokens: int = 7,
    topk: int = 2,
    hidden: int = 40,
    inter: int = 24,
    dtype: str = "float32",
    seed: int = 0,
):
    """dict of the operator's arguments (torch), ds zeroed, for expert groups of `counts`."""
    g = torch.Generator().manual_seed(seed + 7 * len(counts) + inter)
    dt = getattr(torch, dtype)
    tk, experts = sum(counts), len(counts)
    width = 2 * inter if kind in GLU else inter
    return dict(
        dout=torch.randn(tokens, hidden, generator=g).to(dt),
        h=torch.randn(tk, width, generator=g).to(dt),
        w2=(torch.randn(experts, inter, hidden, generator=g) * 0.2).to(dt),
        dh=torch.empty(tk, width, dtype=dt),
        ds=torch.zeros(tk),
        b2=None,
        db2=None,
        a_prime=torch.empty(tk, inter, dtype=dt),
        topk_scores=torch.rand(tokens * topk, generator=g),
        expert_frequency_offset=torch.tensor(np.cumsum([0, *counts]), dtype=torch.int32),
        x_gather_idx=torch.randint(0, tokens, (tk,), generator=g),
        s_scatter_idx=torch.randint(0, tokens * topk, (tk,), generator=g, dtype=torch.int32),
        activation_type=kind,
    )


def _want(a: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    def np_(x: Any) -> np.ndarray:
        if isinstance(x, torch.Tensor):
            return (x.float() if x.is_floating_point() else x).numpy()
        return np.asarray(x.numpy() if isinstance(x, fl.Tensor) else x)

    return moe_actgrad_reference(
        *(np_(a[n]) for n in ("dout", "h", "w2", "topk_scores", "expert_frequency_offset")),
        np_(a["x_gather_idx"]), np_(a["s_scatter_idx"]), a["activation_type"],
    )  # fmt: skip


def _check(a: dict, dtype: str = "float32", ds0: float = 0.0) -> None:
    dh, ap, ds = _want(a)
    for name, want in (("dh", dh), ("a_prime", ap), ("ds", ds + ds0)):
        got = np.asarray(a[name].float().numpy() if isinstance(a[name], torch.Tensor) else
                         a[name], dtype=np.float64)  # fmt: skip
        scale = max(float(np.abs(want).max()), 1.0)
        err = float(np.abs(got - want).max()) / scale
        assert err < TOL[dtype if name != "ds" else "float32"] * (1 if dtype == "float32" else
                                                                   10), (name, err)  # fmt: skip


COUNTS = [3, 0, 6, 5, 0]  # experts 1 and 4 have no token; groups not multiples of the tile


@pytest.mark.parametrize("kind", KINDS)
def test_every_activation_matches_the_float64_reference(kind: str) -> None:
    a = _inputs(kind, COUNTS)
    ops.moe_actgrad_bwd(**a)
    _check(a)


@pytest.mark.parametrize(("kind", "dtype"), [("swiglu", "bfloat16"), ("gelu", "float16")])
def test_half_precision(kind: str, dtype: str) -> None:
    a = _inputs(kind, [5, 9, 0, 2], hidden=32, inter=16, dtype=dtype)
    ops.moe_actgrad_bwd(**a)
    assert a["dh"].dtype == getattr(torch, dtype) and a["ds"].dtype == torch.float32
    _check(a, dtype)


@pytest.mark.parametrize("kind", ["geglu", "relu_sq"])
def test_small_tiles_groups_straddling_row_tiles(kind: str) -> None:
    """16-row tiles over 45 rows in 7 groups (one of 17 over two tiles, empty ones between), 16
    columns of I = 40 per chunk (the third partly, the fourth wholly past I), K steps of 16 over
    H = 24; launched directly at those tiles."""
    a = _inputs(kind, [0, 17, 1, 0, 20, 7, 0], tokens=9, hidden=24, inter=40)
    tk, inter = a["h"].shape[0], 40
    g = 2 if kind in GLU else 1
    dout, w2, scores = (fl.asarray(a[n].numpy()) for n in ("dout", "w2", "topk_scores"))
    h = fl.asarray(a["h"].numpy().reshape(tk, g, inter))
    off, gi, si = (
        fl.asarray(a[n].numpy().astype(np.int32))
        for n in ("expert_frequency_offset", "x_gather_idx", "s_scatter_idx")
    )
    dh = fl.empty((tk, g, inter), dtype=fl.f32)
    ap, ds = fl.empty((tk, inter), dtype=fl.f32), fl.zeros((tk,), dtype=fl.f32)
    launch(kind, dh, ap, ds, dout, h, w2, scores, off, gi, si, 16, 16, 16)
    a.update(dh=dh.numpy().reshape(tk, g * inter), a_prime=ap.numpy(), ds=ds.numpy())
    _check(a)


def test_ds_adds_b2_db2_unused_numpy_and_fl_callers() -> None:
    """ds keeps what it held (TileGym adds atomically into it); db2 is not written."""
    a = _inputs("silu", COUNTS)
    a["ds"] += 1.0
    a["b2"], a["db2"] = torch.randn(5, 40), torch.full((5, 40), 3.0)
    ops.moe_actgrad_bwd(**a)
    _check(a, ds0=1.0)
    assert (a["db2"] == 3.0).all()
    n: dict[str, Any] = {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in a.items()}
    n["ds"][:] = 0.0
    ops.moe_actgrad_bwd(**n)
    _check(n)
    f: dict[str, Any] = {k: fl.asarray(v) if isinstance(v, np.ndarray) else v for k, v in n.items()}
    f["ds"] = fl.zeros((14,), dtype=fl.f32)
    ops.moe_actgrad_bwd(**f)
    _check({k: v.numpy() if isinstance(v, fl.Tensor) else v for k, v in f.items()})


def test_tuning_puts_ds_back_before_each_timed_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "1")
    a = _inputs("relu", [4, 0, 3], tokens=5, hidden=16, inter=8)
    a["ds"] += 2.0
    ops.moe_actgrad_bwd(**a)
    _check(a, ds0=2.0)


def test_empty_groups_no_rows_and_no_hidden() -> None:
    a = _inputs("reglu", [0, 0, 0])
    ops.moe_actgrad_bwd(**a)  # TK = 0: nothing to write
    a = _inputs("swiglu", [0, 4, 0])
    ops.moe_actgrad_bwd(**a, max_tokens_per_expert=4)
    _check(a)
    a = _inputs("silu", [3, 0, 4], tokens=5, hidden=0, inter=8)  # H = 0: dy1 = 0
    ops.moe_actgrad_bwd(**a)
    _check(a)
    assert not a["dh"].any()


def test_torch_operator_and_its_fake_kernel() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    a = _inputs("geglu", COUNTS)
    assert torch.ops.fearless.moe_actgrad_bwd(**a) is None
    _check(a)
    with FakeTensorMode():
        f = {
            k: torch.empty(v.shape, dtype=v.dtype) if isinstance(v, torch.Tensor) else v
            for k, v in a.items()
        }
        assert torch.ops.fearless.moe_actgrad_bwd(**f) is None


@pytest.mark.slow
def test_torch_library_opcheck() -> None:
    a = _inputs("relu", [3, 0, 4], tokens=5, hidden=16, inter=8)
    names = (
        "dout",
        "h",
        "w2",
        "dh",
        "ds",
        "b2",
        "db2",
        "a_prime",
        "topk_scores",
        "expert_frequency_offset",
        "x_gather_idx",
        "s_scatter_idx",
        "activation_type",
    )
    torch.library.opcheck(torch.ops.fearless.moe_actgrad_bwd.default, tuple(a[n] for n in names))


def _refused(err: type, match: str, a: dict, **changes: Any) -> Any:
    with pytest.raises(err, match=match) as e:
        ops.moe_actgrad_bwd(**{**a, **changes})
    return e.value


def test_refusals_are_fearless_errors() -> None:
    a = _inputs("swiglu", COUNTS)
    off, gi, si = (a[n] for n in ("expert_frequency_offset", "x_gather_idx", "s_scatter_idx"))
    bad = gi.clone()
    bad[4] = 7
    _refused(fl.KernelIndexError, r"`x_gather_idx\[4\]` .* is 7, outside 0..6", a,
             x_gather_idx=bad)  # fmt: skip
    bad = si.clone()
    bad[[2, 9]] = -1
    e = _refused(fl.KernelIndexError, r"`s_scatter_idx\[2\]` .* is -1, outside 0..13 .* 2 "
                 "entries", a, s_scatter_idx=bad)  # fmt: skip
    assert "[0, 14)" in (e.help or "")
    bad = off.clone()
    bad[2] = 10
    _refused(fl.KernelTypeError, r"decreases at expert 2: offset\[2\] = 10 > offset\[3\] = 9", a,
             expert_frequency_offset=bad)  # fmt: skip
    _refused(fl.KernelTypeError, r"start at 0 and end at TK = 14 .* got 0 \.\. 13", a,
             expert_frequency_offset=torch.tensor([0, 3, 3, 9, 13, 13]))  # fmt: skip
    _refused(fl.KernelTypeError, r"`max_tokens_per_expert` .* is 5, but expert 2 has 6", a,
             max_tokens_per_expert=5)  # fmt: skip
    _refused(fl.KernelTypeError, r"`h` of shape \(14, 24\) where \(14, 48\) fits .* 2I = 48", a,
             h=a["h"][:, :24])  # fmt: skip
    _refused(fl.KernelTypeError, r"dtypes dout f32, h f16", a, h=a["h"].half())
    _refused(fl.KernelTypeError, r"takes f32 tensors, but `ds` is f16", a, ds=a["ds"].half())
    _refused(fl.KernelTypeError, r"`activation_type` .* must be one of .* got 'tanh'", a,
             activation_type="tanh")  # fmt: skip
    _refused(fl.BorrowError, r"`dh` .* shares memory with `h`", a, dh=a["h"])
    both = torch.empty(14, 72)
    mutable = r"`dh` .* shares memory with `a_prime`: .* borrowed as mutable"
    _refused(fl.BorrowError, mutable, a, dh=both[:, :48], a_prime=both[:, 40:64])
    _refused(fl.KernelTypeError, r"`ds` .* has a broadcast dimension .* writes it in place", a,
             ds=torch.zeros(1).expand(14))  # fmt: skip
    # rows that overlap (tests/test_ops_layout_mutations.py: ran, each place kept one result)
    _refused(fl.KernelTypeError, r"`dh` .* has elements that share memory .* in place", a,
             dh=torch.zeros(14 * 8 + 48).as_strided((14, 48), (8, 1)))  # fmt: skip
    _refused(fl.KernelTypeError, r"`h` of .* requires grad", a, h=a["h"].requires_grad_())


def _kernel_args(dt: Any, g: int, tk: int, tokens: int, hidden: int, inter: int, experts: int):  # type: ignore[no-untyped-def]
    i32 = fl.i32
    return (
        fl.zeros((tokens, hidden), dtype=dt), fl.zeros((tk, g, inter), dtype=dt),
        fl.zeros((experts, inter, hidden), dtype=dt), fl.zeros((tokens * 4,), dtype=fl.f32),
        fl.zeros((experts + 1,), dtype=i32), fl.zeros((tk,), dtype=i32),
        fl.zeros((tk,), dtype=i32),
    )  # fmt: skip


def test_w2_is_loaded_without_tma() -> None:
    # with TMA for w2's tile (its expert coordinate changing inside the K loop) the 16-bit
    # kernel never finished on the H100 and the H200, 2026-12-05
    # (bench/experiments/moe_actgrad_variants.py); the hint must stay
    tk, g, inter = 256, 2, 32
    with (
        fl.empty((tk, g, inter), dtype=fl.bf16).partition((64, g, inter)) as pd,
        fl.empty((tk, inter), dtype=fl.bf16).partition((64, inter)) as pa,
        fl.empty((tk,), dtype=fl.f32).partition((64,)) as ps,
    ):
        args = _kernel_args(fl.bf16, g, tk, 64, 64, inter, 8)
        text = make_moe_actgrad(fl.bf16, "swiglu").inspect(pd, pa, ps, *args, 32, 32, 16,
                                                           stage="ir")  # fmt: skip
    loads = [line for line in text.splitlines() if "tile.load %w2" in line]
    assert loads and all("allow_tma=False" in line for line in loads), loads


@pytest.mark.parametrize(
    ("kind", "dtype"),
    [("swiglu", "bf16"), pytest.param("relu_sq", "f16", marks=pytest.mark.slow)],
)
def test_the_kernel_compiles_through_tileiras(
    cubin: Callable[..., bytes], kind: str, dtype: str
) -> None:
    dt = getattr(fl, dtype)
    tk, tokens, hidden, inter, experts = 4096, 1024, 1024, 512, 8
    g = 2 if kind in GLU else 1
    args = _kernel_args(dt, g, tk, tokens, hidden, inter, experts)
    with (
        fl.empty((tk, g, inter), dtype=dt).partition((64, g, inter)) as pd,
        fl.empty((tk, inter), dtype=dt).partition((64, inter)) as pa,
        fl.empty((tk,), dtype=fl.f32).partition((64,)) as ps,
    ):
        assert cubin(make_moe_actgrad(dt, kind), pd, pa, ps, *args, 32, 32, 16)


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_128_row_configurations_take_8_worker_warps_for_16_bit_inputs(
    monkeypatch: pytest.MonkeyPatch, dtype: str
) -> None:
    """ACTGRAD_CONFIGS' 128-row tiles launch with num_worker_warps=8 for 16-bit inputs (with
    tileiras's default their (BM, BN) f32 tiles spilled, and (128, 128, 64) took 40 s of
    tileiras); f32 inputs keep the kernels they had."""
    from fearless.ops import kernels_moe_actgrad as K
    from fearless.tile.kernel import Kernel

    seen: list[object] = []
    monkeypatch.setattr(Kernel, "__call__", lambda self, *a, **k: seen.append(self.hints))
    dt = getattr(fl, dtype)
    tk, inter = 256, 256
    dout, h, w2, scores, off, gi, si = _kernel_args(dt, 2, tk, 64, 128, inter, 8)
    dh, ap = fl.empty((tk, 2, inter), dtype=dt), fl.empty((tk, inter), dtype=dt)
    ds = fl.zeros((tk,), dtype=fl.f32)
    for cfg in K.ACTGRAD_CONFIGS:
        K.launch("swiglu", dh, ap, ds, dout, h, w2, scores, off, gi, si, cfg["bm"], cfg["bn"],
                 cfg["bk"], cfg["occupancy"], cfg["warps"])  # fmt: skip
    warps = [h.num_worker_warps for h in seen]  # type: ignore[attr-defined]
    want = [8 if c["bm"] == 128 and dtype == "bf16" else None for c in K.ACTGRAD_CONFIGS]
    assert warps == want


def test_the_128_by_128_tile_with_8_warps_spills_little(cubin: Callable[..., bytes]) -> None:
    """(128, 128, 64) in bf16 with 8 worker warps: under 256 bytes of stack a thread (3,240
    with tileiras's default, 2026-12-06; bench/experiments/compile_slow_kernels.py)."""
    from fearless.backends.cubin_info import kernel_resources

    dt, tk, inter = fl.bf16, 2400, 768
    args = _kernel_args(dt, 2, tk, 300, 2048, inter, 128)
    with (
        fl.empty((tk, 2, inter), dtype=dt).partition((128, 2, 1024)) as pd,
        fl.empty((tk, inter), dtype=dt).partition((128, 1024)) as pa,
        fl.empty((tk,), dtype=fl.f32).partition((128,)) as ps,
    ):
        kernel = make_moe_actgrad(dt, "swiglu").options(num_worker_warps=8)
        (res,) = kernel_resources(cubin(kernel, pd, pa, ps, *args, 128, 64, 256))
    assert res.stack < 256, res


def test_the_tuners_key_holds_the_intermediate_and_the_hidden_width() -> None:
    """actgrad_tuned's key: the activation, the grouped rows' size class, I and H (dout's
    width): two models alike but for H tune apart."""
    from types import SimpleNamespace as NS

    from fearless.ops import kernels_moe_actgrad as K

    def key(hidden: int) -> tuple[object, ...]:
        dh, a_prime, ds = NS(shape=(2400, 2, 768)), NS(shape=(2400, 768)), NS(shape=(2400,))
        return K._key("swiglu", dh, a_prime, ds, NS(shape=(300, hidden)))  # type: ignore[no-any-return]

    assert key(2048)[2:] == (768, 2048)
    assert key(2048) != key(4096)
