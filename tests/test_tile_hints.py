"""What a launch tells tileiras: divisibility facts (`assume`) and the kernel's and loads' hints."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import tile
from fearless.abi import array_align
from fearless.ir.tile.kernel import TileHints
from fearless.runtime.target import Target


def _line(fn, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


@tile.kernel
def add(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


def test_array_align_is_pointer_then_extents_then_strides() -> None:
    # f16: 16 bytes are 8 elements, so extents and strides divide by at most 8.
    assert array_align(0x1000, (64, 96), 2) == (16, 8, 8, 8)
    assert array_align(0x1004, (37, 100), 4) == (4, 1, 4, 4)
    assert array_align(0x1002, (6,), 2) == (2, 2)
    assert array_align(0x1000, (3, 5, 7), 4) == (16, 1, 1, 1, 1, 1)  # strides 35 and 7


def test_the_launch_specialises_on_divisibility_and_the_bytecode_assumes_it() -> None:
    zp = fl.empty(1000, dtype=fl.f32).partition((128,))
    aligned = fl.asarray(np.ones(1000, np.float32))
    shifted = fl.asarray(np.ones(1001, np.float32)[1:])  # 4 bytes past a 16-byte boundary
    sig_a, _ = add.signature_of((zp, aligned, aligned), Target.SIM)
    sig_s, _ = add.signature_of((zp, shifted, aligned), Target.SIM)
    assert sig_a[1].align[0] == 16 and sig_s[1].align[0] == 4
    assert sig_a != sig_s  # two compiles: the assumption always holds for the launch
    text = add.inspect(zp, shifted, aligned, stage="tileir")
    assert "assume div_by<4>, %arg2 : tile<ptr<f32>>" in text  # x's pointer
    assert "assume div_by<16>, %arg4 : tile<ptr<f32>>" in text  # y's pointer
    assert "assume bounded<0, ?>, %arg1 : tile<i32>" in text  # z's extent is >= 0
    # The simulator runs either specialisation the same way.
    add(zp, shifted, aligned)
    np.testing.assert_array_equal(zp.unpartition().numpy(), np.full(1000, 2, np.float32))


def test_kernel_hints_from_the_decorator_and_from_options() -> None:
    @tile.kernel(num_ctas=2, occupancy=2)
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        z.store(tile.load_like(x, z))

    assert k.hints == TileHints(2, 2)
    zp = fl.empty(256, dtype=fl.f32).partition((128,))
    x = fl.zeros(256, dtype=fl.f32)
    text = k.inspect(zp, x, stage="tileir")
    assert "optimization_hints=<sm_90 = {num_cta_in_cga = 2, occupancy = 2}>" in text
    k4 = k.options(occupancy=4)
    assert k4.hints == TileHints(2, 4) and k.hints == TileHints(2, 2)
    assert "occupancy = 4" in k4.inspect(zp, x, stage="tileir")
    k8 = k.options(num_worker_warps=8)
    assert k8.hints == TileHints(2, 2, 8) and k.options(num_worker_warps=8) is k8
    assert "num_worker_warps_per_cta = 8" in k8.inspect(zp, x, stage="tileir")
    # No hints: no attribute at all.
    assert "optimization_hints" not in add.inspect(zp, x, x, stage="tileir")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_ctas": 3}, "`num_ctas` must be 1, 2, 4, 8 or 16, got 3"),
        ({"occupancy": 0}, "`occupancy` must be an integer from 1 to 32, got 0"),
        ({"occupancy": True}, "`occupancy` must be an integer from 1 to 32, got True"),
        ({"num_worker_warps": 3}, "`num_worker_warps` must be 1, 2, 4, 8, 16 or 32, got 3"),
    ],
)
def test_bad_kernel_hints_are_refused_at_decoration(kwargs: dict, message: str) -> None:
    with pytest.raises(fl.CompileError, match=message.replace("`", ".")) as info:

        @tile.kernel(**kwargs)
        def k(z: tile.Part[fl.f32]):
            z.store(tile.zeros((128,), fl.f32))

    # at this file's line, not inside the hints' dataclass (its generated __init__)
    assert info.value.loc is not None and info.value.loc.file == __file__
    with pytest.raises(fl.CompileError, match=message.replace("`", ".")) as info:
        add.options(**kwargs)
    assert info.value.loc is not None and info.value.loc.file == __file__


def test_load_hints_reach_the_bytecode() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
        z.store(tile.load_like(x, z, latency=3) + tile.load(y, z.index, z.shape, allow_tma=False))

    zp = fl.empty(256, dtype=fl.f32).partition((128,))
    x = fl.zeros(256, dtype=fl.f32)
    ir = k.inspect(zp, x, x, stage="ir")
    assert "latency=3" in ir and "allow_tma=False" in ir
    text = k.inspect(zp, x, x, stage="tileir")
    assert "optimization_hints = <sm_90 = {latency = 3}>" in text
    assert "optimization_hints = <sm_90 = {allow_tma = false}>" in text


def test_store_hints_reach_the_bytecode(cubin: Callable[..., bytes]) -> None:
    # As cuTile Python's `ct.store(..., latency=, allow_tma=)`: TileGym's rms_norm stores with
    # `allow_tma=False, latency=3` (+30% on the H200, its comments say).
    @tile.kernel
    def k(z: tile.Part[fl.f32], w: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        z.store(tile.load_like(x, z), latency=3)
        for t in w.tiles():
            t.store(tile.load_like(x, t) * 2.0, allow_tma=False)

    zp, wp = (fl.empty(256, dtype=fl.f32).partition((128,)) for _ in range(2))
    x = fl.arange(256, dtype=fl.f32)
    ir = k.inspect(zp, wp, x, stage="ir")
    assert "tile.store" in ir and "latency=3" in ir and "allow_tma=False" in ir
    text = k.inspect(zp, wp, x, stage="tileir")
    assert text.count("optimization_hints") == 2
    assert "optimization_hints = <sm_90 = {latency = 3}>" in text
    assert "optimization_hints = <sm_90 = {allow_tma = false}>" in text
    assert cubin(k, zp, wp, x)
    k(zp, wp, x)  # the simulator ignores hints
    assert zp.unpartition().numpy().tolist() == list(range(256))
    assert wp.unpartition().numpy().tolist() == [2.0 * i for i in range(256)]


def test_store_takes_only_the_hints() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        z.store(tile.load_like(x, z), padding=0)  # error: store

    zp = fl.empty(256, dtype=fl.f32).partition((128,))
    with pytest.raises(fl.CompileError, match="`store` takes one tile") as info:
        k(zp, fl.zeros(256, dtype=fl.f32))
    loc = info.value.loc
    assert loc is not None and loc.line == _line(k.func, "error: store")


def test_a_latency_out_of_range_points_at_it() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        z.store(tile.load_like(x, z, latency=11))  # error: latency

    zp = fl.empty(256, dtype=fl.f32).partition((128,))
    with pytest.raises(fl.CompileError, match="between 1 and 10, got 11") as info:
        k(zp, fl.zeros(256, dtype=fl.f32))
    loc = info.value.loc
    assert loc is not None and loc.line == _line(k.func, "error: latency")


def test_allow_tma_must_be_a_constant_bool() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], flag: fl.i32):
        z.store(tile.load_like(x, z, allow_tma=flag))  # error: allow_tma

    zp = fl.empty(256, dtype=fl.f32).partition((128,))
    with pytest.raises(fl.CompileError, match="compile-time True or False") as info:
        k(zp, fl.zeros(256, dtype=fl.f32), 1)
    loc = info.value.loc
    assert loc is not None and loc.line == _line(k.func, "error: allow_tma")


@pytest.mark.parametrize("name", ["exp", "tanh"])
def test_approx_reaches_the_bytecode_and_is_f32_only(name: str) -> None:
    """`tile.exp(x, approx=True)`, `tile.tanh(x, approx=True)`: the hardware's in the bytecode
    (tanh: tanh.approx.f32), the exact value on the simulator; f32 tiles only."""
    op, exact = getattr(tile, name), getattr(np, name)

    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        z.store(op(tile.load_like(x, z), approx=True) + op(tile.load_like(x, z)))

    zp = fl.empty(256, dtype=fl.f32).partition((128,))
    x = fl.asarray(np.linspace(-3, 3, 256, dtype=np.float32))
    text = k.inspect(zp, x, stage="tileir")
    found = [line for line in text.splitlines() if f" = {name} " in line]
    assert len(found) == 2 and sum("rounding<approx>" in line for line in found) == 1, found
    k(zp, x)  # the simulator computes the exact value for both
    np.testing.assert_allclose(zp.unpartition().numpy(), 2 * exact(x.numpy()), rtol=1e-6)

    @tile.kernel
    def h(z: tile.Part[fl.f16], x: tile.Tensor[fl.f16]):
        z.store(op(tile.load_like(x, z), approx=True))  # error: f16

    hp = fl.empty(256, dtype=fl.f16).partition((128,))
    with pytest.raises(fl.KernelTypeError, match="is for f32 tiles") as info:
        h(hp, fl.zeros(256, dtype=fl.f16))
    assert info.value.loc is not None and info.value.loc.line == _line(h.func, "error: f16")
