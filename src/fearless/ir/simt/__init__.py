"""The SIMT track's IR over the shared data model (`ir/core.py`): CFG SSA with block arguments.

ops.py (+ ops_block.py, ops_const.py)   the op kinds and their semantics
chunk_groups.py                         the chunk copies' load/store groups
ranges.py                               integer ranges that values' definitions fix
printer.py, text_syntax.py, parser.py   the text form, both ways
verifier.py                             structure, dominance, op typing

This package's `__init__` imports nothing: its modules import each other by name.
"""
