"""The Tile backend: tile IR -> CUDA Tile IR bytecode -> cubin (tileiras).

lower.py      the visitor: tile IR -> bytecode
registry.py   `lowers`: the handler of each op class (complete once lower.py is imported)
arith.py      reductions, scans, mma, extract, cat, bitcast, float `//` and `%`
indexed.py    gather, scatter and the atomics as pointer tiles
cuda_tile.py  the one adapter to NVIDIA's cuda-tile package: encoders, bytecode version,
              tileiras, tileirdisasm

This package's `__init__` imports nothing: its modules import each other by name.
"""
