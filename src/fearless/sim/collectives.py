"""Warp and block collectives in the SIMT simulator, computed as the GPU lowering computes them.

A collective op starts a part of its block that waits like a barrier (`barriers.py`), so its
step sees every running lane of each thread block at once. The lanes' values are laid out as
(block, warp, lane) with 32 lanes a warp in the block's linear order; lanes past the block's
last thread (a partial last warp) or stopped by a failed check hold the operation's identity.
The reductions and scans follow `backends/llvm/collectives.py` step by step (a shfl.down tree,
a shfl.up scan, then the same over the warps' totals), so float results agree bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dtypes import DType
from ..ir.core import Op, ScalarType
from ..ir.simt import ops
from . import numerics

if TYPE_CHECKING:
    from .machine import Chunk

Lanes = np.ndarray[Any, Any]
_KIND = {"sum": "add", "max": "max", "min": "min"}


def identity(op: str, dt: DType) -> Any:
    """The value a missing lane holds: x op identity == x for every x."""
    store = numerics.storage_dtype(dt)
    if dt.is_float:
        return store.type({"sum": -0.0, "max": -np.inf, "min": np.inf}[op])
    info = np.iinfo(store)
    return store.type({"sum": 0, "max": info.min, "min": info.max}[op])


class _Layout:
    """Where each of a step's lanes sits: block (within the chunk), warp, lane."""

    def __init__(self, lanes: Lanes | None, ck: Chunk) -> None:
        t = ck.per_block()
        ids = np.arange(ck.n) if lanes is None else lanes
        self.nb, self.nw = ck.n // t, (t + 31) // 32
        pos = ids % t
        self.b, self.w, self.l = ids // t, pos // 32, pos % 32
        self.size = ids.size
        # threads in each warp: 32, but fewer in a partial last warp
        self.n_in_warp = np.minimum(32, t - 32 * np.arange(self.nw))

    def grid(self, v: Any, fill: Any, dtype: Any) -> np.ndarray[Any, Any]:
        g = np.full((self.nb, self.nw, 32), fill, dtype)
        g[self.b, self.w, self.l] = np.broadcast_to(v, (self.size,))
        return g


def _tree_down(g: np.ndarray[Any, Any], fn: Callable[..., Any], ident: Any) -> np.ndarray[Any, Any]:
    """Lane l takes op(v[l], v[l + off]) for off 16, 8, 4, 2, 1 (identity past lane 31)."""
    for off in (16, 8, 4, 2, 1):
        shifted = np.full_like(g, ident)
        shifted[..., : 32 - off] = g[..., off:]
        g = fn(g, shifted)
    return g


def _scan_up(g: np.ndarray[Any, Any], fn: Callable[..., Any]) -> np.ndarray[Any, Any]:
    """Lane l >= off takes op(v[l - off], v[l]) for off 1, 2, 4, 8, 16."""
    for off in (1, 2, 4, 8, 16):
        new = g.copy()
        new[..., off:] = fn(g[..., :-off], g[..., off:])
        g = new
    return g


def collective_fn(op: Op) -> Callable[[list[Any], Lanes | None, Chunk], Any]:
    """The step function of a collective op: (operands, lanes, chunk) -> per-lane results."""
    if isinstance(op, ops.WarpVote):
        return lambda args, lanes, ck: _vote(op.attrs["kind"], args[0], _Layout(lanes, ck))
    t = op.operands[0].type
    assert isinstance(t, ScalarType)
    dt = t.dtype
    store = numerics.storage_dtype(dt)
    if isinstance(op, ops.WarpShuffle):
        mode = op.attrs["mode"]
        return lambda args, lanes, ck: _shuffle(mode, args[0], args[1], _Layout(lanes, ck), store)
    name = op.attrs["op"]
    fn = numerics.binary_fn(_KIND[name], dt)
    ident = identity(name, dt)

    def run(args: list[Any], lanes: Lanes | None, ck: Chunk) -> Any:
        lay = _Layout(lanes, ck)
        g = lay.grid(args[0], ident, store)
        if isinstance(op, ops.BlockScan):
            return _block_scan(g, lay, fn, ident)
        totals = _tree_down(g, fn, ident)[..., 0]  # (block, warp)
        if type(op) is ops.WarpReduce:  # (BlockReduce and BlockScan are its subclasses)
            return totals[lay.b, lay.w]
        second = np.full((lay.nb, 32), ident, store)
        second[:, : lay.nw] = totals
        return _tree_down(second, fn, ident)[:, 0][lay.b]

    return run


def _block_scan(g: np.ndarray[Any, Any], lay: _Layout, fn: Callable[..., Any], ident: Any) -> Any:
    first = _scan_up(g, fn)
    last = lay.n_in_warp - 1
    totals = first[:, np.arange(lay.nw), last]  # each warp's last thread: its total
    second = np.full((lay.nb, 32), ident, g.dtype)
    second[:, : lay.nw] = totals
    before = _scan_up(second, fn)  # inclusive prefix over the warps
    own = first[lay.b, lay.w, lay.l]
    prev = before[lay.b, np.maximum(lay.w - 1, 0)]
    return np.where(lay.w > 0, fn(prev, own), own)


def _shuffle(mode: str, v: Any, b: Any, lay: _Layout, store: Any) -> Any:
    g = lay.grid(v, 0, store)
    own = g[lay.b, lay.w, lay.l]
    delta = np.broadcast_to(np.asarray(b).astype(np.int64) & 0xFFFFFFFF, (lay.size,))
    src: Any
    if mode == "idx":
        src = delta & 31
    elif mode == "down":
        src = lay.l + delta
    else:
        src = lay.l ^ delta
    valid = src < lay.n_in_warp[lay.w]
    got = g[lay.b, lay.w, np.where(valid, src, 0)]
    return np.where(valid, got, own)


def _vote(kind: str, c: Any, lay: _Layout) -> Any:
    g: Any = lay.grid(c, kind == "all", np.bool_)
    if kind == "all":
        return g.all(axis=2)[lay.b, lay.w]
    if kind == "any":
        return g.any(axis=2)[lay.b, lay.w]
    bits = (g.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=2)
    return bits.astype(np.uint32)[lay.b, lay.w]
