"""Tile random numbers on the GPU (tile/random.py): the same seed and offsets give the
simulator's bits. `randint`, `randint4x`, `philox` and `rand` are integer arithmetic and one
exact conversion, so they agree bit for bit; `randn` goes through log, sqrt and cos, whose
last bits may differ between NumPy and the GPU's libraries."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fearless as fl
from support.tile_random_kernels import (
    KAT,
    draws,
    literal_seed,
    philox_block,
    philox_grid,
    rand_ref,
    randint4x_ref,
    words4,
)

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _both(kernel: Any, specs: list[tuple[Any, Any, fl.DType]], *scalars: Any) -> list[Any]:
    """Run on the simulator and on the GPU, with outputs (shape, tile shape, dtype):
    [(sim output, GPU output), ...]."""
    results: list[list[np.ndarray]] = []
    for target in ("sim", "cuda"):
        fl.set_target(target)
        parts = [fl.zeros(n, dtype=dt).partition(block) for n, block, dt in specs]
        kernel(*parts, *scalars)
        fl.synchronize()
        results.append([p.unpartition().numpy() for p in parts])
    return list(zip(*results, strict=True))


@pytest.mark.parametrize(
    "seed, base", [(0, 0), (1234567, 3), (-1, -65536), (2**40 + 17, 2**31 - 65536)]
)
def test_randint_rand_randn_on_the_gpu_match_the_simulator(seed: int, base: int) -> None:
    n = 65536
    specs = [(n, (1024,), fl.u32), (n, (1024,), fl.f32), (n, (1024,), fl.f32)]
    (bits_s, bits_g), (uni_s, uni_g), (nrm_s, nrm_g) = _both(draws, specs, seed, base)
    offsets = (np.arange(n, dtype=np.int64) + base).astype(np.int32)
    assert np.array_equal(bits_s, randint4x_ref(seed, offsets)[0])
    assert np.array_equal(bits_g, bits_s)
    assert np.array_equal(uni_g.view(np.uint32), uni_s.view(np.uint32))
    assert np.array_equal(uni_g, rand_ref(seed, offsets))
    # a few ulp of log/sqrt/cos, times a radius up to sqrt(-2 ln 1e-7) ~ 5.7
    np.testing.assert_allclose(nrm_g, nrm_s, rtol=1e-5, atol=1e-5)


def test_randint4x_on_the_gpu_matches_the_simulator() -> None:
    specs = [(4096, (256,), fl.u32)] * 4
    for rounds in (7, 10):
        for sim_words, gpu_words in _both(words4, specs, -5, rounds):
            assert np.array_equal(gpu_words, sim_words)


@pytest.mark.parametrize("rounds, counter, key, want", KAT)
def test_philox_known_answers_on_the_gpu(
    rounds: int, counter: tuple[int, ...], key: tuple[int, int], want: tuple[int, ...]
) -> None:
    seed = key[0] | key[1] << 32
    pairs = _both(philox_block, [(1, (1,), fl.u32)] * 4, seed, *counter, rounds)
    assert tuple(int(g[0]) for _, g in pairs) == want


def test_broadcast_counters_and_a_compile_time_seed_on_the_gpu() -> None:
    ((grid_s, grid_g),) = _both(philox_grid, [((8, 16), (8, 16), fl.u32)], 0xDEADBEEF)
    assert np.array_equal(grid_g, grid_s)
    ((lit_s, lit_g),) = _both(literal_seed, [((16, 32), (16, 32), fl.f32)], 99)
    assert np.array_equal(lit_g.view(np.uint32), lit_s.view(np.uint32))
