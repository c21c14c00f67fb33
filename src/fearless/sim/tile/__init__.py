"""The Tile simulator: tile IR interpreted with NumPy, one block at a time.

interpreter.py   runs a launch block by block (`run_kernel`); `runs`: its handler per op class
indexed.py       tile.gather, tile.scatter and the Tile atomics

This package's `__init__` imports nothing: its modules import each other by name.
"""
