"""Issue 33's first-hour SIMT features on the GPU, against NumPy: shared-array atomics, one
value per block, module-level constant arrays (their CPU tests check PTX and the simulator)."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from support.first_hour_kernels import LUT, NBINS, block_sums, lookup, shared_histogram

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]
RNG = np.random.default_rng(1033)


def test_the_shared_histogram_counts_like_bincount() -> None:
    x = RNG.integers(0, NBINS, 100_000, dtype=np.int32)
    hist = fl.zeros(NBINS, dtype=fl.i32)
    shared_histogram[64, NBINS](fl.asarray(x), hist)
    np.testing.assert_array_equal(hist.numpy(), np.bincount(x, minlength=NBINS))


def test_one_partial_per_block() -> None:
    x = RNG.random(256 * 40, dtype=np.float32)
    partial = fl.zeros(40, dtype=fl.f32)
    block_sums[40, 256](fl.asarray(x), partial)
    np.testing.assert_allclose(partial.numpy(), x.reshape(40, 256).sum(1), rtol=1e-5)


def test_a_constant_table_reads_like_numpy() -> None:
    x = RNG.integers(0, len(LUT), 5000, dtype=np.int32)
    out = fl.zeros(5000, dtype=fl.f32)
    lookup[(5000 + 127) // 128, 128](fl.asarray(x), out)
    np.testing.assert_array_equal(out.numpy(), LUT[x])


def test_a_constant_table_read_out_of_range_raises() -> None:
    x = np.full(128, len(LUT), np.int32)
    out = fl.zeros(128, dtype=fl.f32)
    lookup[1, 128](fl.asarray(x), out)
    with pytest.raises(fl.KernelIndexError):
        fl.synchronize()
