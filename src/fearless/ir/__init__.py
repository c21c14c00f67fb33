"""The IR of both tracks, plain data.

core.py       the shared data model: types, values, ops with an Effect, blocks, functions
clone.py      deep copy of a Function
analysis.py   CFG analyses: dominators, cyclic blocks
registry.py   Registry: op class -> handler, how each backend and simulator registers its own
simt/         the SIMT track's ops, text form and verifier
tile/         the Tile track's types, ops, printer, verifier and compiled forms

This package's `__init__` imports nothing: its modules import each other by name.
"""
