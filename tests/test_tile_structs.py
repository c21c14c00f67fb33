"""Struct parameters (tile/structs.py): a NamedTuple or dataclass of Tile parameters as one
kernel parameter, on the simulator; its checks (the borrow check by field, the launch's
instance, an unknown field); the bytecode the same as with the fields written out; and through
tileiras where it is installed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pytest

import fearless as fl
from fearless import tile


class Clamp(NamedTuple):
    lo: fl.f32
    hi: fl.f32
    x: tile.Tensor[fl.f32]


@dataclass(frozen=True)
class Scaled:
    y: tile.Part[fl.f32]
    s: fl.f32
    bias: tile.Tensor[fl.f32] | None
    TILE: tile.Const[int]


@tile.function
def clamped(t: Any, c: Clamp) -> Any:
    return tile.minimum(tile.maximum(t, c.lo), c.hi)


@tile.kernel
def clamp_scale(o: Scaled, c: Clamp):
    t = clamped(tile.load_like(c.x, o.y), c) * o.s
    if o.bias is not None:
        t = t + tile.load_like(o.bias, o.y)
    o.y.store(t + (o.TILE - o.TILE))


def _flat() -> tile.Kernel:
    """`clamp_scale` with its structs' fields written out (its name, which the bytecode
    holds, the same)."""

    @tile.kernel
    def clamp_scale(
        y: tile.Part[fl.f32],
        s: fl.f32,
        bias: tile.Tensor[fl.f32] | None,
        TILE: tile.Const[int],
        lo: fl.f32,
        hi: fl.f32,
        x: tile.Tensor[fl.f32],
    ):
        t = tile.minimum(tile.maximum(tile.load_like(x, y), lo), hi) * s
        if bias is not None:
            t = t + tile.load_like(bias, y)
        y.store(t + (TILE - TILE))

    return clamp_scale


def _x(n: int = 64) -> fl.Tensor:
    return fl.asarray(np.linspace(-2, 2, n, dtype=np.float32))


def test_fields_are_parameters_in_the_body_and_in_a_tile_function() -> None:
    x = _x()
    want = np.clip(x.numpy(), -1, 1) * 3
    y = fl.empty((64,), fl.f32)
    with y.partition((16,)) as yp:
        clamp_scale(Scaled(yp, 3.0, None, 16), Clamp(-1.0, 1.0, x))
        clamp_scale(Scaled(yp, 3.0, None, 16), Clamp(-1.0, 1.0, x))  # the prepared launch
    np.testing.assert_allclose(y.numpy(), want)
    bias = fl.asarray(np.arange(64, dtype=np.float32))
    with y.partition((16,)) as yp:
        clamp_scale(Scaled(yp, 3.0, bias, 16), Clamp(-1.0, 1.0, x))
    np.testing.assert_allclose(y.numpy(), want + np.arange(64))


def test_the_signature_names_each_field() -> None:
    with fl.empty((64,), fl.f32).partition((16,)) as yp:
        text = clamp_scale.inspect(Scaled(yp, 1.0, None, 16), Clamp(0.0, 1.0, _x()))
    assert "%o.y: Part[f32, tile=(16,)]" in text and "%c.x: Tensor[f32, 1d]" in text
    spec = tile.Spec((64,), fl.f32)
    signature = clamp_scale.signature_of_specs(
        (Scaled(spec.partition((16,)), fl.f32, None, 16), Clamp(fl.f32, fl.f32, spec))
    )
    assert [p.name for p in signature] == ["o.y", "o.s", "o.bias", "o.TILE", "c.lo", "c.hi", "c.x"]


def test_the_bytecode_is_that_of_the_fields_written_out() -> None:
    pytest.importorskip("cuda.tile")
    from fearless.backends.tileir import cuda_tile
    from fearless.backends.tileir.lower import lower_to_bytecode
    from fearless.runtime.target import current_target

    x = _x()
    with fl.empty((64,), fl.f32).partition((16,)) as yp:
        sig, _ = clamp_scale.signature_of(
            (Scaled(yp, 2.0, x, 16), Clamp(-1.0, 1.0, x)), current_target()
        )
        flat_kernel = _flat()
        flat, _ = flat_kernel.signature_of((yp, 2.0, x, 16, -1.0, 1.0, x), current_target())
    version = cuda_tile.bytecode_version()
    ours = lower_to_bytecode(clamp_scale.ir_for(sig), version, "sm_90")
    assert ours == lower_to_bytecode(flat_kernel.ir_for(flat), version, "sm_90")


def test_a_part_field_is_borrow_checked_by_its_name() -> None:
    host = np.zeros(64, np.float32)
    yp = fl.asarray(host).partition((16,))
    alias = fl.asarray(host)  # a second wrapper of the same memory
    with pytest.raises(fl.BorrowError, match=r"cannot borrow `o\.y` as mutable") as e:
        clamp_scale(Scaled(yp, 1.0, None, 16), Clamp(0.0, 1.0, alias))
    assert "`c.x`" in str(e.value)


def test_a_launch_must_pass_an_instance_of_the_struct() -> None:
    wrong = r"`c` is a `Clamp` and needs an instance"
    with (
        fl.empty((64,), fl.f32).partition((16,)) as yp,
        pytest.raises(fl.FearlessError, match=wrong) as e,
    ):
        clamp_scale(Scaled(yp, 1.0, None, 16), (0.0, 1.0, _x()))
    assert e.value.diagnostic.loc.line > 0
    assert "test_tile_structs.py" in e.value.diagnostic.loc.file


def test_an_unknown_field_names_the_close_one() -> None:
    @tile.kernel
    def wrong(o: Scaled, c: Clamp):
        o.y.store(tile.load_like(c.x, o.y) * c.low)

    with (
        fl.empty((64,), fl.f32).partition((16,)) as yp,
        pytest.raises(fl.CompileError, match="has no field `low`") as e,
    ):
        wrong(Scaled(yp, 1.0, None, 16), Clamp(0.0, 1.0, _x()))
    assert "c.lo" in (e.value.diagnostic.help or "")


def test_a_field_that_is_no_tile_parameter_is_refused() -> None:
    class Nested(NamedTuple):
        inner: Clamp

    @dataclass
    class Loose:
        n: str

    for cls, what in ((Nested, "field `inner` of `Nested` is a `Clamp`"), (Loose, "`Loose.n`")):

        @tile.kernel
        def k(o: tile.Part[fl.f32], w: Any):
            o.store(tile.zeros(o.shape, fl.f32))

        k.func.__annotations__["w"] = cls
        with (
            fl.empty((8,), fl.f32).partition((8,)) as op,
            pytest.raises(fl.CompileError, match=what),
        ):
            k(op, None)


def test_inspect_without_arguments_asks_for_them() -> None:
    with pytest.raises(fl.CompileError, match="has a struct parameter `o`"):
        clamp_scale.inspect()


def test_a_struct_kernel_compiles_through_tileiras(cubin: Any) -> None:
    x = _x()
    with fl.empty((64,), fl.f32).partition((16,)) as yp:
        assert cubin(clamp_scale, Scaled(yp, 2.0, x, 16), Clamp(-1.0, 1.0, x))
