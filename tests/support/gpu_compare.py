"""`both`: one launch of a SIMT kernel on the simulator and one on the GPU, for the GPU tests that
hold the GPU to the simulator's meaning."""

from __future__ import annotations

import numpy as np

import fearless as fl


def both(kernel: object, grid: object, block: object, *host_args: object, out: int) -> tuple:
    """Output `out` of one launch on the simulator and one on the GPU."""
    sim_args = [a.copy() if isinstance(a, np.ndarray) else a for a in host_args]
    fl.set_target("sim")
    kernel[grid, block](*sim_args)  # type: ignore[index]
    fl.set_target("cuda")
    dev_args = [fl.asarray(a) if isinstance(a, np.ndarray) else a for a in host_args]
    kernel[grid, block](*dev_args)  # type: ignore[index]
    fl.synchronize()
    return sim_args[out], dev_args[out].numpy()  # type: ignore[union-attr]
