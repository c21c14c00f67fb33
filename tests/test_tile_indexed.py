"""`tile.gather`, `tile.scatter` and the Tile atomics on `tile.Atomic[T]` parameters (issue 11):
the simulator against NumPy, the safety rules at the user's line, and the bytecode through
tileiras."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import config, tile
from support.tile_indexed_kernels import (
    check_half_tiles,
    check_tile_bits,
    column_sums,
    float_sums,
    gather_masked,
    half_tiles,
    histogram,
    old_values,
    permute_into,
    relaxed_tile_sums,
    reverse,
    take_rows,
    take_tickets,
    tile_bits,
)


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


def test_histogram_counts_every_value_and_drops_the_outside_ones() -> None:
    x = np.random.default_rng(0).integers(-3, 20, 256).astype(np.int32)
    counts = fl.zeros(16, dtype=fl.i32)
    histogram.launch(4, fl.asarray(x), counts, 64)
    want = np.bincount(x[(x >= 0) & (x < 16)], minlength=16)
    assert np.array_equal(counts.numpy(), want)


def test_gather_reads_rows_and_pads_the_outside_ones() -> None:
    x = np.random.default_rng(1).standard_normal((10, 20)).astype(np.float32)
    rows = np.array([3, 0, 9, 12, -1, 5, 7, 2], np.int32)
    part = fl.empty((8, 20)).partition((4, 16))
    take_rows(part, fl.asarray(x), fl.asarray(rows))
    want = np.array([x[r] if 0 <= r < 10 else np.full(20, -1, np.float32) for r in rows])
    assert np.array_equal(part.unpartition().numpy(), want)


def test_gather_with_a_mask() -> None:
    x = np.arange(64, dtype=np.float32)
    part = fl.empty(32).partition((8,))
    gather_masked(part, fl.asarray(x), 20)
    k = np.arange(32)
    assert np.array_equal(part.unpartition().numpy(), np.where(k < 20, 2.0 * k, 0.0))


def test_scatter_writes_a_permutation_but_the_masked_slot() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal(64).astype(np.float32)
    perm = np.concatenate([rng.permutation(64), [70, -5]])[:64].astype(np.int32)
    out = fl.full(64, np.nan)
    permute_into.launch(4, out, fl.asarray(x), fl.asarray(perm))
    want = np.full(64, np.nan, np.float32)
    keep = perm != 3
    want[perm[keep]] = x[keep]
    np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize(
    ("kind", "fn"),
    [
        (0, np.maximum),
        (1, np.minimum),
        (2, lambda a, v: v),
        (3, np.bitwise_and),
        (4, np.bitwise_or),
        (5, np.bitwise_xor),
        (6, lambda a, v: a + v),
    ],
)
def test_atomics_return_the_old_values_in_order(kind: int, fn: object) -> None:
    upd = np.random.default_rng(kind).integers(-50, 50, 16).astype(np.int32)
    start = np.array([5, -7, 0, 12], np.int32)
    a = fl.asarray(start.copy())
    old = fl.empty(16, dtype=fl.i32).partition((16,))
    old_values(old, a, fl.asarray(upd), kind)
    cur = start.copy()
    want = np.empty(16, np.int32)
    for n, v in enumerate(upd):  # the simulator's order: row-major
        want[n] = cur[n % 4]
        cur[n % 4] = fn(cur[n % 4], v)  # type: ignore[operator]
    assert np.array_equal(old.unpartition().numpy(), want)
    assert np.array_equal(a.numpy(), cur)


def test_cas_hands_out_distinct_tickets() -> None:
    tickets = fl.empty(6, dtype=fl.i32).partition((1,))
    counter = fl.zeros(1, dtype=fl.i32)
    take_tickets(tickets, counter)
    assert sorted(tickets.unpartition().numpy().tolist()) == list(range(6))
    assert counter.numpy()[0] == 6


def test_float_atomic_adds_in_f32_and_bf16() -> None:
    x = np.random.default_rng(3).standard_normal(256).astype(np.float32)
    total, half = fl.zeros(1), fl.zeros(2, dtype=fl.bf16)
    float_sums.launch(4, total, half, fl.asarray(x))
    np.testing.assert_allclose(total.numpy()[0], x.sum(), rtol=1e-5)
    got = half.numpy().astype(np.float32)  # ml_dtypes' bfloat16
    np.testing.assert_allclose(got, [x[0::2].sum(), x[1::2].sum()], rtol=0.05, atol=0.3)


def test_memory_order_is_the_atomics_attribute_and_relaxed_sums_add_up() -> None:
    """`memory_order=` (a `tile.MemoryOrder` or its name) lands on the IR op as `order`, and
    the default (acq_rel) leaves the op as it was; the simulator sums as any order does."""
    x = np.random.default_rng(4).standard_normal((64, 16)).astype(np.float32)
    acc = fl.zeros((16, 16))
    args = (acc, fl.asarray(x))
    text = relaxed_tile_sums.inspect(*args, stage="ir")
    assert "order='relaxed'" in text and "order='acquire'" in text
    assert "order='release'" in text and "acq_rel" not in text
    assert "order=" not in float_sums.inspect(
        fl.zeros(1), fl.zeros(2, dtype=fl.bf16), fl.zeros(256), stage="ir"
    )
    relaxed_tile_sums.launch(4, *args)
    np.testing.assert_allclose(acc.numpy(), x.reshape(4, 16, 16).sum(0), rtol=1e-5, atol=1e-5)


def test_atomic_store_add_sums_whole_tiles_and_drops_the_outside() -> None:
    """Every row block adds its column sums into one (1, 16) tile; the last column tile holds
    columns past x's 40, which are dropped."""
    x = np.random.default_rng(5).standard_normal((100, 40)).astype(np.float32)
    out = fl.zeros((1, 40))
    column_sums.launch((4, 3), out, fl.asarray(x), 32)
    np.testing.assert_allclose(out.numpy()[0], x.sum(0), rtol=1e-5, atol=1e-5)
    text = column_sums.inspect(out, fl.asarray(x), 32, stage="ir")
    assert "tile.atomic_store " in text and "mode='add'" in text


def test_atomic_store_add_in_f16_rounds_each_add() -> None:
    """Three f16 adds of 1/3 into 1000: each sum is rounded to f16 (the GPU's f16 atomics do
    the same), and the tiles outside the index stay 1000."""
    check_half_tiles()


def test_the_other_tiled_atomics_fold_every_block_in() -> None:
    """`tile.atomic_store_max` (i32), `_min` (u32), `_or`, `_and` and `_xor` (i64) over five
    blocks' tiles, against NumPy."""
    check_tile_bits(5, 6, 1000)


def test_an_atomic_output_may_not_overlap_an_input() -> None:
    buf = fl.zeros(64, dtype=fl.i32)
    with pytest.raises(fl.BorrowError):
        histogram.launch(1, buf, buf, 64)


def test_a_kernel_with_only_atomic_outputs_names_launch() -> None:
    with pytest.raises(fl.LaunchContractError, match=r"histogram\.launch\(grid"):
        histogram(fl.zeros(64, dtype=fl.i32), fl.zeros(16, dtype=fl.i32), 64)


def test_the_indexed_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    i32 = fl.i32
    cases = [
        (histogram, (fl.zeros(64, dtype=i32), fl.zeros(16, dtype=i32), 64)),
        (
            take_rows,
            (fl.empty((8, 20)).partition((4, 16)), fl.zeros((10, 20)), fl.zeros(8, dtype=i32)),
        ),
        (gather_masked, (fl.empty(32).partition((8,)), fl.zeros(64), 20)),
        (permute_into, (fl.zeros(64), fl.zeros(64), fl.zeros(64, dtype=i32))),
        (take_tickets, (fl.empty(6, dtype=i32).partition((1,)), fl.zeros(1, dtype=i32))),
        (float_sums, (fl.zeros(1), fl.zeros(2, dtype=fl.bf16), fl.zeros(256))),
        (relaxed_tile_sums, (fl.zeros((16, 16)), fl.zeros((64, 16)))),
        (column_sums, (fl.zeros((1, 40)), fl.zeros((100, 40)), 32)),
        (half_tiles, (fl.zeros((16, 8), dtype=fl.f16), fl.zeros((8, 8), dtype=fl.f16))),
        (
            tile_bits,
            (
                fl.zeros((4, 16), dtype=i32),
                fl.zeros((4, 16), dtype=fl.u32),
                fl.zeros((3, 16), dtype=fl.i64),
                fl.zeros((20, 16), dtype=i32),
            ),
        ),
    ]
    cases += [
        (
            old_values,
            (
                fl.empty(16, dtype=i32).partition((16,)),
                fl.zeros(4, dtype=i32),
                fl.zeros(16, dtype=i32),
                k,
            ),
        )
        for k in range(7)
    ]
    for kernel, args in cases:
        assert cubin(kernel, *args)


# ------------------------------------------------------------------ with tile.unsafe()


def test_an_unsafe_region_scatters_into_a_part_and_is_reported(
    cubin: Callable[..., bytes],
) -> None:
    x = np.arange(100, dtype=np.float32)
    part = fl.empty(100).partition((16,))
    reverse(part, fl.asarray(x))
    assert np.array_equal(part.unpartition().numpy(), x[::-1])
    text = reverse.inspect(fl.empty(100).partition((16,)), fl.asarray(x))
    assert text.startswith("// unsafe: `with tile.unsafe():` at line")
    assert "not proven race-free" in text.splitlines()[0]
    assert cubin(reverse, fl.empty(100).partition((16,)), fl.zeros(100))


def test_outside_the_region_a_part_scatter_names_the_region() -> None:
    @tile.kernel
    def k(out: tile.Part[fl.f32]):
        tile.scatter(out, tile.arange(16), 1.0)

    with pytest.raises(fl.SafetyError, match="E0611") as info:
        k(fl.zeros(16).partition((16,)))
    assert "with tile.unsafe():" in str(info.value)


def test_a_tile_atomic_is_read_only_inside_an_unsafe_region() -> None:
    @tile.kernel
    def peek(out: tile.Part[fl.f32], acc: tile.Atomic[fl.f32]):
        out.store(tile.gather(acc, tile.arange(16)))

    with pytest.raises(fl.SafetyError) as err:
        peek(fl.empty(16).partition((16,)), fl.zeros(16))
    assert err.value.code == "E0610" and "with tile.unsafe():" in (err.value.help or "")

    @tile.kernel
    def peek_unsafe(out: tile.Part[fl.f32], acc: tile.Atomic[fl.f32]):
        with tile.unsafe():
            v = tile.gather(acc, tile.arange(16))
        out.store(v)

    acc = fl.asarray(np.arange(16, dtype=np.float32))
    part = fl.empty(16).partition((16,))
    peek_unsafe(part, acc)
    assert np.array_equal(part.unpartition().numpy(), np.arange(16, dtype=np.float32))
