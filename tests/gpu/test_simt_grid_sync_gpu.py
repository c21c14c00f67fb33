"""`simt.cg.this_grid().sync()` on the GPU (issue 33): the cooperative launch, the grid
barrier and the occupancy refusal agree with the simulator. Written without a GPU: not yet
run on one."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
import support.grid_sync_kernels as G

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]
RNG = np.random.default_rng(33)


def test_two_phase_sum_on_the_gpu() -> None:
    n, grid = 100_000, 132
    x = RNG.random(n, dtype=np.float32)
    partial = fl.zeros(grid * G.BLOCK)
    out = fl.zeros(grid * G.BLOCK)
    G.block_then_total[grid, G.BLOCK](fl.asarray(x[: grid * G.BLOCK]), partial, out)
    fl.synchronize()
    assert np.allclose(out.numpy(), x[: grid * G.BLOCK].sum(), rtol=1e-4)


def test_many_syncs_agree_with_the_simulator() -> None:
    """Many syncs in one launch, and launches back to back: the counter is reused (generation
    bit) and zeroed per launch."""
    n, steps = 50_000, 40
    a0 = RNG.random(n, dtype=np.float32)
    fl.set_target("sim")
    a_sim, b_sim = a0.copy(), np.zeros_like(a0)
    G.jacobi[64, G.BLOCK](steps, a_sim, b_sim)
    fl.set_target("cuda")
    for _ in range(3):
        a, b = fl.asarray(a0), fl.zeros(n)
        G.jacobi[64, G.BLOCK](steps, a, b)
        fl.synchronize()
        assert np.allclose(a.numpy(), a_sim, rtol=1e-5)


def test_atomic_then_plain_reads() -> None:
    x = RNG.integers(0, 7, 200_000).astype(np.int32)
    counts = fl.zeros(7, fl.i32)
    out = fl.zeros(200_000)
    G.histogram_then_normalise[782, 256](fl.asarray(x), counts, out)  # 200,192 threads
    fl.synchronize()
    assert np.array_equal(counts.numpy(), np.bincount(x, minlength=7))


def test_the_largest_grid_runs_and_one_more_block_is_refused() -> None:
    ck = G.block_then_total.compile()
    assert ck.cooperative
    x = fl.ones(10)
    plan = G.block_then_total._launcher().plan  # type: ignore[attr-defined]
    limit = plan.co_resident((G.BLOCK, 1, 1))  # occupancy x SMs
    assert limit >= 132
    big = fl.zeros((limit + 1) * G.BLOCK)
    G.block_then_total[limit, G.BLOCK](x, big, fl.zeros((limit + 1) * G.BLOCK))
    fl.synchronize()
    with pytest.raises(fl.LaunchContractError, match="must be on the GPU at once"):
        G.block_then_total[limit + 1, G.BLOCK](x, big, fl.zeros((limit + 1) * G.BLOCK))


def test_a_failed_check_ends_the_launch_instead_of_hanging() -> None:
    @fl.simt.kernel
    def reads_past(x: fl.simt.Slice[fl.f32], out: fl.simt.DisjointSlice[fl.f32]):
        i = fl.simt.thread.index_1d()
        v = x[i]
        fl.simt.cg.this_grid().sync()
        if i < len(out):
            out[i] = v

    reads_past[8, 128](fl.ones(1000), fl.zeros(1024))
    with pytest.raises(fl.KernelIndexError):
        fl.synchronize()
