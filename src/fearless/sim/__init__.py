"""The CPU simulator: interprets the IR after the safety passes, lanes as NumPy arrays.

simt.py       the SIMT machine: lanes, per-lane control flow, memory, device checks
numerics.py   the arithmetic of every SIMT op (the executable spec of `ir/ops.py`)
schedule.py   the block order that makes divergent lanes reconverge
"""

from .simt import SimError, SimKernel, run_kernel

__all__ = ["SimError", "SimKernel", "run_kernel"]
