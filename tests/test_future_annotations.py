"""Kernel factories in a module with `from __future__ import annotations`: the annotations are
strings, and a factory's dtype (`tile.Part[dt]`) is a local of the factory that the kernel does
not capture. The decorators keep the factory's locals (frontend/source.remember_scope), so
they resolve on both tracks, and a name that exists nowhere is still E0599 at its parameter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import simt, tile


def make_tile_scale(dt: Any) -> Any:
    @tile.kernel
    def scale(out: tile.Part[dt], x: tile.Tensor[dt], s: fl.f32):
        out.store((tile.load_like(x, out).astype(fl.f32) * s).astype(dt))

    return scale


def make_simt_scale(dt: Any) -> Any:
    @simt.kernel
    def scale(x: simt.Slice[dt], out: simt.DisjointSlice[dt]) -> None:
        i = simt.thread.index_1d()
        out[i] = x[i] + x[i]

    return scale


@pytest.mark.parametrize("dt", [fl.f32, fl.f16])
def test_a_tile_factory_resolves_its_dtype(dt: Any) -> None:
    x = np.arange(64).astype(dt.np)
    part = fl.empty(64, dtype=dt).partition((32,))
    make_tile_scale(dt)(part, fl.asarray(x), 2.0)
    np.testing.assert_array_equal(part.unpartition().numpy(), (x * 2).astype(dt.np))


@pytest.mark.parametrize("dt", [fl.f32, fl.i32])
def test_a_simt_factory_resolves_its_dtype(dt: Any) -> None:
    x = np.arange(64).astype(dt.np)
    out = fl.empty(64, dtype=dt)
    make_simt_scale(dt)[1, 64](fl.asarray(x), out)
    np.testing.assert_array_equal(out.numpy(), x + x)


def test_an_unknown_name_is_still_an_error_at_its_parameter() -> None:
    def factory() -> Any:
        @tile.kernel
        def k(out: tile.Part[nowhere], x: tile.Tensor[fl.f32]):  # type: ignore[name-defined]  # noqa: F821
            out.store(tile.load_like(x, out))

        return k

    with pytest.raises(fl.CompileError, match="cannot resolve the annotation") as e:
        factory()(fl.empty(8).partition((8,)), fl.zeros(8))
    assert e.value.code == "E0599" and e.value.loc is not None and e.value.loc.file == __file__
