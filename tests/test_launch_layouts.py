"""Kernel launches of both tracks with each array argument, one at a time, in an unusual memory
layout: the launch either uses it correctly (an input's values read; an output's values written
where the caller sees them, in the very object passed) or refuses it with a fearless error at
the caller's line. A copy written and never copied back, or a write through a view whose
elements share memory, would be a silently wrong result: the class of bug this file hunts.

Layouts: NumPy transposed, Fortran, stepped, reversed, offset, misaligned, non-native byte
order, writeable stride-0 and overlapping `as_strided` views, read-only arrays
(`np.broadcast_to`, `writeable=False`, `np.frombuffer` of bytes); `fl.asarray` of each; torch
CPU tensors transposed, stepped, expanded, overlapping, offset; `fl.asarray` of those. A Tile
output is a partition of an fl.Tensor, so a layout given for one goes through `fl.asarray`, and
the caller reads the fl.Tensor back: `fl.asarray` of a strided NumPy view is a copy that the
kernel's writes never leave (documented, docs/design.md 1.3; `fl.from_numpy` refuses it).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from simt_kernels import matadd, vecadd  # examples/ (on the tests' path): c = a + b

import fearless as fl
from fearless import simt, tile
from fearless.errors import FearlessError

torch = pytest.importorskip("torch")
as_strided = np.lib.stride_tricks.as_strided


# ----------------------------------------------------------------------------------- kernels


@simt.kernel(block=64)
def histogram(x: simt.Slice[fl.i32], counts: simt.AtomicSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.add(counts, x[i], 1)


@tile.kernel
def tadd(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


@tile.kernel
def center_rows(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    """out = x - (x's row mean) + y: each block owns whole rows."""
    v = tile.load_like(x, out)
    n = x.shape[1].astype(fl.f32)
    out.store(v - tile.sum(v, axis=1, keepdims=True) / n + tile.load_like(y, out))


@tile.kernel
def gather_add(c: tile.Atomic[fl.f32], a: tile.Tensor[fl.f32], b: tile.Tensor[fl.f32]):
    indices = tile.block_id(0) * 16 + tile.arange(16, fl.i32)
    tile.scatter(c, indices, tile.gather(a, indices) + tile.gather(b, indices))


# ----------------------------------------------------------------------------------- layouts
# Each maker takes a C-contiguous array of values and returns an object holding the same values
# in its layout (a stride-0 view holds the first element everywhere: the reference is computed
# from what the object holds).


def _fill(view: np.ndarray, values: np.ndarray) -> np.ndarray:
    view[...] = values
    return view


def _misaligned(v: np.ndarray) -> np.ndarray:
    raw = np.zeros(v.nbytes + 1, np.uint8)[1:]
    return _fill(raw.view(v.dtype).reshape(v.shape), v)


def _stepped(v: np.ndarray) -> np.ndarray:
    big = np.zeros((*v.shape[:-1], 2 * v.shape[-1]), v.dtype)
    return _fill(big[..., ::2], v)


def _reversed(v: np.ndarray) -> np.ndarray:
    return _fill(np.empty_like(v)[::-1], v)


def _offset(v: np.ndarray) -> np.ndarray:
    return _fill(np.empty(v.size + 1, v.dtype)[1:].reshape(v.shape), v)


def _column(v: np.ndarray) -> np.ndarray:
    return _fill(np.empty((*v.shape, 3), v.dtype)[..., 1], v)


def _transposed(v: np.ndarray) -> np.ndarray:
    return _fill(np.empty(v.shape[::-1], v.dtype).T, v)


def _stride0(v: np.ndarray) -> np.ndarray:
    one = v.reshape(-1)[:1].copy()
    return as_strided(one, v.shape, (0,) * v.ndim, writeable=True)


def _overlap(v: np.ndarray) -> np.ndarray:
    """A writeable view whose rows overlap (row r starts one element after row r - 1); 1-D:
    pairs of elements sharing memory."""
    isz = v.itemsize
    if v.ndim == 1:
        buf = np.arange(v.size // 2 + 1).astype(v.dtype)
        return as_strided(buf, v.shape, (isz // 2 if isz > 1 else 1,), writeable=True)
    buf = np.arange(v.shape[0] + v.shape[1]).astype(v.dtype)
    return as_strided(buf, v.shape, (isz, isz), writeable=True)


def _overlap_c(v: np.ndarray) -> np.ndarray:
    """A writeable 2-D view whose rows are all one row's memory: strides (0, itemsize)."""
    row = v.reshape(v.shape[0], -1)[0].copy() if v.ndim == 2 else v.copy()
    if v.ndim == 1:
        return as_strided(row, v.shape, (v.itemsize,), writeable=True)
    return as_strided(row, v.shape, (0, v.itemsize), writeable=True)


def _readonly(v: np.ndarray) -> np.ndarray:
    out = v.copy()
    out.flags.writeable = False
    return out


def _broadcast_ro(v: np.ndarray) -> np.ndarray:
    return np.broadcast_to(v.copy(), v.shape)


def _broadcast_row(v: np.ndarray) -> np.ndarray:
    return np.broadcast_to(v.reshape(-1, v.shape[-1])[0].copy(), v.shape)


def _frombytes(v: np.ndarray) -> np.ndarray:
    return np.frombuffer(v.tobytes(), v.dtype).reshape(v.shape)


def _big_endian(v: np.ndarray) -> np.ndarray:
    return v.astype(v.dtype.newbyteorder(">"))


def _fortran(v: np.ndarray) -> np.ndarray:
    return np.asfortranarray(v)


NP_1D: dict[str, Callable[[np.ndarray], Any]] = {
    "stepped": _stepped,
    "reversed": _reversed,
    "offset": _offset,
    "column": _column,
    "misaligned": _misaligned,
    "big_endian": _big_endian,
    "stride0": _stride0,
    "overlap": _overlap,
    "readonly": _readonly,
    "broadcast_ro": _broadcast_ro,
    "frombytes": _frombytes,
}
NP_2D: dict[str, Callable[[np.ndarray], Any]] = {
    "transposed": _transposed,
    "fortran": _fortran,
    "stepped": _stepped,
    "reversed": _reversed,
    "offset": _offset,
    "misaligned": _misaligned,
    "stride0": _stride0,
    "overlap": _overlap,
    "rows_alias": _overlap_c,
    "readonly": _readonly,
    "broadcast_ro": _broadcast_ro,
    "broadcast_row": _broadcast_row,
}


def _torch_layouts(nd: int) -> dict[str, Callable[[np.ndarray], Any]]:
    def t(v: np.ndarray) -> Any:
        return torch.from_numpy(v.copy())

    out: dict[str, Callable[[np.ndarray], Any]] = {
        "torch": t,
        "torch_stepped": lambda v: _tfill(torch.zeros(*v.shape[:-1], 2 * v.shape[-1])[..., ::2], v),
        "torch_offset": lambda v: _tfill(torch.zeros(v.size + 1)[1:].view(*v.shape), v),
        "torch_expand": lambda v: (
            torch.from_numpy(v.reshape(-1)[:1].copy()).reshape((1,) * nd).expand(*v.shape)
        ),
        "torch_overlap": lambda v: torch.as_strided(
            torch.from_numpy(np.arange(sum(v.shape)).astype(v.dtype)),
            v.shape,
            (1,) * nd,
        ),
    }
    if nd == 2:
        out["torch_t"] = lambda v: _tfill(torch.zeros(v.shape[1], v.shape[0]).t(), v)
        out["torch_rows_alias"] = lambda v: torch.from_numpy(v[0].copy()).expand(*v.shape)
    else:
        out["torch_column"] = lambda v: _tfill(torch.zeros(v.shape[0], 2)[:, 0], v)
    return out


def _tfill(t: Any, v: np.ndarray) -> Any:
    t.copy_(torch.from_numpy(np.ascontiguousarray(v)))
    return t


def _with_fl(layouts: dict[str, Callable[[np.ndarray], Any]]) -> dict[str, Any]:
    """Each layout, and `fl.asarray` of it (made at the launch: `fl.asarray` may refuse)."""
    out: dict[str, Any] = dict(layouts)
    for name, make in layouts.items():
        out["fl_" + name] = lambda v, make=make: fl.asarray(make(v))
    return out


LAYOUTS_1D = _with_fl({**NP_1D, **_torch_layouts(1)})
LAYOUTS_2D = _with_fl({**NP_2D, **_torch_layouts(2)})


def values_of(obj: Any) -> np.ndarray:
    """What the caller reads from the object it passed."""
    if isinstance(obj, fl.Tensor):
        return np.array(obj.numpy())
    if isinstance(obj, torch.Tensor):
        return obj.detach().numpy().copy()
    return np.array(obj).astype(np.asarray(obj).dtype.newbyteorder("="))


# -------------------------------------------------------------------------------- the cases


@dataclass
class Case:
    name: str
    # the contiguous arguments' values (outputs: their initial values)
    make: Callable[[], list[np.ndarray]]
    outputs: tuple[int, ...]
    # reference outputs from the inputs' values (as the launch's objects hold them)
    ref: Callable[[list[np.ndarray]], dict[int, np.ndarray]]
    launch: Callable[[list[Any]], None]
    nd: int
    tile_part: tuple[int, ...] = ()  # Tile: the outputs are partitioned with this tile


RNG = np.random.default_rng(7)
N, M, K = 100, 6, 20


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _nan(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan, np.float32)


CASES = [
    Case(
        "simt_vecadd",
        lambda: [_f32(N), _f32(N), _nan(N)],
        (2,),
        lambda v: {2: v[0] + v[1]},
        lambda a: vecadd[1, 256](*a),
        1,
    ),
    Case(
        "simt_matadd",
        lambda: [_f32(M, K), _f32(M, K), _nan(M, K)],
        (2,),
        lambda v: {2: v[0] + v[1]},
        lambda a: matadd[(2, 1), (16, 8)](*a),
        2,
    ),
    Case(
        "simt_histogram",
        lambda: [RNG.integers(0, 8, N).astype(np.int32), np.zeros(8, np.int32)],
        (1,),
        lambda v: {1: v[1] + np.bincount(v[0], minlength=8).astype(np.int32)},
        lambda a: histogram[2, 64](*a),
        1,
    ),
    Case(
        "tile_add",
        lambda: [_nan(N), _f32(N), _f32(N)],
        (0,),
        lambda v: {0: v[1] + v[2]},
        lambda a: tadd(*a),
        1,
        (32,),
    ),
    Case(
        "tile_center_rows",
        lambda: [_nan(M, K), _f32(M, K), _f32(M, K)],
        (0,),
        lambda v: {0: v[1] - v[1].mean(axis=1, keepdims=True, dtype=np.float32) + v[2]},
        lambda a: center_rows(*a),
        2,
        (2, 32),
    ),
    Case(
        "tile_gather_atomic",
        lambda: [_nan(N), _f32(N), _f32(N)],
        (0,),
        lambda v: {0: v[1] + v[2]},
        lambda a: gather_add.launch(-(-N // 16), *a),
        1,
    ),
]


# Layouts every launch must take (contiguous, aligned, writeable): the check that the cases
# launch at all, rather than passing by being refused.
MUST_RUN = {"offset", "torch", "torch_offset", "fl_offset", "fl_torch", "fl_stepped"}


def _params() -> list[Any]:
    out = []
    for case in CASES:
        n_args = len(case.make())
        layouts = LAYOUTS_1D if case.nd == 1 else LAYOUTS_2D
        for i in range(n_args):
            for name in layouts:
                if case.name == "simt_histogram" and ("torch" in name or "big" in name):
                    continue  # i32: the torch makers build f32; covered by the f32 cases
                out.append(pytest.param(case, i, name, id=f"{case.name}-arg{i}-{name}"))
    return out


def _as_argument(case: Case, i: int, obj: Any) -> tuple[Any, Any]:
    """(what the launch takes, what the caller reads back). A Tile output is a partition of an
    fl.Tensor: of `obj` itself when it is one, else of `fl.asarray(obj)`, which the caller reads
    back (`fl.asarray` of a strided view is a documented copy: docs/design.md 1.3)."""
    if case.tile_part and i in case.outputs:
        t = obj if isinstance(obj, fl.Tensor) else fl.asarray(obj)
        return t.partition(case.tile_part), t
    return obj, obj


@pytest.mark.parametrize(("case", "index", "layout"), _params())
def test_argument_layout(case: Case, index: int, layout: str) -> None:
    layouts = LAYOUTS_1D if case.nd == 1 else LAYOUTS_2D
    base = case.make()
    args: list[Any] = [_as_argument(case, i, a) for i, a in enumerate(base)]
    seens = [seen for _, seen in args]
    args = [arg for arg, _ in args]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's warning for a read-only NumPy array
            obj = layouts[layout](base[index])
        if isinstance(obj, torch.Tensor) and obj.dtype != torch.from_numpy(base[index]).dtype:
            obj = obj.to(torch.from_numpy(base[index]).dtype)
        # every argument's values before the launch (an atomic output adds to its own)
        before = [values_of(a) for a in base]
        before[index] = values_of(obj)
        if case.tile_part and index in case.outputs:
            args[index].unpartition()  # the contiguous output's partition, not launched
        args[index], seens[index] = _as_argument(case, index, obj)
        case.launch(args)
    except FearlessError as error:
        assert layout not in MUST_RUN, f"a plain layout was refused: {error}"
        assert error.loc is not None and error.loc.file == __file__, (
            f"refused at {error.loc}, not at the caller's line"
        )
        return
    # used: the values the caller reads from what it passed are the reference's
    ref = case.ref(before)
    for o in case.outputs:
        if case.tile_part:
            args[o].unpartition()
        got = values_of(seens[o])
        np.testing.assert_allclose(
            got, ref[o], rtol=1e-5, atol=1e-5, err_msg=f"output {o}; argument {index} {layout}"
        )


# ------------------------------------------------------------------- the other launch paths


def _refused(launch: Callable[[], None]) -> FearlessError:
    with pytest.raises(FearlessError) as caught:
        launch()
    assert caught.value.loc is not None and caught.value.loc.file == __file__
    return caught.value


def test_prepared_simt_launch_checks_each_call() -> None:
    """`k(prep, ...)` refuses what `k[grid, block](...)` refuses, after a launch that ran."""
    v = np.arange(N, dtype=np.float32)
    prep = vecadd.prepare(grid=2)
    c = np.zeros(N, np.float32)
    vecadd(prep, v, v, c)
    np.testing.assert_array_equal(c, 2 * v)
    for out in (_stride0(c), _readonly(c), _stepped(c), torch.zeros(1).expand(N)):
        _refused(lambda out=out: vecadd(prep, v, v, out))


def test_warm_tile_launches_check_each_layout() -> None:
    """A Tile launch prepared for contiguous arguments (its warm key: pointer mod 16, shape)
    still refuses the same shapes in other layouts, for a Tensor and an Atomic."""
    v = np.arange(N, dtype=np.float32)
    c = np.zeros(N, np.float32)
    for _ in range(2):
        gather_add.launch(-(-N // 16), c, v, v)
    np.testing.assert_array_equal(c, 2 * v)
    for bad in (_stepped(v), _stride0(v), _reversed(v)):
        _refused(lambda bad=bad: gather_add.launch(-(-N // 16), c, bad, v))
    for out in (_readonly(c), _stride0(c), torch.zeros(1).expand(N)):
        _refused(lambda out=out: gather_add.launch(-(-N // 16), out, v, v))


def test_aliases_across_libraries_are_borrow_errors() -> None:
    """An output over the memory of an input made by another library (torch over NumPy, a
    partition of `fl.asarray(a)` beside `a`) is E0502, not a kernel reading its own writes."""
    a = np.arange(N, dtype=np.float32)
    assert _refused(lambda: vecadd[1, 256](a, a, torch.from_numpy(a))).code == "E0502"
    t = fl.asarray(a).partition((32,))
    assert _refused(lambda: tadd(t, a, a)).code == "E0502"


def test_extent_one_axes_take_any_stride() -> None:
    """An axis of extent 1 has no stride to follow: a stride-0 or odd one there is still C
    order, read and written where the caller sees it."""
    row = as_strided(np.arange(5, dtype=np.float32), (1, 5), (0, 4))
    col = as_strided(np.zeros(5, np.float32), (5, 1), (4, 0), writeable=True)
    out = np.zeros((1, 5), np.float32)
    matadd[(1, 1), (16, 8)](row, row, out)
    np.testing.assert_array_equal(out, 2 * row)
    matadd[(1, 1), (16, 8)](np.ones((5, 1), np.float32), np.ones((5, 1), np.float32), col)
    np.testing.assert_array_equal(col, np.full((5, 1), 2, np.float32))


class _DLPackOnly:
    """A host array known only by `__dlpack__` (as JAX's or CuPy's host arrays are)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self.a.__dlpack_device__()


def test_dlpack_host_outputs_are_written_or_refused() -> None:
    v = np.arange(N, dtype=np.float32)
    out = _DLPackOnly(np.zeros(N, np.float32))
    vecadd[1, 256](v, v, out)
    np.testing.assert_array_equal(out.a, 2 * v)
    for bad in (_readonly(v), _stepped(v)):
        _refused(lambda bad=bad: vecadd[1, 256](v, v, _DLPackOnly(bad)))
