"""`simt.cg.this_grid().sync()` (issue 33): the simulator against NumPy, the compile-time
grid rules, the PTX of the barrier, and the cooperative launch path with a fake driver."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import fearless as fl
from fearless import simt
from fearless.backends.llvm.ptx import ptxas_check
from fearless.backends.toolchain import find_ptxas
from fearless.runtime import cooperative, launch
from fearless.runtime.tensor import Tensor
from support import fake_cooperative_driver
from support.fake_cooperative_driver import F32, FakeCooperativeDriver, _cooperative_kernel
from support.fake_driver import HostErrorPool
from support.grid_sync_kernels import BLOCK, block_then_total, histogram_then_normalise, jacobi

fake = fake_cooperative_driver.fake  # the fixture (tests/support/fake_cooperative_driver.py)

RNG = np.random.default_rng(33)


def test_two_phase_sum_matches_numpy() -> None:
    n, grid = 1000, 8
    x = RNG.random(n, dtype=np.float32)
    partial = np.zeros(grid * BLOCK, np.float32)
    out = np.zeros(grid * BLOCK, np.float32)
    block_then_total[grid, BLOCK](x, partial, out)
    assert np.allclose(out, x.sum(), rtol=1e-5)


def test_atomic_slice_read_after_grid_sync() -> None:
    x = RNG.integers(0, 5, 700).astype(np.int32)
    counts = np.zeros(5, np.int32)
    out = np.zeros(700, np.float32)
    histogram_then_normalise[6, BLOCK](x, counts, out)
    want = np.bincount(x, minlength=5) / 700
    assert np.allclose(out, want[np.arange(700) % 5])


def test_several_syncs_in_one_launch() -> None:
    n, steps = 300, 3
    a = RNG.random(n, dtype=np.float32)
    want = a.astype(np.float64)
    for _ in range(2 * steps):
        want = (np.roll(want, 1) + want + np.roll(want, -1)) / 3
    b = np.zeros_like(a)
    jacobi[3, BLOCK](steps, a, b)
    assert np.allclose(a, want, rtol=1e-5)


def test_simulator_refuses_a_grid_larger_than_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.ones(10, np.float32)
    big = np.zeros(16 * 132 * BLOCK + BLOCK, np.float32)  # 16 blocks of 128 per SM, 132 SMs
    with pytest.raises(fl.LaunchContractError, match=r"at most 2,112 fit") as info:
        block_then_total[16 * 132 + 1, BLOCK](x, big, big.copy())
    assert info.value.code == "E0703" and "grid_stride" in (info.value.help or "")
    monkeypatch.setenv("FEARLESS_SIM_CO_RESIDENT_BLOCKS", "4")
    small = np.zeros(5 * BLOCK, np.float32)
    with pytest.raises(fl.LaunchContractError, match="FEARLESS_SIM_CO_RESIDENT_BLOCKS"):
        block_then_total[5, BLOCK](x, small, small.copy())
    block_then_total[4, BLOCK](x, small[: 4 * BLOCK].copy(), small[: 4 * BLOCK].copy())


def test_a_failed_check_before_a_grid_sync_is_reported_not_hung() -> None:
    @simt.kernel
    def reads_past(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        v = x[i]  # x is shorter than the grid: a check fails
        simt.cg.this_grid().sync()
        if i < len(out):
            out[i] = v

    with pytest.raises(fl.KernelIndexError):
        reads_past[2, BLOCK](np.ones(BLOCK + 3, np.float32), np.zeros(2 * BLOCK, np.float32))


def test_grid_sync_in_a_uniform_loop_compiles_and_blockidx_branch_is_refused() -> None:
    @simt.kernel
    def per_block(out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if simt.block.reduce(fl.f32(1.0), "sum") > fl.f32(0.0):  # block-uniform, not grid
            simt.cg.this_grid().sync()
        if i < len(out):
            out[i] = fl.f32(1.0)

    with pytest.raises(fl.SafetyError, match="the thread or block") as info:
        per_block[1, 32](np.zeros(32, np.float32))
    assert info.value.code == "E0633"


# ----------------------------------------------------------------------------------- PTX


def test_ptx_has_the_barrier_sequence_and_the_kernel_is_cooperative() -> None:
    ck = block_then_total.compile("sm_90")
    assert ck.cooperative and ck.coarse_entry is None  # one thread per logical thread
    ptx = ck.ptx
    body = ptx[ptx.index("atom.global.add.u32") - 600 :]
    for piece in ("bar.sync", "membar.gl", "atom.global.add.u32", "ld.volatile.global.u32"):
        assert piece in ptx, piece
    assert body.index("membar.gl") < body.index("atom.global.add.u32")
    assert body.index("atom.global.add.u32") < body.index("ld.volatile.global.u32")
    # 3 arrays x 2, the thread count, the error record, then the grid barrier: _param_8
    assert "_param_8" in ptx and "_param_9" not in ptx
    if find_ptxas() is not None:
        assert "for 'sm_90'" in ptxas_check(ptx, "sm_90")


def test_kernels_without_grid_sync_keep_their_abi() -> None:
    @simt.kernel
    def copy(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = x[i]

    ck = copy.compile("sm_90")
    assert not ck.cooperative and "_param_6" not in ck.ptx and "membar.gl" not in ck.ptx


# ------------------------------------------------------------------ launch with a fake driver


def test_cooperative_launch_uses_the_cooperative_call(fake: FakeCooperativeDriver) -> None:
    plan = launch.GpuLaunchPlan(_cooperative_kernel(), pool=HostErrorPool())
    fake.packer = plan.packer
    assert plan.cplan is None  # the C launcher calls cuLaunchKernel: not for this kernel
    x = Tensor._make(0x1000, (256,), F32, on_device=True, owner=None)
    out = Tensor._make(0x2000, (256,), F32, on_device=True, owner=None)
    plan.launch(528, 256, (x, out))  # 4 per SM x 132 SMs: exactly the limit
    plan.launch(528, 256, (x, out), 0x7000)
    plan.launch(2, 256, (x, out))
    kinds = [c[0] for c in fake.calls]
    assert kinds.count("occupancy") == 1  # once per block shape, not per launch
    launches = [c[1] for c in fake.calls if c[0] == "launch"]
    memsets = [c[1] for c in fake.calls if c[0] == "memset"]
    assert len(launches) == 3 and len(memsets) == 3  # the counter is zeroed before each launch
    assert launches[0][0] == (528, 1, 1) and launches[1][2] == 0x7000
    # the counter's address is the last parameter; one counter per stream
    counters = [struct.unpack_from("<Q", bytes_, len(bytes_) - 8)[0] for *_, bytes_ in launches]
    assert counters[0] == counters[2] == memsets[0][0] and counters[1] == memsets[1][0]
    assert counters[0] != counters[1] and memsets[1][3] == 0x7000


def test_oversize_cooperative_grid_is_refused_before_launching(
    fake: FakeCooperativeDriver,
) -> None:
    plan = launch.GpuLaunchPlan(_cooperative_kernel(), pool=HostErrorPool())
    fake.packer = plan.packer
    x = Tensor._make(0x1000, (256,), F32, on_device=True, owner=None)
    with pytest.raises(fl.LaunchContractError, match=r"at most 528 fit") as info:
        plan.launch(529, 256, (x, x))
    assert info.value.code == "E0703"
    assert "4 blocks of 256 threads per SM" in str(info.value)
    assert not [c for c in fake.calls if c[0] in ("launch", "memset")]


def test_sim_pretend_occupancy_follows_the_block() -> None:
    assert cooperative.sim_co_resident((1024, 1, 1))[0] == 2 * 132
    assert cooperative.sim_co_resident((32, 1, 1))[0] == 32 * 132
