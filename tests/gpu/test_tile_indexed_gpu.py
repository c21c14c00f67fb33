"""`tile.gather`, `tile.scatter` and the Tile atomics on the GPU against the simulator and
NumPy (issue 11)."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from support.tile_indexed_kernels import (
    check_half_tiles,
    check_tile_bits,
    column_sums,
    float_sums,
    gather_masked,
    histogram,
    old_values,
    permute_into,
    take_rows,
    take_tickets,
)

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def test_histogram_of_a_million_values() -> None:
    x = np.random.default_rng(0).integers(-10, 1100, 1 << 20).astype(np.int32)
    counts = fl.zeros(1024, dtype=fl.i32)
    histogram.launch(x.size // 1024, fl.asarray(x), counts, 1024)
    want = np.bincount(x[(x >= 0) & (x < 1024)], minlength=1024)
    assert np.array_equal(counts.numpy(), want)


def test_gathers_and_scatters() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1000, 96)).astype(np.float32)
    rows = rng.integers(-5, 1010, 512).astype(np.int32)
    part = fl.empty((512, 96)).partition((64, 32))
    take_rows(part, fl.asarray(x), fl.asarray(rows))
    want = np.where(((rows >= 0) & (rows < 1000))[:, None], x[np.clip(rows, 0, 999)], -1.0)
    assert np.array_equal(part.unpartition().numpy(), want)

    v = np.arange(4096, dtype=np.float32)
    part = fl.empty(2048).partition((128,))
    gather_masked(part, fl.asarray(v), 1500)
    k = np.arange(2048)
    assert np.array_equal(part.unpartition().numpy(), np.where(k < 1500, 2.0 * k, 0.0))

    src = rng.standard_normal(1024).astype(np.float32)
    perm = rng.permutation(1024).astype(np.int32)
    out = fl.full(1024, np.nan)
    permute_into.launch(64, out, fl.asarray(src), fl.asarray(perm))
    want = np.full(1024, np.nan, np.float32)
    want[perm[perm != 3]] = src[perm != 3]
    np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("kind", range(7))
def test_atomics_leave_what_the_simulator_leaves(kind: int) -> None:
    """One block: the final values do not depend on the order (max, min, and, or, xor, add),
    and the old values are a permutation-consistent history; xchg leaves one of the values."""
    upd = np.random.default_rng(kind).integers(-50, 50, 16).astype(np.int32)
    start = np.array([5, -7, 0, 12], np.int32)
    a = fl.asarray(start.copy())
    old = fl.empty(16, dtype=fl.i32).partition((16,))
    old_values(old, a, fl.asarray(upd), kind)
    got = a.numpy()
    if kind == 2:
        for slot in range(4):
            assert got[slot] in upd[slot::4]
    else:
        fn = [np.maximum, np.minimum, None, np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.add][
            kind
        ]
        want = start.copy()
        for n, v in enumerate(upd):
            want[n % 4] = fn(want[n % 4], v)  # type: ignore[misc]
        assert np.array_equal(got, want)


def test_cas_tickets_and_float_adds() -> None:
    tickets = fl.empty(6, dtype=fl.i32).partition((1,))
    counter = fl.zeros(1, dtype=fl.i32)
    take_tickets(tickets, counter)
    got = tickets.unpartition().numpy()
    # 4 CAS tries per block: a block that lost all of them keeps -1; the winners are distinct
    won = sorted(t for t in got.tolist() if t >= 0)
    assert won == list(range(len(won))) and counter.numpy()[0] == len(won) >= 1

    x = np.random.default_rng(3).standard_normal(1 << 16).astype(np.float32)
    total, half = fl.zeros(1), fl.zeros(2, dtype=fl.bf16)
    float_sums.launch(x.size // 64, total, half, fl.asarray(x))
    np.testing.assert_allclose(total.numpy()[0], x.sum(dtype=np.float64), rtol=1e-3, atol=1e-2)


def test_an_unsafe_reverse_on_the_gpu() -> None:
    from support.tile_indexed_kernels import reverse

    x = np.random.default_rng(4).standard_normal(100_000).astype(np.float32)
    part = fl.empty(x.size).partition((1024,))
    reverse(part, fl.asarray(x))
    assert np.array_equal(part.unpartition().numpy(), x[::-1])


def test_atomic_store_add_of_whole_tiles() -> None:
    """`tile.atomic_store_add` (a TMA reduction on sm_90): 313 row blocks add their column sums
    into one row, the columns past 1000 dropped; f16 adds round each sum, as the simulator."""
    x = np.random.default_rng(7).standard_normal((10000, 1000)).astype(np.float32)
    out = fl.zeros((1, 1000))
    column_sums.launch((313, 63), out, fl.asarray(x), 32)
    np.testing.assert_allclose(out.numpy()[0], x.sum(0), rtol=1e-4, atol=1e-3)
    check_half_tiles()


def test_the_other_tiled_atomics_leave_what_numpy_gives() -> None:
    """`tile.atomic_store_max` / `_min` / `_or` / `_and` / `_xor` over 64 blocks' tiles."""
    check_tile_bits(64, 8, 2**30)
