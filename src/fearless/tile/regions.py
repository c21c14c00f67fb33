"""`with tile.unsafe():` regions of Tile kernels: element-wise writes into a Part.

Outside a region, `tile.scatter` and the atomics take only a `tile.Atomic[T]` parameter
(tile/indexed.py), because coordinates computed at run time may name any block's elements.
Inside one, they may also write a `tile.Part` at any coordinates: the ownership proof is off
for those writes, every access is still bounds-checked (elements outside the array are
dropped), and the kernel is reported unsafe (`kernel.inspect()` prints one line per region).
Plain tile stores (`part.store`, `t.store`, `c.store`) keep their ownership rules, and a
read-only `tile.Tensor` stays read-only.
"""

from __future__ import annotations

import ast
from typing import Any, NoReturn

from ..frontend.regions import lower_unsafe


def unsafe() -> NoReturn:
    """`with tile.unsafe():` inside a kernel: scatters and atomics into a Part at any
    coordinates (still bounds-checked); the kernel is reported unsafe."""
    raise RuntimeError("`with tile.unsafe():` can only be used inside a @tile.kernel")


def lower_with(lw: Any, node: ast.With) -> None:
    """`with tile.unsafe(): body`, the only `with` a Tile kernel has."""
    lower_unsafe(lw, node, unsafe, "tile", lw)
