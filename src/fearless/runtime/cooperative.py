"""Cooperative launches: kernels with `simt.cg.this_grid().sync()` (`CompiledKernel.cooperative`).

A grid sync waits for every block of the grid, so every block must be resident on the GPU at
once: more blocks than fit would wait for blocks that cannot start, forever. CUDA's
cuLaunchCooperativeKernel refuses such a grid with a bare error code; fearless refuses it
before launching, with the numbers (`co_resident_error`, LaunchContractError E0703):

    GPU:        blocks per SM = cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads
                per block, 0 bytes of dynamic shared memory), times the device's SM count;
                `GpuLaunchPlan` asks once per block shape (`blocks_per_sm`), not per launch;
    simulator:  a pretend H200 (`sim_co_resident`): 132 SMs of at most 32 blocks and 2048
                threads each, or FEARLESS_SIM_CO_RESIDENT_BLOCKS blocks in all.

`GridBarriers` owns the u32 counters of one plan's grid barrier (`backends/llvm/grid.py`
describes the algorithm), one per stream, so launches on two streams never share one: each
launch zeroes its stream's counter with cuMemsetD32Async, ordered before the kernel, writes
its address into the hidden parameter and calls cuLaunchCooperativeKernel.
"""

from __future__ import annotations

from typing import Any

from .. import config
from ..abi import Dim3
from ..errors import LaunchContractError
from . import driver
from .location import read_setting, user_location
from .params import ParamPacker

# The simulator's pretend GPU: an H200 (compute capability 9.0).
SIM_SMS = 132
SIM_BLOCKS_PER_SM = 32
SIM_THREADS_PER_SM = 2048


def sim_co_resident(block: Dim3) -> tuple[int, str]:
    """The most blocks of `block` threads the simulator lets a cooperative launch have, and
    how that number came about (for the message)."""
    configured = read_setting(
        config.sim_co_resident_blocks,
        LaunchContractError,
        "set FEARLESS_SIM_CO_RESIDENT_BLOCKS to a block count, e.g. 264, or unset it",
    )
    if configured is not None:
        return configured, "FEARLESS_SIM_CO_RESIDENT_BLOCKS on the simulator"
    threads = block[0] * block[1] * block[2]
    per_sm = min(SIM_BLOCKS_PER_SM, SIM_THREADS_PER_SM // threads)
    return per_sm * SIM_SMS, (
        f"{per_sm} blocks of {threads} threads per SM times {SIM_SMS} SMs, the simulator's "
        "pretend H200"
    )


def blocks_per_sm(function: Any, threads: int) -> int:
    """cuOccupancyMaxActiveBlocksPerMultiprocessor for `function` with blocks of `threads`."""
    d = driver.cu()
    return int(
        driver.call(
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
            d.cuOccupancyMaxActiveBlocksPerMultiprocessor,
            function,
            threads,
            0,
        )
    )


def check_co_resident(name: str, grid: Dim3, block: Dim3, limit: int, why: str) -> None:
    """Refuse a cooperative launch of more than `limit` blocks (E0703)."""
    blocks = grid[0] * grid[1] * grid[2]
    if blocks > limit:
        raise co_resident_error(name, grid, block, limit, why)


def co_resident_error(
    name: str, grid: Dim3, block: Dim3, limit: int, why: str
) -> LaunchContractError:
    blocks = grid[0] * grid[1] * grid[2]
    return LaunchContractError(
        f"`{name}` calls `simt.cg.this_grid().sync()`, so all its blocks must be on the GPU "
        f"at once, but this launch has {blocks:,} blocks (grid={grid}, block={block}) and at "
        f"most {limit:,} fit",
        user_location(),
        code="E0703",
        notes=[
            f"{limit:,} = {why}",
            "a grid sync waits for every block: a block that cannot start until another "
            "finishes would never arrive",
        ],
        help=f"launch at most {limit:,} blocks and let each thread walk the data with "
        "`for i in simt.thread.grid_stride(n)`; smaller blocks, fewer registers "
        "(`max_registers=`) or less shared memory may fit more blocks per SM",
    )


class GridBarriers:
    """The grid barrier counters of one cooperative plan, one per stream, and its launch."""

    def __init__(self, packer: ParamPacker) -> None:
        self.packer = packer
        self._cu = driver.cu()
        self._counters: dict[int, driver.DeviceAllocation] = {}

    def counter(self, stream: Any) -> int:
        """The device address of `stream`'s counter (allocated at its first launch)."""
        key = int(stream)
        block = self._counters.get(key)
        if block is None:
            block = self._counters[key] = driver.DeviceAllocation(4)
        return block.ptr

    def launch(
        self,
        f: Any,
        gx: int,
        gy: int,
        gz: int,
        bx: int,
        by: int,
        bz: int,
        shmem: int,
        stream: Any,
        params: int,
        extra: int = 0,
    ) -> tuple[Any]:
        """cuLaunchKernel's arguments (the generated launcher's call, under the packer's lock);
        zeroes the counter, then cuLaunchCooperativeKernel. Returns (CUresult,)."""
        ptr = self.counter(stream)
        (err,) = self._cu.cuMemsetD32Async(ptr, 0, 1, stream)
        if err:
            return (err,)
        self.packer.set_grid_barrier(ptr)
        return self._cu.cuLaunchCooperativeKernel(  # type: ignore[no-any-return]
            f, gx, gy, gz, bx, by, bz, shmem, stream, params
        )
