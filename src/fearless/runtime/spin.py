"""A device-side wait: one thread that spins on the GPU's global timer for a given time.

The autotuner's clock puts it on the stream ahead of its start event, so the GPU is busy while
the host runs a call's Python and enqueues its kernels: the events then bracket the kernels
alone, however slow the host is (`autotune_timing.DeviceClock`). Unlike a gate the host releases
(`cuStreamWaitValue32`), it cannot deadlock a call that synchronises.

The kernel is a few lines of PTX that the driver compiles when it loads it, so it needs no
toolchain on the machine."""

from __future__ import annotations

import ctypes
from typing import Any

from . import driver

_PTX = b"""
.version 7.0
.target sm_50
.address_size 64
.visible .entry fearless_spin(.param .u64 duration_ns)
{
    .reg .pred done;
    .reg .u64 now, until;
    ld.param.u64 until, [duration_ns];
    mov.u64 now, %globaltimer;
    add.u64 until, until, now;
SPIN:
    mov.u64 now, %globaltimer;
    setp.lt.u64 done, now, until;
    @done bra SPIN;
    ret;
}
\x00"""


class Spinner:
    """Enqueues `fearless_spin` on a stream; the module loads on first use."""

    def __init__(self) -> None:
        self._function: Any = None

    def load(self) -> Any:
        d = driver.cu()
        module = driver.call("loading the autotuner's spin kernel", d.cuModuleLoadData, _PTX)
        self._function = driver.call(
            "finding the autotuner's spin kernel", d.cuModuleGetFunction, module, b"fearless_spin"
        )
        return self._function

    def spin(self, stream: Any, seconds: float) -> None:
        """Keep `stream` busy for `seconds` of device time from when the spin starts."""
        function = self._function or self.load()
        d = driver.cu()
        params = ((max(0, int(seconds * 1e9)),), (ctypes.c_uint64,))
        grid_and_block = (1, 1, 1, 1, 1, 1)
        driver.call(
            "launching the autotuner's spin kernel",
            d.cuLaunchKernel,
            function,
            *grid_and_block,
            0,
            stream,
            params,
            0,
        )
