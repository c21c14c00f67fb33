"""The Tile track's IR over the shared data model (`ir/core.py`): structured regions of tiles.

types.py      TileType, ArrayParamType
ops.py        the tile ops; tile.for / tile.while / tile.if regions
printer.py    the text form
verifier.py   scopes, terminators, region yields
kernel.py     TileParam, Signature, TileHints, TileIR, CompiledTile

This package's `__init__` imports nothing: its modules import each other by name.
"""
