"""Optional Tile parameters (`tile.Tensor[T] | None`, and so for Atomic and Part): a launch that
passes None compiles the kernel without the parameter, the body sees the constant None (`if m is
not None:` folds), the two forms are two specialisations and two prepared launches, and None for
a required array is an error that says how to make it optional. An optional Part is an output a
launch may leave out: the grid comes from the Parts given, and a launch that gives none has no
grid."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import tile
from fearless.runtime.target import Target
from fearless.tile.kernel import Kernel


@tile.function
def scaled(x, m, z):
    """x's tile, times m's where m is given (compile-time)."""
    y = tile.load_like(x, z)
    if m is not None:
        y = y * tile.load_like(m, z)
    return y


@tile.kernel
def scale_or_shift(
    z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], m: tile.Tensor[fl.f32] | None, b: fl.f32
):
    y = scaled(x, m, z)
    if m is None:
        y = y + b
    z.store(y)


@tile.kernel
def first_optional(z: tile.Part[fl.f32], m: tile.Tensor[fl.f32] | None, x: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z))


@tile.kernel
def with_stats(
    stats: tile.Part[fl.f32] | None, z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]
):  # fmt: skip
    """z = 2 x, and where asked (compile-time) each tile's x + 1 in `stats`: an optional output
    declared before the one that is always there."""
    y = tile.load_like(x, z)
    z.store(y * 2.0)
    if stats is not None:
        stats.store(y + 1.0)


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    for k in (scale_or_shift, first_optional, with_stats):
        k._dispatch = None


def _slow_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the launches that went the slow way (through `signature_of`)."""
    calls: list[int] = []
    real = Kernel.signature_of

    def counted(self: Kernel, args: tuple[Any, ...], target: Target) -> Any:
        calls.append(1)
        return real(self, args, target)

    monkeypatch.setattr(Kernel, "signature_of", counted)
    return calls


def _run(m: Any) -> np.ndarray:
    zp = fl.zeros(300).partition((128,))
    scale_or_shift(zp, np.arange(300, dtype=np.float32), m, 1.5)
    return zp.unpartition().numpy()


def test_the_annotation_reads_as_written() -> None:
    assert repr(tile.Tensor[fl.f32] | None) == "tile.Tensor[f32] | None"
    assert repr(None | tile.Atomic[fl.i32]) == "tile.Atomic[i32] | None"
    assert repr(tile.Part[fl.f32] | None) == "tile.Part[f32] | None"
    with pytest.raises(fl.KernelTypeError, match="unites only with None") as e:
        tile.Tensor[fl.f32] | int
    assert e.value.loc is not None and e.value.loc.line == _line_of("tile.Tensor[fl.f32] | int")
    with pytest.raises(fl.KernelTypeError, match=r"takes a dtype such as fl\.f32"):
        tile.Part[int]
    with pytest.raises(fl.KernelTypeError, match="takes int, float or bool"):
        tile.Const[str]


def _line_of(text: str) -> int:
    """The line of this file that holds `text` (the first)."""
    lines = Path(__file__).read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def test_the_simulator_runs_both_forms() -> None:
    x = np.arange(300, dtype=np.float32)
    m = np.linspace(-2.0, 2.0, 300, dtype=np.float32)
    np.testing.assert_array_equal(_run(None), x + np.float32(1.5))
    np.testing.assert_array_equal(_run(m), x * m)
    np.testing.assert_array_equal(_run(fl.asarray(m)), x * m)


def test_the_absent_form_has_no_parameter_for_it() -> None:
    zp = fl.zeros(300).partition((128,))
    x = np.zeros(300, np.float32)
    absent, _ = scale_or_shift.signature_of((zp, x, None, 1.0), Target.SIM)
    present, _ = scale_or_shift.signature_of((zp, x, x, 1.0), Target.SIM)
    assert absent[2].absent and not present[2].absent and absent != present
    assert [v.name for v in scale_or_shift.ir_for(absent).fn.params] == ["z", "x", "b"]
    assert [v.name for v in scale_or_shift.ir_for(present).fn.params] == ["z", "x", "m", "b"]


def test_the_two_forms_compile_to_different_cubins(cubin: Callable[..., bytes]) -> None:
    zp = fl.zeros(300).partition((128,))
    x = fl.zeros(300)
    absent, present = cubin(scale_or_shift, zp, x, None, 1.0), cubin(scale_or_shift, zp, x, x, 1.0)
    assert absent and present and absent != present


def test_none_for_a_required_tensor_says_how_to_make_it_optional() -> None:
    zp = fl.zeros(300).partition((128,))
    with pytest.raises(fl.KernelTypeError) as info:
        scale_or_shift(zp, None, None, 1.0)
    text = str(info.value)
    assert "argument `x` of `scale_or_shift` is None" in text
    assert "`x: tile.Tensor[f32] | None`" in text
    assert info.value.loc is not None and info.value.loc.file == __file__


def test_a_second_launch_with_none_is_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    slow = _slow_calls(monkeypatch)
    x = np.arange(300, dtype=np.float32)
    _run(None)
    _run(None)
    assert len(slow) == 1
    _run(x)  # present: another specialisation, prepared once
    _run(x)
    assert len(slow) == 2
    warm = scale_or_shift._dispatch
    assert warm is not None and len(warm.entries) == 2
    zp = fl.zeros(300).partition((128,))
    entry, _, payload = warm.lookup((zp, x, None, 2.0), Target.SIM)
    assert entry is not None and payload[2] is None and not entry.signature[2].is_array


def test_the_borrow_check_still_sees_the_arrays_after_an_absent_one() -> None:
    """An absent array keeps the indices of the arrays after it (its range is empty): the
    output aliasing the last input is refused on the warm path as on the slow one."""
    host = np.zeros(256, np.float32)
    zp = fl.asarray(host).partition((128,))
    x = fl.zeros(256)
    first_optional(zp, None, x)
    first_optional(zp, None, x)  # warm
    warm = first_optional._dispatch
    assert warm is not None
    alias = fl.asarray(host)  # a second handle on z's storage, of the same key as x
    assert warm.lookup((zp, None, alias), Target.SIM)[1] in warm.entries
    with pytest.raises(fl.BorrowError, match="cannot borrow `z` as mutable"):
        first_optional(zp, None, alias)


def _stats_run(with_out: bool) -> tuple[np.ndarray, np.ndarray | None]:
    x = np.arange(300, dtype=np.float32)
    z, st = fl.zeros(300), fl.zeros(300)
    with z.partition((128,)) as zp, st.partition((128,)) as sp:
        with_stats(sp if with_out else None, zp, x)
    return z.numpy(), (st.numpy() if with_out else None)


def test_an_optional_output_is_written_only_where_given(monkeypatch: pytest.MonkeyPatch) -> None:
    slow = _slow_calls(monkeypatch)
    x = np.arange(300, dtype=np.float32)
    for _ in range(2):  # the second of each form is warm
        z, st = _stats_run(True)
        np.testing.assert_array_equal(z, 2 * x)
        np.testing.assert_array_equal(st, x + 1)
        z, none = _stats_run(False)
        np.testing.assert_array_equal(z, 2 * x)
        assert none is None
    assert len(slow) == 2
    zp = fl.zeros(300).partition((128,))
    absent, _ = with_stats.signature_of((None, zp, x), Target.SIM)
    assert absent[0].absent and [v.name for v in with_stats.ir_for(absent).fn.params] == ["z", "x"]


def test_optional_outputs_still_share_one_grid_and_need_one() -> None:
    x = np.arange(300, dtype=np.float32)
    zp, other = fl.zeros(300).partition((128,)), fl.zeros(300).partition((64,))
    with pytest.raises(fl.LaunchContractError, match="the partitions disagree on the grid"):
        with_stats(other, zp, x)
    with pytest.raises(fl.LaunchContractError, match="every optional one is None") as e:
        only_optional(None, x)
    assert e.value.loc is not None and e.value.loc.file == __file__
    with pytest.raises(fl.KernelTypeError, match="argument `z` of `with_stats` is None"):
        with_stats(other, None, x)
    with pytest.raises(fl.BorrowError, match="cannot borrow"):  # the same tensor twice
        with_stats(zp, zp, x)


@tile.kernel
def only_optional(z: tile.Part[fl.f32] | None, x: tile.Tensor[fl.f32]):
    if z is not None:
        z.store(tile.load_like(x, z))


def test_an_optional_output_compiles_in_both_forms(cubin: Callable[..., bytes]) -> None:
    zp, sp, x = fl.zeros(300).partition((128,)), fl.zeros(300).partition((128,)), fl.zeros(300)
    absent, present = cubin(with_stats, None, zp, x), cubin(with_stats, sp, zp, x)
    assert absent and present and absent != present
