"""Tuple parameters (tile/tuples.py) and `part.tiles(offset=)` (tile/persistent.py) on the
simulator, and through tileiras where it is installed; `fearless.ops.group_gemm`'s one launch
over every group (ops/kernels_group_gemm.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops, tile
from fearless.ops import functional as F


@tile.kernel
def scale_each(cs: tuple[tile.Part[fl.f32], ...], xs: tuple[tile.Tensor[fl.f32], ...], s: fl.f32):
    done = 0
    for g in tile.static_iter(range(len(cs))):
        c = cs[g]
        for t in c.tiles(offset=done):
            t.store(tile.load_like(xs[g], t) * s)
        done = done + tile.num_tiles(c, 0, c.shape)


@tile.kernel
def owner_of_each(cs: tuple[tile.Part[fl.i32], ...], n: int):
    """Each tile of every Part holds the linear id of the block that wrote it."""
    done = 0
    for g in tile.static_iter(range(len(cs))):
        c = cs[g]
        for t in c.tiles(offset=done + n):
            b = tile.bid(0)
            t.store(tile.full(t.shape, 0, fl.i32) + b)
        done = done + tile.num_tiles(c, 0, c.shape)


@tile.kernel
def add_pairs(cs: tuple[tile.Part[fl.f32], ...], xs: tuple[tile.Tensor[fl.f32], ...]):
    for g in tile.static_iter(range(len(cs))):
        c = cs[g]
        c.store(tile.load_like(xs[g], c) + 1.0)


def _arange(n: int) -> fl.Tensor:
    return fl.asarray(np.arange(n, dtype=np.float32))


def test_a_tuple_parameter_takes_a_list_of_arrays_of_any_lengths() -> None:
    xs = [_arange(12), _arange(20), _arange(5)]
    outs = [fl.empty((12,), fl.f32), fl.empty((20,), fl.f32), fl.empty((5,), fl.f32)]
    parts = tuple(o.partition((4,)) for o in outs)
    scale_each.launch(3, parts, xs, 2.0)
    for p, x in zip(parts, xs, strict=True):
        np.testing.assert_array_equal(p.unpartition().numpy(), 2 * x.numpy())
    # another length is another specialisation, beside the first
    one = fl.empty((7,), fl.f32).partition((8,))
    scale_each.launch(2, (one,), (_arange(7),), 3.0)
    np.testing.assert_array_equal(one.unpartition().numpy(), 3 * np.arange(7))
    assert set(scale_each._flattening.views) == {(3, 3), (1, 1)}  # type: ignore[union-attr]


@pytest.mark.parametrize(("grid", "n"), [(1, 0), (3, 0), (4, 5), (7, -2), (16, 2**31 - 1)])
def test_an_offset_walk_gives_every_tile_to_exactly_one_block_in_turn(grid: int, n: int) -> None:
    """Block b starts at (b - offset) mod G: every tile is written, by one block, and the
    groups together are dealt round-robin as one list (offsets of any sign and size)."""
    sizes = [5, 9, 2, 13]  # tiles per Part (tiles of 1 element)
    outs = [fl.empty((k,), fl.i32) for k in sizes]
    parts = tuple(o.partition((1,)) for o in outs)
    owner_of_each.launch(grid, parts, n)
    owners = np.concatenate([p.unpartition().numpy() for p in parts])
    want = (np.arange(owners.size) + n) % grid
    np.testing.assert_array_equal(owners, want)


def test_a_plain_call_takes_the_grid_of_a_tuple_of_parts() -> None:
    outs = [fl.empty((8, 4), fl.f32) for _ in range(2)]
    parts = tuple(o.partition((2, 4)) for o in outs)
    add_pairs(parts, [fl.asarray(np.ones((8, 4), np.float32)) for _ in range(2)])
    for p in parts:
        np.testing.assert_array_equal(p.unpartition().numpy(), np.full((8, 4), 2.0))


def test_two_elements_of_a_tuple_of_parts_that_share_memory_are_refused_by_name() -> None:
    out = fl.empty((16,), fl.f32)
    first = out.partition((4,))
    with pytest.raises(fl.FearlessError) as info:
        scale_each.launch(2, (first, first), [_arange(16), _arange(16)], 1.0)
    assert "cs[0]" in str(info.value) and "cs[1]" in str(info.value)


def test_a_tuple_element_is_checked_as_its_own_parameter() -> None:
    part = fl.empty((4,), fl.f32).partition((4,))
    with pytest.raises(fl.FearlessError, match=r"`xs\[1\]` has element type f64"):
        scale_each.launch(1, (part, part), [_arange(4), np.zeros(4)], 1.0)
    part.unpartition()


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        (None, "needs a tuple or list of at least one array, got NoneType"),
        ((), "needs a tuple or list of at least one array, got an empty one"),
    ],
)
def test_a_tuple_parameter_refuses_what_is_no_tuple_of_arrays(arg: Any, message: str) -> None:
    part = fl.empty((4,), fl.f32).partition((4,))
    with pytest.raises(fl.FearlessError, match=message) as info:
        scale_each.launch(1, (part,), arg, 1.0)
    assert info.value.loc is not None and info.value.loc.file == __file__  # the user's line
    part.unpartition()


def test_a_tuple_kernel_names_its_own_parameters_in_arity_and_keyword_errors() -> None:
    with pytest.raises(fl.FearlessError, match=r"takes 3 arguments \(cs, xs, s\) but 2"):
        scale_each.launch(1, (), ())
    with pytest.raises(fl.FearlessError, match=r"in order: scale_each\(cs, xs, s\)"):
        scale_each(cs=())


def test_inspect_without_arguments_asks_for_them_and_with_them_names_the_elements() -> None:
    with pytest.raises(fl.CompileError, match="has a tuple parameter `cs`: inspect it with"):
        scale_each.inspect()
    parts = (fl.empty((8,), fl.f32).partition((4,)),)
    text = scale_each.inspect(parts, [_arange(8)], 1.0)
    assert "%cs[0]: Part[f32, tile=(4,)]" in text and "%xs[0]: Tensor[f32, 1d]" in text
    parts[0].unpartition()


def test_specs_of_a_tuple_parameter_are_a_tuple_of_specs() -> None:
    spec = tile.Spec((256,), fl.f32)
    signature = scale_each.signature_of_specs(
        ((spec.partition((64,)), spec.partition((128,))), (spec, spec), fl.f32)
    )
    assert [p.name for p in signature] == ["cs[0]", "cs[1]", "xs[0]", "xs[1]", "s"]


def test_a_tuple_kernel_compiles_through_tileiras(cubin: Any) -> None:
    parts = tuple(fl.empty((n,), fl.f32).partition((16,)) for n in (64, 200))
    assert cubin(scale_each, parts, [_arange(64), _arange(200)], 2.0)
    for p in parts:
        p.unpartition()


# ----------------------------------------------------------------------- ops.group_gemm


def _groups(rng: np.random.Generator, shapes: list[tuple[int, int, int]], dt: Any) -> Any:
    As = [rng.standard_normal((m, k)).astype(dt) for m, k, _ in shapes]
    Bs = [rng.standard_normal((k, n)).astype(dt) for _, k, n in shapes]
    return As, Bs


def test_group_gemm_runs_every_group_in_one_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    launches: list[int] = []
    real = F.group_gemm_tuned
    monkeypatch.setattr(F, "group_gemm_tuned", lambda *a, **k: (launches.append(1), real(*a, **k)))
    rng = np.random.default_rng(0)
    As, Bs = _groups(rng, [(70, 40, 50), (33, 64, 17), (128, 32, 96), (0, 8, 8)], np.float16)
    got = ops.group_gemm(As, Bs)
    assert launches == [1]
    for c, a, b in zip(got, As, Bs, strict=True):
        want = a.astype(np.float32) @ b.astype(np.float32)
        assert c.shape == want.shape and c.dtype == np.float16
        np.testing.assert_allclose(c.astype(np.float32), want, rtol=1e-2, atol=2e-2)


def test_group_gemm_launches_groups_of_four(monkeypatch: pytest.MonkeyPatch) -> None:
    launches: list[int] = []
    real = F.group_gemm_tuned
    monkeypatch.setattr(
        F, "group_gemm_tuned", lambda a_s, *r, **k: (launches.append(len(a_s)), real(a_s, *r, **k))
    )
    rng = np.random.default_rng(1)
    As, Bs = _groups(rng, [(8, 16, 8)] * (2 * F.GROUPS_PER_LAUNCH + 1), np.float32)
    for c, a, b in zip(ops.group_gemm(As, Bs), As, Bs, strict=True):
        np.testing.assert_allclose(c, a @ b, rtol=1e-2, atol=1e-2)
    assert launches == [4, 4, 1]


def test_group_gemm_of_a_group_past_one_wave_of_tiles_is_one_matmul_per_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group with more (128, 128) tiles than the GPU has SMs (4 on the simulator) fills the
    GPU alone: matmul's configurations run it faster than the group kernel's."""
    monkeypatch.setattr(F, "group_gemm_tuned", lambda *a, **k: pytest.fail("a group launch"))
    rng = np.random.default_rng(2)
    As, Bs = _groups(rng, [(8, 16, 8), (600, 16, 128)], np.float32)
    for c, a, b in zip(ops.group_gemm(As, Bs), As, Bs, strict=True):
        np.testing.assert_allclose(c, a @ b, rtol=1e-2, atol=1e-2)


def test_group_gemm_of_mixed_dtypes_is_one_matmul_per_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(F, "group_gemm_tuned", lambda *a, **k: pytest.fail("a group launch"))
    rng = np.random.default_rng(1)
    As, Bs = _groups(rng, [(8, 16, 8), (8, 16, 8)], np.float32)
    As[1] = As[1].astype(np.float16)
    with pytest.raises(fl.FearlessError, match="needs both operands of one dtype"):
        ops.group_gemm(As, Bs)  # the second group's matmul says what is wrong


TUPLE_FILE = """
import fearless as fl
from fearless import tile


@tile.kernel
def scale_each(cs: tuple[tile.Part[fl.f32], ...], xs: tuple[tile.Tensor[fl.f32], ...]):
    for g in tile.static_iter(range(len(cs))):
        c = cs[g]
        for t in c.tiles():
            t.store(tile.load_like(xs[g], t))


spec = tile.Spec((256,), fl.f32)
scale_each.specialise((spec.partition((64,)), spec.partition((128,))), (spec, spec))
"""


def test_the_cli_inspects_a_tuple_kernel_at_its_declared_specialisation(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from fearless.cli.main import main

    path = tmp_path / "tuples.py"
    path.write_text(TUPLE_FILE)
    assert main(["inspect", f"{path}::scale_each"]) == 0
    out = capsys.readouterr().out
    assert "%cs[0]: Part[f32, tile=(64,)], %cs[1]: Part[f32, tile=(128,)]" in out


def test_group_gemm_of_a_0d_array_is_a_fearless_error_not_an_index_error() -> None:
    want = r"`fearless\.ops\.group_gemm` multiplies As\[0\] @ Bs\[0\] as "
    want += r"\(M, K\) @ \(K, N\), got \(\)"
    with pytest.raises(fl.FearlessError, match=want):
        ops.group_gemm([np.array(1.0, np.float32)], [np.ones((2, 2), np.float32)])


@tile.kernel
def twice_alike(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], n: int):
    """Two walks with one offset, the second in a loop: every block deals the tiles alike."""
    for t in z.tiles(offset=n):
        t.store(tile.load_like(x, t))
    for _ in range(2):
        for t in z.tiles(offset=n):
            t.store(tile.load_like(x, t) * 2.0)


def test_walks_that_deal_the_tiles_alike_are_accepted() -> None:
    """check_walks (tile/persistent.py) refuses walks whose shares could meet
    (tests/compile_fail/tile_tiles_*.py); a Part walked again with the same offset, a
    parameter converted anew at each walk, on every trip of a loop, is not one of them."""
    z = fl.zeros((40,), fl.f32).partition((8,))
    twice_alike.launch(3, z, _arange(40), 7)
    np.testing.assert_array_equal(z.unpartition().numpy(), 2 * np.arange(40))
