"""The simulator's meaning of `tile.gather`, `tile.scatter` and the Tile atomics (ops Gather,
Scatter, AtomicRMW, AtomicCAS; the frontend is tile/indexed.py).

Coordinates are per-element integer tiles, one per axis; an element is live when every
coordinate is inside the array (negative ones are outside) and its mask is true. The simulator
runs blocks one after another and, within an op, the live elements in row-major order, so an
atomic's old values are those of that order: one of the orders the GPU may take. A
compare-and-swap compares the bits, as the GPU does (a float NaN matches the same NaN, -0.0
does not match 0.0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dtypes import DType
from .. import numerics as nx


def live(host: np.ndarray, coords: list[Any], mask: Any) -> tuple[np.ndarray, tuple[Any, ...]]:
    """(which elements are live, their coordinates as index arrays into `host`)."""
    cs = [np.asarray(c).astype(np.int64) for c in coords]
    ok = np.ones(cs[0].shape, bool) if mask is None else np.asarray(mask, bool).copy()
    for c, n in zip(cs, host.shape, strict=True):
        ok &= (c >= 0) & (c < n)
    return ok, tuple(c[ok] for c in cs)


def _read(host: np.ndarray, dt: DType, where: tuple[Any, ...]) -> np.ndarray:
    raw = host[where]
    return nx.raw_load(raw, dt)


def _write(host: np.ndarray, dt: DType, where: tuple[Any, ...], value: Any) -> None:
    host[where] = nx.raw_store(value, dt)


def gather(host: np.ndarray, dt: DType, coords: list[Any], mask: Any, padding: Any) -> Any:
    ok, where = live(host, coords, mask)
    out = np.full(ok.shape, nx.constant(padding, dt), nx.storage_dtype(dt))
    out[ok] = _read(host, dt, where)
    return out


def scatter(host: np.ndarray, dt: DType, value: Any, coords: list[Any], mask: Any) -> None:
    ok, where = live(host, coords, mask)
    _write(host, dt, where, np.asarray(value)[ok])  # repeated coordinates: the last one lands


def atomic(
    host: np.ndarray,
    dt: DType,
    mode: str,
    value: Any,
    expected: Any,
    coords: list[Any],
    mask: Any,
) -> Any:
    """An AtomicRMW (`mode`) or, with `mode == "cas"`, an AtomicCAS whose desired values are
    `value`. Returns the old values (`expected`'s, else `value`'s, where not live)."""
    ok, where = live(host, coords, mask)
    vals = np.asarray(value)
    old = np.array(expected if mode == "cas" else vals, copy=True)
    fn = None if mode in ("xchg", "cas") else nx.binary_fn(mode, dt)
    positions = np.argwhere(ok)
    for n, pos in enumerate(positions):
        at = tuple(w[n : n + 1] for w in where)
        before = _read(host, dt, at)[0]
        v = vals[tuple(pos)]
        old[tuple(pos)] = before
        if mode == "cas":  # compares bits, as the GPU's atom.cas: NaN matches its own
            # bits, -0.0 does not match 0.0
            want = nx.raw_store(np.asarray([np.asarray(expected)[tuple(pos)]]), dt)
            if host[at].tobytes() == np.asarray(want).astype(host.dtype, copy=False).tobytes():
                _write(host, dt, at, np.asarray([v]))
            continue
        new = v if fn is None else fn(np.asarray([before]), np.asarray([v]))
        _write(host, dt, at, np.asarray(new).reshape(1))
    return old
