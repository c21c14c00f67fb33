"""The SIMT atomics on the simulator: `atomic.rmw` and `atomic.cas` over the lanes of a step.

The GPU performs concurrent atomics on one element one after another, in an order it does not
promise. The simulator picks one such order and keeps it: within one step, lanes perform their
atomics in lane order (linear block, then linear thread), each reading the element as the
lanes before it left it and returning that old value. Lanes of different steps act in step
order. So a launch is reproducible, and any result it gives is one the GPU can give. A thread
that waits for another (a spin lock built from `cas`) never finishes here: the simulator
does not interleave threads at arbitrary points, as Volta's independent scheduling does.

Each update is the op's scalar definition (`numerics.py`): integers wrap, float `sub` is the
add of the negation, float max/min are `math.fmax`/`fmin` (old, value) (a NaN value loses),
f16/bf16 adds round once per update, and `cas` compares bit patterns.

The lanes are sorted by element (stably, so lane order holds within an element; a 2-D
AtomicSlice's element (r, c) is sorted as its row-major offset r * shape[1] + c). The first
`RANKS` updates of every element run as one vectorised update per rank (each touches distinct
elements); an element with more lanes finishes with an exact scan of its own
(`np.add.accumulate` for adds, running max/min, `_fminmax_scan`), or one update at a time where
no NumPy scan computes the same bits (bf16 adds, cas).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..dtypes import DType
from ..errors import InternalError
from . import numerics

# One update: (the element's values, the operands of the lanes) -> the new values.
Update = Callable[..., Any]
# One element's remaining lanes in order: (value before them, their operands) -> (the old
# value each sees, the value after them).
Scan = Callable[[Any, Sequence[Any]], tuple[Any, Any]]
# An atomic on memory: (array, one index per axis, operands, lane count) -> the old value of
# each lane. Each index and operand is one value per lane, or one value for all of them.
AtomicFn = Callable[[Any, Sequence[Any], Sequence[Any], int], Any]

RANKS = 8  # updates per element done rank by rank before the per-element scans


def rmw_fn(kind: str, dt: DType) -> AtomicFn:
    """The function of `atomic.rmw {kind}` on an AtomicSlice of `dt`."""
    update: Update
    if kind == "exch":
        return _atomic(dt, lambda old, v: v, _exch_scan)
    if kind in ("add", "sub"):
        update = numerics.binary_fn(kind, dt)
        negate = kind == "sub"
        scan = _generic_scan(update) if dt.name == "bf16" else _add_scan(negate)
        return _atomic(dt, update, scan)
    if kind in ("max", "min"):
        if dt.is_int:
            ufunc = np.maximum if kind == "max" else np.minimum
            return _atomic(dt, numerics.binary_fn(kind, dt), _accumulate_scan(ufunc))
        update = numerics.math_fn("fmax" if kind == "max" else "fmin", dt)
        return _atomic(dt, update, _fminmax_scan(kind == "max"))
    if kind in _BITWISE:
        bitwise: np.ufunc = _BITWISE[kind]
        return _atomic(dt, bitwise, _accumulate_scan(bitwise))
    if kind in ("inc", "dec"):
        wrap = _inc if kind == "inc" else _dec
        return _atomic(dt, wrap, _generic_scan(wrap))
    raise InternalError(f"the simulator has no atomic `{kind}`")


_BITWISE: dict[str, np.ufunc] = {
    "and_": np.bitwise_and,
    "or_": np.bitwise_or,
    "xor": np.bitwise_xor,
}


def _inc(old: Any, v: Any) -> Any:
    """numba's atomic.inc on u32 and u64: 0 when old >= v, else old + 1 (PTX atom.inc)."""
    old = np.asarray(old)
    return np.where(old >= v, 0, old + 1).astype(old.dtype)


def _dec(old: Any, v: Any) -> Any:
    """numba's atomic.dec on u32 and u64: v when old is 0 or above v, else old - 1 (PTX
    atom.dec)."""
    old = np.asarray(old)
    return np.where((old == 0) | (old > v), v, old - 1).astype(old.dtype)


def cas_fn(dt: DType) -> AtomicFn:
    """The function of `atomic.cas` on an AtomicSlice of `dt`: bitwise compare, then swap."""
    bits = np.dtype(f"u{dt.itemsize}") if dt.is_float else None

    def update(old: Any, expected: Any, value: Any) -> Any:
        if bits is None:
            same = old == expected
        else:
            same = np.asarray(old).view(bits) == np.asarray(expected).view(bits)
        return np.where(same, value, old)

    return _atomic(dt, update, _generic_scan(update))


def _atomic(dt: DType, update: Update, scan: Scan) -> AtomicFn:
    bf16 = dt.name == "bf16"
    storage = numerics.storage_dtype(dt)

    def run(memory: Any, indices: Sequence[Any], operands: Sequence[Any], n: int) -> Any:
        if n == 0:
            return np.zeros(0, storage)
        axes = [np.broadcast_to(np.asarray(i, np.int64), (n,)) for i in indices]
        idx = axes[0] if len(axes) == 1 else np.ravel_multi_index(axes, memory.shape)
        order = np.argsort(idx, kind="stable")
        sidx = idx[order]
        args = [np.broadcast_to(np.asarray(a, storage), (n,))[order] for a in operands]
        first = np.ones(n, bool)
        first[1:] = sidx[1:] != sidx[:-1]
        starts = np.flatnonzero(first)
        sizes = np.diff(np.append(starts, n))
        flat = sidx[starts]
        targets = flat if len(axes) == 1 else np.unravel_index(flat, memory.shape)
        raw = memory[targets]
        state = np.array(numerics.bf16_load(raw) if bf16 else raw, storage)
        old_sorted = _by_rank(state, args, starts, sizes, update, scan)
        memory[targets] = numerics.bf16_store(state) if bf16 else state
        old = np.empty(n, storage)
        old[order] = old_sorted
        return old

    return run


def _by_rank(
    state: Any, args: list[Any], starts: Any, sizes: Any, update: Update, scan: Scan
) -> Any:
    """The old value of each (sorted) lane; `state` (one value per element) is updated."""
    n = int(starts[-1] + sizes[-1])
    old = np.empty(n, state.dtype)
    for r in range(min(RANKS, int(sizes.max()))):
        groups = np.flatnonzero(sizes > r)
        lanes = starts[groups] + r
        old[lanes] = state[groups]
        state[groups] = update(state[groups], *(a[lanes] for a in args))
    for g in np.flatnonzero(sizes > RANKS):
        lo, hi = int(starts[g]) + RANKS, int(starts[g] + sizes[g])
        olds, state[g] = scan(state[g], [a[lo:hi] for a in args])
        old[lo:hi] = olds
    return old


def _add_scan(negate: bool) -> Scan:
    """Adds (or subtractions, as adds of the negation) one after another, in the dtype."""

    def scan(before: Any, operands: Sequence[Any]) -> tuple[Any, Any]:
        (v,) = operands
        seq = np.concatenate([[before], np.negative(v) if negate else v]).astype(v.dtype)
        acc = np.add.accumulate(seq, dtype=v.dtype)
        return acc[:-1], acc[-1]

    return scan


def _accumulate_scan(ufunc: np.ufunc) -> Scan:
    def scan(before: Any, operands: Sequence[Any]) -> tuple[Any, Any]:
        (v,) = operands
        acc = ufunc.accumulate(np.concatenate([[before], v]).astype(v.dtype))
        return acc[:-1], acc[-1]

    return scan


def _fminmax_scan(is_max: bool) -> Scan:
    """`math.fmax`/`fmin` one after another, vectorised: the state after each update is the
    running extreme, taken from the latest value equal to it (fmax(x, y) returns y on a tie,
    which matters for +0.0 and -0.0); a NaN value changes nothing, and a NaN state yields to
    the first number."""
    accumulate = (np.maximum if is_max else np.minimum).accumulate
    bottom = -np.inf if is_max else np.inf

    def scan(before: Any, operands: Sequence[Any]) -> tuple[Any, Any]:
        (v,) = operands
        seq = np.concatenate([[before], v]).astype(v.dtype)
        number = ~np.isnan(seq)
        extreme = accumulate(np.where(number, seq, bottom))
        at = np.where(number & (seq == extreme), np.arange(len(seq)), 0)
        states = seq[np.maximum.accumulate(at)]
        return states[:-1], states[-1]

    return scan


def _exch_scan(before: Any, operands: Sequence[Any]) -> tuple[Any, Any]:
    (v,) = operands
    return np.concatenate([[before], v[:-1]]).astype(v.dtype), v[-1]


def _generic_scan(update: Update) -> Scan:
    """One update at a time: for updates no NumPy scan reproduces bit for bit."""

    def scan(before: Any, operands: Sequence[Any]) -> tuple[Any, Any]:
        count = len(operands[0])
        olds = np.empty(count, operands[0].dtype)
        state = np.asarray(before)
        for k in range(count):
            olds[k] = state
            state = np.asarray(update(state, *(a[k] for a in operands)))
        return olds, state[()]

    return scan
