"""The warning for Tile reductions over padding that changes their result (tile/padding_check.py)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import fearless as fl
from fearless import f32, tile
from fearless.abi import TileParam, array_align
from fearless.errors import PaddedReductionWarning
from support.tile_examples import ex
from support.tile_signatures import SIGNATURES


@tile.kernel
def softmax_zero_padded(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    rows = tile.load_like(x, out)
    e = tile.exp(rows - tile.max(rows, axis=1, keepdims=True))
    out.store(e / tile.sum(e, axis=1, keepdims=True))


@tile.kernel
def softmax_inf_padded(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    rows = tile.load_like(x, out, padding=-math.inf)
    e = tile.exp(rows - tile.max(rows, axis=1, keepdims=True))
    out.store(e / tile.sum(e, axis=1, keepdims=True))


@tile.kernel
def sum_of_inf_padding(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    rows = tile.load_like(x, out, padding=-math.inf).astype(fl.f64) * 2.0
    out.store(tile.broadcast_to(tile.sum(rows, axis=1, keepdims=True), out.shape).astype(fl.f32))


@tile.kernel
def min_masked(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    rows = tile.load_like(x, out)
    masked = tile.where(rows == 0.0, math.inf, rows)
    out.store(tile.broadcast_to(tile.min(masked, axis=1, keepdims=True), out.shape))


@tile.kernel
def scores_max(out: tile.Part[fl.f32], q: tile.Tensor[fl.f32], k: tile.Tensor[fl.f32],
               BN: tile.Const[int], MASK: tile.Const[bool]):  # fmt: skip
    """An attention's row maximum of q k^T over one tile of BN keys (zero-padded past k's
    end): the padded keys' scores are 0, which the max takes in unless masked."""
    qt = tile.load(q, (0, 0), (16, 16))
    kt = tile.load(k, (0, 0), (BN, 16))
    s = tile.mma(qt, kt.transpose(), tile.zeros((16, BN), fl.f32))
    if MASK:
        s = tile.where(tile.arange(BN, fl.i32)[None, :] < k.shape[0], s, -math.inf)
    out.store(tile.broadcast_to(tile.max(s, axis=1, keepdims=True), (16, 16)))


@tile.kernel
def padded_with(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], KIND: tile.Const[int],
                P: tile.Const[float]):  # fmt: skip
    """A row's sum (KIND 0), product (1) or max (2) of a tile loaded with `padding=P`, which
    Tile IR emulates for P other than 0, -0.0, +-inf and nan."""
    rows = tile.load_like(x, out, padding=P)
    if KIND == 0:
        r = tile.sum(rows, axis=1, keepdims=True)
    elif KIND == 1:
        r = tile.prod(rows, axis=1, keepdims=True)
    else:
        r = tile.max(rows, axis=1, keepdims=True)
    out.store(tile.broadcast_to(r, out.shape))


def _sig(tile_shape: tuple[int, ...], shape: tuple[int, ...]) -> tuple[TileParam, ...]:
    return (
        TileParam("out", "part", f32, 2, tile_shape, align=array_align(0, shape, 4)),
        TileParam("x", "tensor", f32, 2, align=array_align(0, shape, 4)),
    )


def _warnings(kernel: tile.Kernel, sig: tuple[TileParam, ...]) -> list[str]:
    """The warnings of compiling `kernel` for `sig` (the padding the compile is sure of)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        kernel.ir_for(sig)
    return [str(w.message) for w in seen if issubclass(w.category, PaddedReductionWarning)]


def _launch_warnings(
    kernel: tile.Kernel, tile_shape: tuple[int, ...], shape: tuple[int, ...]
) -> list[str]:
    """The warnings of launching `kernel` on the simulator (compile and launch)."""
    fl.set_target("sim")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        part = fl.empty(shape).partition(tile_shape)
        kernel(part, fl.asarray(np.random.default_rng(0).random(shape, dtype=np.float32)))
        part.unpartition()
    return [str(w.message) for w in seen if issubclass(w.category, PaddedReductionWarning)]


def test_a_max_over_zero_padding_warns_at_its_line() -> None:
    (msg,) = _launch_warnings(softmax_zero_padded, (1, 128), (4, 100))
    assert "test_tile_padding_warning.py:22:" in msg
    assert "`tile.max` takes in padding 0.0" in msg and "`padding=-math.inf`" in msg


def test_a_sum_over_inf_padding_warns_through_elementwise_ops() -> None:
    (msg,) = _launch_warnings(sum_of_inf_padding, (1, 128), (4, 100))
    assert "`tile.sum` takes in padding -math.inf" in msg and "`padding=0`" in msg


def test_padding_the_compile_is_sure_of_warns_when_it_compiles() -> None:
    # 101 is odd (its divisor 1 is exact under the 4-element cap): no tile of 128 divides it
    (msg,) = _warnings(softmax_zero_padded, _sig((1, 128), (4, 101)))
    assert "`tile.max` takes in padding 0.0" in msg
    # 100 leaves the compile undecided (divisible by 4, the most it knows): no warning yet
    assert _warnings(softmax_zero_padded, _sig((1, 128), (4, 100))) == []


def test_each_launch_decides_with_its_extents() -> None:
    # one compile (extents mod 4 alike), three launches: only the extent 96 leaves padding
    assert _launch_warnings(softmax_zero_padded, (1, 64), (4, 128)) == []
    assert len(_launch_warnings(softmax_zero_padded, (1, 64), (4, 96))) == 1
    assert _launch_warnings(softmax_zero_padded, (1, 64), (4, 64)) == []


def test_the_right_padding_does_not_warn() -> None:
    assert _warnings(softmax_inf_padded, _sig((1, 128), (4, 100))) == []


def test_extents_the_tile_divides_do_not_warn() -> None:
    # 100 is a multiple of 4 (the specialisation knows it): no tile passes the end.
    assert _warnings(softmax_zero_padded, _sig((1, 4), (4, 100))) == []
    # Padded rows (axis 0) are dropped at the store; the reduction runs along axis 1.
    assert _warnings(softmax_zero_padded, _sig((128, 4), (100, 100))) == []


def test_padding_masked_to_the_identity_does_not_warn() -> None:
    # the compare and the where are followed: the padded 0.0 becomes inf, min's identity
    assert _warnings(min_masked, _sig((1, 128), (4, 100))) == []


@tile.kernel
def count_below(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    rows = tile.load_like(x, out)
    below = tile.sum(tile.where(rows < 5.0, 1.0, 0.0), axis=1, keepdims=True)
    out.store(tile.broadcast_to(below, out.shape))


@tile.kernel
def first_smallest(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    rows = tile.load_like(x, out)
    at = tile.argmin(rows, axis=1, keepdims=True).astype(fl.f32)
    out.store(tile.broadcast_to(at, out.shape))


@tile.kernel
def first_index_of_max(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    rows = tile.load_like(x, out, padding=-math.inf)
    m = tile.max(rows, axis=1, keepdims=True)
    cols = tile.arange(out.shape[1])[None, :]
    at = tile.min(tile.where(rows == m, cols, out.shape[1]), axis=1, keepdims=True)
    out.store(tile.broadcast_to(at.astype(fl.f32), out.shape))


def test_a_sentinel_a_where_chooses_for_a_min_does_not_warn() -> None:
    """`tile.min(tile.where(v == m, cols, N))`, the first index of the max: the padding holds
    N, past every column, on purpose (tests/test_tile_heldout.py's argmax kernels)."""
    assert _launch_warnings(first_index_of_max, (1, 128), (4, 100)) == []


def test_a_count_through_a_comparison_and_a_where_warns() -> None:
    """`rows < 5.0` is True on zero padding, so the where's 1.0 counts every padded element
    (found by a red-team helper, 2026-12-07: no warning, a silently larger count)."""
    (msg,) = _launch_warnings(count_below, (1, 128), (4, 100))
    assert "`tile.sum` takes in padding 1.0" in msg


def test_an_argmin_over_zero_padding_warns_at_its_line() -> None:
    """argmin's first step is a min over the tile: zero padding below every value of 1..n
    would give an index inside the padding."""
    (msg,) = _launch_warnings(first_smallest, (1, 128), (4, 100))
    assert "test_tile_padding_warning.py:" in msg and "`padding=math.inf`" in msg


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_the_examples_do_not_warn(name: str) -> None:
    kernel = getattr(ex, name.partition(":")[0])
    assert _warnings(kernel, SIGNATURES[name]) == []


def test_the_scores_of_padded_keys_through_an_mma_warn_unless_masked() -> None:
    """q k^T with k's rows zero-padded: those keys' scores are the accumulator's 0 (a padded
    row of k adds nothing), so a row max takes them in, the classic attention bug."""
    rng = np.random.default_rng(1)
    q = fl.asarray(-rng.random((16, 16), dtype=np.float32))  # every real score is negative
    said = {}
    for keys, mask, warned in ((20, False, True), (20, True, False), (32, False, False)):
        k = fl.asarray(rng.random((keys, 16), dtype=np.float32))
        out = fl.empty((16, 16))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with out.partition((16, 16)) as part:
                scores_max(part, q, k, 32, mask)
        msgs = [str(w.message) for w in seen if issubclass(w.category, PaddedReductionWarning)]
        assert bool(msgs) == warned, (keys, mask, msgs)
        said[keys, mask] = msgs
        got = out.numpy()[:, 0]
        want = (q.numpy() @ k.numpy().T).max(axis=1)
        # the warning's reason: unmasked, the padded keys' 0 beats every real score
        assert np.allclose(got, want, atol=1e-5) == (not warned)
    (msg,) = said[20, False]
    assert "test_tile_padding_warning.py:" in msg and "`tile.max` takes in padding 0.0" in msg
    assert "tile.where(cols < n, v, -math.inf)" in msg


def test_an_emulated_padding_warns_under_a_sum_or_product_it_is_not_the_identity_of() -> None:
    """`padding=1.0` is a zero-padded load and a `tile.where` on its in-bounds mask: the
    check reads the padded elements as 1.0, which a sum takes in (a product does not), and
    as a value the user chose, which a max is meant to take in."""

    def said(kind: str, pad: float) -> list[str]:
        code = ("sum", "prod", "max").index(kind)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = fl.empty((4, 100))
            with out.partition((1, 128)) as part:
                padded_with(part, fl.asarray(np.ones((4, 100), np.float32)), code, pad)
        return [str(w.message) for w in seen if issubclass(w.category, PaddedReductionWarning)]

    (msg,) = said("sum", 1.0)
    assert "`tile.sum` takes in padding 1.0" in msg and "`padding=0`" in msg
    assert said("prod", 1.0) == [] and said("max", 1.0) == [] and said("sum", 0.0) == []
    (msg,) = said("prod", 2.0)
    assert "`tile.prod` takes in padding 2.0" in msg
