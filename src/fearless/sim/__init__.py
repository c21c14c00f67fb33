"""The CPU simulator: interprets the IR after the safety passes, lanes as NumPy arrays.

simt.py       the SIMT machine: plans a kernel (`plans`: a planner per op class) and runs a
              launch chunk by chunk
machine.py    one chunk of blocks: per-lane control flow, memory, device checks
numerics.py   the arithmetic of every SIMT op (the executable spec of `ir/simt/ops.py`)
schedule.py   the block order that makes divergent lanes reconverge
launch.py     the simulator's SIMT launcher (the same checks as a GPU launch)
tile/         the Tile simulator: the tile IR, block by block

This package's `__init__` imports nothing: its modules import each other by name.
"""
