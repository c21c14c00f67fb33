"""`fearless.ops.mamba2_chunk_forward` and `mamba2_chunk_backward` (DESIGN 2c): TileGym's
semantics (Mamba-2's SSD: per head the decay exp(a dt), x scaled by dt, b and c per group, the
d skip, an initial and a final state) against the float64 sequential recurrence on the
simulator, and the gradients against torch autograd through that recurrence in float64, at
ragged shapes (P, N, T not multiples of the tiles; partial last chunks; grouped heads); the
chunk size changes nothing; torch autograd, the fake kernels and torch.compile; the refusals;
the kernels through tileiras."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops import kernels_mamba2 as K
from fearless.ops.kernels_mamba2 import (
    make_chunk_db,
    make_chunk_dc,
    make_chunk_ddt,
    make_chunk_dx,
    make_chunk_out,
    make_chunk_states,
    make_group_sum,
    make_head_sum,
)
from support.mamba2_ref import grad_reference, scan_reference

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float16": 3e-3, "bfloat16": 2e-2}
NAMES = ("dx", "da", "db", "dc", "dd", "ddt", "dinit_state")


def _inputs(bsz, t, h, g, p, n, dtype, init=True, seed=0):  # type: ignore[no-untyped-def]
    """TileGym's test inputs: x, b, c = silu(N), a = -U(1, 16) (here -U(0.5, 4), so that a
    chunk of 16 keeps some memory), d ~ N, dt = softplus(N); the state ~ 0.3 N."""
    gen = torch.Generator().manual_seed(seed + t * 100 + p)
    rn = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    cast = getattr(torch, dtype)
    silu = torch.nn.functional.silu
    x, b, c = silu(rn(bsz, t, h, p)).to(cast), silu(rn(bsz, t, g, n)), silu(rn(bsz, t, g, n))
    a = -(torch.rand(h, generator=gen) * 3.5 + 0.5)
    d = rn(h)
    dt = torch.nn.functional.softplus(rn(bsz, t, h)).to(cast)
    s0 = rn(bsz, h, p, n) * 0.3 if init else None
    return x, a, b.to(cast), c.to(cast), d, dt, s0


def _np(*xs):  # type: ignore[no-untyped-def]
    return [None if x is None else x.double().numpy() for x in xs]


def _rel(got, want: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    got = np.asarray(got.double().numpy() if hasattr(got, "double") else got, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


FORWARD = [  # ((B, T, H, G, P, N), chunk_size, dtype, initial state)
    ((1, 21, 2, 1, 12, 10), 16, "float32", True),  # P, N, T ragged: a partial second chunk
    ((2, 37, 4, 2, 16, 20), 16, "float32", False),  # two heads per group, zeros to start
    ((1, 70, 2, 2, 16, 24), 32, "float16", True),
    ((1, 40, 3, 1, 24, 16), 64, "bfloat16", True),  # three heads per group, one chunk
]


@pytest.mark.parametrize("case", FORWARD, ids=lambda c: "-".join(map(str, (*c[0], *c[1:]))))
def test_forward_matches_the_sequential_recurrence(case: tuple) -> None:
    (bsz, t, h, g, p, n), cs, dtype, init = case
    x, a, b, c, d, dt, s0 = _inputs(bsz, t, h, g, p, n, dtype, init)
    out, state = ops.mamba2_chunk_forward(x, a, b, c, d, dt, s0, cs)
    want, want_s = scan_reference(*_np(x, a, b, c, d, dt, s0))
    assert out.dtype == x.dtype and out.shape == (bsz, t, h, p)
    assert state.dtype == torch.float32 and state.shape == (bsz, h, p, n)
    assert _rel(out, want) < TOL[dtype]
    assert _rel(state, want_s) < (1e-5 if dtype == "float32" else 1e-3)


def test_the_chunk_size_changes_nothing_and_the_state_keeps_its_dtype() -> None:
    x, a, b, c, d, dt, s0 = _inputs(1, 50, 2, 1, 8, 8, "float32")
    runs = [ops.mamba2_chunk_forward(x, a, b, c, d, dt, s0, cs) for cs in (16, 64, 128)]
    for out, state in runs[1:]:
        assert _rel(out, runs[0][0].double().numpy()) < 1e-6
        assert _rel(state, runs[0][1].double().numpy()) < 1e-6
    s0 = s0.bfloat16()
    out, state = ops.mamba2_chunk_forward(x, a, b, c, d, dt, s0, 16)
    assert state.dtype == torch.bfloat16  # TileGym's: the final state like init_state
    assert _rel(state, scan_reference(*_np(x, a, b, c, d, dt, s0))[1]) < 1e-2


BACKWARD = [  # ((B, T, H, G, P, N), chunk_size, dtype, initial state)
    ((1, 21, 2, 1, 12, 10), 16, "float32", True),
    ((2, 37, 4, 2, 16, 20), 16, "float32", False),  # grouped heads: db, dc summed per group
    ((1, 40, 2, 1, 16, 24), 32, "bfloat16", True),
]


@pytest.mark.parametrize("case", BACKWARD, ids=lambda c: "-".join(map(str, (*c[0], *c[1:]))))
def test_backward_matches_float64_autograd(case: tuple) -> None:
    (bsz, t, h, g, p, n), cs, dtype, init = case
    x, a, b, c, d, dt, s0 = _inputs(bsz, t, h, g, p, n, dtype, init, seed=1)
    gen = torch.Generator().manual_seed(7)
    dy = torch.randn(bsz, t, h, p, generator=gen).to(x.dtype)
    dfin = torch.randn(bsz, h, p, n, generator=gen)
    grads = ops.mamba2_chunk_backward(x, a, b, c, d, dt, s0, dy, dfin, cs)
    zeros = torch.zeros(bsz, h, p, n)
    want = grad_reference(*_np(x, a, b, c, d, dt, s0 if init else zeros, dy, dfin))
    dtypes = (x.dtype, torch.float32, b.dtype, c.dtype, torch.float32, dt.dtype, torch.float32)
    tol = 1e-5 if dtype == "float32" else 3e-2
    for name, got, ref, want_dt in zip(NAMES, grads, want, dtypes, strict=True):
        assert got.dtype == want_dt and tuple(got.shape) == ref.shape, name
        assert _rel(got, ref) < tol, name


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_backward_in_blocks_of_a_chunk(monkeypatch: pytest.MonkeyPatch, dtype: str) -> None:
    """The gradient kernels' blocks of GRAD_ROWS steps of a chunk (64 of 128 on the GPU), here
    16 of 64 and of 32: a partial last chunk, grouped heads."""
    monkeypatch.setattr(K, "GRAD_ROWS", 16)
    for (bsz, t, h, g, p, n), cs in (((1, 150, 2, 1, 12, 10), 64), ((2, 37, 4, 2, 16, 20), 32)):
        x, a, b, c, d, dt, s0 = _inputs(bsz, t, h, g, p, n, dtype, seed=3)
        gen = torch.Generator().manual_seed(5)
        dy = torch.randn(bsz, t, h, p, generator=gen).to(x.dtype)
        dfin = torch.randn(bsz, h, p, n, generator=gen)
        grads = ops.mamba2_chunk_backward(x, a, b, c, d, dt, s0, dy, dfin, cs)
        want = grad_reference(*_np(x, a, b, c, d, dt, s0, dy, dfin))
        tol = 1e-5 if dtype == "float32" else 3e-2
        for name, got, ref in zip(NAMES, grads, want, strict=True):
            # da sums terms that nearly cancel: at 150 steps f32's is 5e-5 to 1e-4 off (so was
            # the single-kernel backward's), bf16's 2e-4 to 4e-4
            assert _rel(got, ref) < (3e-4 if name == "da" and tol < 1e-4 else tol), name


def test_torch_autograd_runs_the_backward() -> None:
    x, a, b, c, d, dt, s0 = _inputs(1, 20, 2, 1, 8, 12, "float32", seed=2)
    leaves = [v.clone().requires_grad_() for v in (x, a, b, c, d, dt, s0)]
    out, state = ops.mamba2_chunk_forward(*leaves, chunk_size=16)
    gen = torch.Generator().manual_seed(3)
    dy, dfin = torch.randn(out.shape, generator=gen), torch.randn(state.shape, generator=gen)
    ((out * dy).sum() + (state * dfin).sum()).backward()
    want = grad_reference(*_np(x, a, b, c, d, dt, s0, dy, dfin))
    for name, leaf, ref in zip(NAMES, leaves, want, strict=True):
        assert _rel(leaf.grad, ref) < 1e-5, name
    leaves = [v.clone().requires_grad_() for v in (x, a, b, c, d, dt)]
    out, _ = ops.mamba2_chunk_forward(*leaves, None, 16)  # no initial state, y's gradient only
    out.sum().backward()
    want = grad_reference(*_np(x, a, b, c, d, dt, 0 * s0, torch.ones_like(out), 0 * s0))
    assert all(_rel(v.grad, r) < 1e-5 for v, r in zip(leaves, want, strict=False))


def test_numpy_and_fl_tensors_in_and_out() -> None:
    x, a, b, c, d, dt, s0 = (v.numpy() for v in _inputs(1, 9, 2, 2, 8, 8, "float32"))
    want, want_s = scan_reference(x, a, b, c, d, dt, s0)
    out, state = ops.mamba2_chunk_forward(x, a, b, c, d, dt, s0, 16)
    assert isinstance(out, np.ndarray) and isinstance(state, np.ndarray)
    assert _rel(out, want) < 1e-5 and _rel(state, want_s) < 1e-5
    fx = [fl.asarray(v) for v in (x, a, b, c, d, dt)]
    out, state = ops.mamba2_chunk_forward(*fx, None, 16)
    assert isinstance(out, fl.Tensor) and isinstance(state, fl.Tensor)
    assert _rel(out.numpy(), scan_reference(x, a, b, c, d, dt)[0]) < 1e-5
    grads = ops.mamba2_chunk_backward(*fx, None, fl.asarray(x), None, 16)
    assert all(isinstance(gr, fl.Tensor) for gr in grads)


def test_torch_operators_fake_kernels_and_compile() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    x, a, b, c, d, dt, s0 = _inputs(1, 10, 2, 1, 8, 12, "float32")
    want, want_s = scan_reference(*_np(x, a, b, c, d, dt, s0))
    out, st = torch.ops.fearless.mamba2_chunk_forward(x, a, b, c, d, dt, s0, 16)
    assert _rel(out, want) < 1e-5 and _rel(st, want_s) < 1e-5
    with FakeTensorMode():
        fx, fb = torch.empty(2, 7, 4, 16, dtype=torch.bfloat16), torch.empty(2, 7, 2, 8)
        fa, fdt = torch.empty(4), torch.empty(2, 7, 4, dtype=torch.bfloat16)
        out, st = torch.ops.fearless.mamba2_chunk_forward(
            fx, fa, fb.bfloat16(), fb.bfloat16(), fa, fdt, None, 64
        )
        assert out.shape == (2, 7, 4, 16) and out.dtype == torch.bfloat16
        assert st.shape == (2, 4, 16, 8) and st.dtype == torch.float32
        grads = torch.ops.fearless.mamba2_chunk_backward(
            fx, fa, fb.bfloat16(), fb.bfloat16(), fa, fdt, None, fx, None, 64
        )
        assert [tuple(gr.shape) for gr in grads] == [
            (2, 7, 4, 16), (4,), (2, 7, 2, 8), (2, 7, 2, 8), (4,), (2, 7, 4), (2, 4, 16, 8)
        ]  # fmt: skip

    def block(*args):  # type: ignore[no-untyped-def]
        return ops.mamba2_chunk_forward(*args, chunk_size=16)

    out, st = torch.compile(block, fullgraph=True, backend="aot_eager")(x, a, b, c, d, dt, s0)
    assert _rel(out, want) < 1e-5 and _rel(st, want_s) < 1e-5


def test_refusals_are_fearless_errors() -> None:
    x, a, b, c, d, dt, s0 = _inputs(1, 6, 2, 1, 8, 8, "float32")
    fwd, bwd = ops.mamba2_chunk_forward, ops.mamba2_chunk_backward
    with pytest.raises(fl.KernelTypeError, match=r"`chunk_size` .* must be one of 16, 32, 64"):
        fwd(x, a, b, c, d, dt, s0, 48)
    with pytest.raises(fl.KernelTypeError, match="of one dtype"):
        fwd(x, a, b.half(), c, d, dt, s0)
    with pytest.raises(fl.KernelTypeError, match="H a multiple of G"):
        fwd(
            x[:, :, :1], a[:1], b.expand(1, 6, 2, 8), c.expand(1, 6, 2, 8), d[:1], dt[..., :1], None
        )
    with pytest.raises(fl.KernelTypeError, match=r"`dt` .* must have shape \(1, 6, 2\)"):
        fwd(x, a, b, c, d, dt[..., :1], s0)
    with pytest.raises(fl.KernelTypeError, match=r"`a` .* must have shape \(2,\)"):
        fwd(x, a[:1], b, c, d, dt, s0)
    with pytest.raises(fl.KernelTypeError, match=r"`init_state` .* \(B, H, P, N\)"):
        fwd(x, a, b, c, d, dt, s0[:, :1])
    with pytest.raises(fl.KernelTypeError, match="takes f32, f16, bf16 tensors, but `d`"):
        fwd(x, a, b, c, d.int(), dt, s0)
    with pytest.raises(fl.KernelTypeError, match="at least one batch, step"):
        fwd(x[:, :0], a, b[:, :0], c[:, :0], d, dt[:, :0], s0)
    with pytest.raises(fl.KernelTypeError, match=r"`dout` .* must be like x"):
        bwd(x, a, b, c, d, dt, s0, x[:, :3], None)
    with pytest.raises(fl.KernelTypeError, match=r"`dfinal_state` .* \(B, H, P, N\)"):
        bwd(x, a, b, c, d, dt, s0, x, s0[..., :4])


def _mma_operand_types(text: str) -> set[str]:
    """The element types of every `tile.mma`'s two operands in a kernel's tile IR text."""
    types = {}
    for line in text.splitlines():
        name, eq, rest = line.strip().partition(" = ")
        if eq:
            types[name] = rest.rsplit("x", 1)[-1].rstrip(">")
    return {
        types[op.strip(",")]
        for line in text.splitlines()
        if " = tile.mma " in line
        for op in line.split(" = tile.mma ")[1].split()[:2]
    }


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
def test_16_bit_inputs_feed_the_mmas_tf32(dtype: str) -> None:
    """16-bit inputs: every mma of the chunk kernels takes tf32 operands and the running sum of
    a dt is no forward tile.scan (tileiras builds an f32 x f32 mma from scalar FMAs, minutes of
    it for chunk_grads, and failed chunk_out's tf32 mmas beside that scan;
    bench/experiments/compile_slow_kernels.py); f32 inputs keep f32 operands and the scan."""
    dt, f32 = getattr(fl, dtype), fl.f32
    bsz, t, h, g, p, n, cs, nc = 1, 100, 4, 2, 32, 64, 32, 4
    x, bm = fl.zeros((bsz, t, h, p), dtype=dt), fl.zeros((bsz, t, g, n), dtype=dt)
    a, dtt = fl.zeros((h,), dtype=f32), fl.zeros((bsz, t, h), dtype=dt)
    s0, full = fl.zeros((bsz, h, p, n), dtype=f32), fl.zeros((bsz, nc, h, p, n), dtype=f32)
    states = fl.empty((bsz, nc, h, p, n), dtype=f32).partition((1, nc, 1, p, n))
    final = fl.empty((bsz, 1, h, p, n), dtype=f32).partition((1, 1, 1, p, n))
    out = fl.empty((bsz, t, h, p), dtype=dt).partition((1, cs, 1, p))
    dbh, dch = (fl.empty((bsz, t, h, n), dtype=f32).partition((1, cs, 1, n)) for _ in "bc")
    steps = [fl.empty((bsz, t, h, 1), dtype=f32).partition((1, cs, 1, 1)) for _ in "rdk"]
    texts = [
        make_chunk_states(dt, dt, f32, f32, f32, False, True).inspect(
            states, final, x, bm, a, dtt, s0, 2, cs, stage="ir"
        ),
        make_chunk_out(dt, dt, f32, f32).inspect(out, x, bm, bm, a, a, dtt, full, 2, n, stage="ir"),
        make_chunk_dx(dt, dt, f32, f32).inspect(
            out, x, bm, bm, a, a, dtt, full, 2, cs, n, stage="ir"
        ),
        make_chunk_db(dt, dt, f32).inspect(
            dbh, steps[1], steps[2], x, x, bm, bm, a, dtt, full, 2, cs, p, stage="ir"
        ),
        make_chunk_dc(dt, dt, f32).inspect(
            dch, steps[0], x, x, bm, bm, a, dtt, full, 2, cs, p, stage="ir"
        ),
    ]
    want = "f32" if dtype == "f32" else "tf32"
    for text in texts:
        assert _mma_operand_types(text) == {want}
        scans = [line for line in text.splitlines() if "tile.scan" in line]
        assert any("reverse=False" in line for line in scans) == (dtype == "f32")


@pytest.mark.parametrize("reverse", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_the_kernels_compile_through_tileiras(cubin: Callable[..., bytes], reverse: bool) -> None:
    bf, f32 = fl.bf16, fl.f32
    bsz, t, h, g, p, n, cs, nc = 1, 100, 4, 2, 64, 128, 64, 2
    x, bm = fl.zeros((bsz, t, h, p), dtype=bf), fl.zeros((bsz, t, g, n), dtype=bf)
    a, dt = fl.zeros((h,), dtype=f32), fl.zeros((bsz, t, h), dtype=bf)
    s0 = fl.zeros((bsz, h, p, n), dtype=f32)
    states = fl.empty((bsz, nc, h, p, n), dtype=f32).partition((1, nc, 1, 64, n))
    final = fl.empty((bsz, 1, h, p, n), dtype=f32).partition((1, 1, 1, 64, n))
    kernel = make_chunk_states(bf, bf, f32, f32, f32, reverse, True, occupancy=1)
    assert cubin(kernel, states, final, x, bm, a, dt, s0, 2, cs)
    full = fl.zeros((bsz, nc, h, p, n), dtype=f32)
    if not reverse:
        out = fl.empty((bsz, t, h, p), dtype=bf).partition((1, cs, 1, 64))
        assert cubin(make_chunk_out(bf, bf, f32, f32), out, x, bm, bm, a, a, dt, full, 2, n)
        return
    # the gradient kernels, as the launch makes them for 16-bit inputs (64 steps a block, 8
    # worker warps: no spills)
    br, warps = min(cs, K.GRAD_ROWS), K.GRAD_WARPS
    dx = fl.empty((bsz, t, h, p), dtype=bf).partition((1, br, 1, p))
    dbh, dch = (fl.empty((bsz, t, h, n), dtype=f32).partition((1, br, 1, n)) for _ in "bc")
    rp, dr, ki = (fl.empty((bsz, t, h, 1), dtype=f32).partition((1, br, 1, 1)) for _ in "rdk")
    dx_k = make_chunk_dx(bf, bf, f32, f32).options(num_worker_warps=warps)
    assert cubin(dx_k, dx, x, bm, bm, a, a, dt, full, 2, cs, n)
    db_k = make_chunk_db(bf, bf, f32).options(num_worker_warps=warps)
    assert cubin(db_k, dbh, dr, ki, x, x, bm, bm, a, dt, full, 2, cs, p)
    dc_k = make_chunk_dc(bf, bf, f32).options(num_worker_warps=warps)
    assert cubin(dc_k, dch, rp, x, x, bm, bm, a, dt, full, 2, cs, p)
    ddt = fl.empty((bsz, t, h, 1), dtype=bf).partition((1, cs, 1, 1))
    da_p, dd_p = (fl.empty((bsz, nc, h, 1), dtype=f32).partition((1, 1, 1, 1)) for _ in "ad")
    steps = fl.zeros((bsz, t, h), dtype=f32)
    ddt_k = make_chunk_ddt(bf, bf, f32)
    assert cubin(ddt_k, ddt, da_p, dd_p, steps, steps, steps, x, x, a, dt, full, full, p, n)
    db, dc = (fl.empty((bsz, t, g, n), dtype=bf).partition((1, cs, 1, n)) for _ in "bc")
    per_head = fl.zeros((bsz, t, h, n), dtype=f32)
    assert cubin(make_group_sum(bf), db, dc, per_head, per_head, 2)
    da, dd = (fl.empty((h,), dtype=f32).partition((h,)) for _ in "ad")
    rows = fl.zeros((bsz * nc, h), dtype=f32)
    assert cubin(make_head_sum(), da, dd, rows, rows, 2)
