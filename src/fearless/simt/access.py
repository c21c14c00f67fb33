"""Array element access and the SIMT witness rules, enforced while lowering.

Rules (DESIGN section 2, SafetyError at compile time):
  - a `Slice` is read-only: any write to it is E0594;
  - a `DisjointSlice` is read and written only at the thread's own `ThreadIndex` (E0601):
    `c[i]` where `i = simt.thread.index_1d()`; `c[i + 1]`, `c[j]` or `c[int(i)]` are rejected
    because another thread owns those elements;
  - one exception: `c[b]` with `b = simt.thread.block_id()` itself, the block's element,
    which `leader.py` then allows only under a guard that one thread per block takes;
  - a 2-D `DisjointSlice` likewise only as `c[t]` with `t = simt.thread.index_2d()`:
    `c[t.row, t.col]` is two plain integers, not the witness, and is rejected too;
  - a `ThreadIndex` is never stored into an array (E0602): store `int(i)` (or `t.row`);
  - an `AtomicSlice` is neither read nor written here (E0610): only through `simt.atomic`
    (`atomics.py`), except inside `simt.unsafe()` or an `unsafe=True` kernel.
A 2-D array is read as `a[r, c]` with two integers (or `a[t]`); each axis gets its own check.
`a.shape[k]` is the extent along axis k, `len(a)` the extent along axis 0.
Loads and stores are emitted unchecked; the bounds pass adds the checks it cannot prove away.
"""

from __future__ import annotations

import ast

from .. import dtypes
from ..errors import CompileError, KernelTypeError, Location, SafetyError
from ..frontend.intrinsics import kernel_launch_error
from ..frontend.values import Operand, PyObj, Weak
from ..ir.core import ArrayType, ScalarType, Value
from ..ir.simt import ops
from .chunks import COPY_HELP, Chunk, LocalRow, check_row, emit_load, emit_store, width_of
from .coords import derived_from_block, derived_from_coordinate
from .emitter import is_thread_index, is_thread_index_2d
from .leader import LEADER_GUARD, is_block_id
from .shared import check_store, is_block_index_2d
from .ssa import SsaLowerer

# What to do instead of launching a kernel from a kernel (frontend/intrinsics.py).
DEVICE_HELP = "put the shared code in a `@simt.device` function and call it from both kernels"


def _array(lw: SsaLowerer, node: ast.Subscript) -> Value:
    base = lw.expr(node.value)
    if isinstance(base, Value) and isinstance(base.type, ArrayType):
        alloc = base.owner
        named = isinstance(node.value, ast.Name)
        if isinstance(alloc, ops.SharedAlloc | ops.LocalAlloc) and not base.name and named:
            alloc.name_array(ast.unparse(node.value))  # named after the user's variable
        return base
    if isinstance(base, PyObj):  # `other[grid, block](...)`: a launch inside a kernel
        launch = kernel_launch_error(base.obj, ast.unparse(node.value), lw.loc(node), DEVICE_HELP)
        if launch is not None:
            raise launch
    raise KernelTypeError(
        f"`{ast.unparse(node.value)}` cannot be indexed: it is {describe_operand(base)}",
        lw.loc(node.value),
        help="only `Slice` and `DisjointSlice` parameters can be indexed",
    )


def describe_operand(x: Operand, other: str = "not an array") -> str:
    """What `x` is, for a message that wanted an array."""
    if isinstance(x, Value):
        return f"a {x.type}"
    if isinstance(x, Weak):
        return "a number"
    return other


def element_indices(
    lw: SsaLowerer,
    arr: Value,
    node: ast.Subscript,
    write: bool,
    pre: Operand | None = None,
    phased: bool = False,
    slot: bool = False,
) -> list[Value]:
    """The i64 indices of `arr[...]`, one per axis, after the witness rule for DisjointSlices;
    `pre` is the single index already lowered (`load` looks at it first). A `phased` read
    (after a grid sync) may be at any index: `grid_check.py` judges it. `slot`: the index of
    `arr.get_mut(i)` (slots.py), for the wording of the witness rule."""
    assert isinstance(arr.type, ArrayType)
    idx_node = node.slice
    loc = lw.loc(idx_node)
    name = arr.name or ast.unparse(node.value)
    ndim = arr.type.ndim
    if isinstance(idx_node, ast.Slice) or (ndim == 1 and isinstance(idx_node, ast.Tuple)):
        raise CompileError(
            f"`{ast.unparse(node)}`: only single-element indexing is supported in kernels",
            loc,
            help="index one element at a time, e.g. `a[i]`",
        )
    if ndim == 1:
        idx = lw.expr(idx_node) if pre is None else pre
        if width_of(idx) > 1:
            raise _chunk_as_element(name, idx_node, loc)
        if arr.type.shared is not None and write:
            check_store(lw, arr, name, [idx], loc)
        own = is_thread_index(idx) or is_block_id(idx)  # the block id: leader.py checks the rest
        if arr.type.disjoint and not own and not (lw.ctx.witness_off or phased):
            help = None
            if is_thread_index_2d(idx):
                help = (
                    f"this is a 2-D thread index (`index_2d()` or `block_stride`): it opens "
                    f"2-D DisjointSlices; declare `{name}` as "
                    f"`simt.DisjointSlice[fl.{arr.type.dtype.name}, 2]` (rows x columns)"
                )
            elif derived_from_block(idx):
                help = (
                    "one value per block: index it with `simt.thread.block_id()` (the block's "
                    f"index in the grid) and write it from one thread, under `{LEADER_GUARD}` "
                    "(or `if simt.threadIdx.x == 0:` in a 1-D block); `simt.blockIdx` and "
                    "values computed from the block id are plain integers that open no "
                    "DisjointSlice"
                )
            elif derived_from_coordinate(idx):
                help = (
                    "raw coordinates (`simt.grid(1)`, `simt.threadIdx.x`, ...) are plain "
                    "integers: nothing proves that no other thread writes this element; "
                    f"index `{name}` with `simt.thread.index_1d()` (or loop over "
                    "`simt.thread.grid_stride(n)`), or write inside `with simt.unsafe():`"
                )
            elif lw.ctx.uses_index_2d:  # no 1-D witness can exist in this kernel
                help = (
                    f"a 1-D DisjointSlice opens only with `simt.thread.index_1d()`, which a "
                    f"kernel using `index_2d()` cannot call; declare `{name}` as "
                    f"`simt.DisjointSlice[fl.{arr.type.dtype.name}, 2]` and write `{name}[t]`"
                )
            raise _not_own_index(name, write, loc, "simt.thread.index_1d()", help, slot)
        return [_int_index(lw, idx, name, loc)]
    items = idx_node.elts if isinstance(idx_node, ast.Tuple) else [idx_node]
    values = [lw.expr(e) for e in items] if pre is None else [pre]
    if len(values) == 1 and width_of(values[0]) > 1:
        raise _chunk_as_element(name, idx_node, loc)
    pair: object = values[0] if len(values) == 1 else None
    if isinstance(pair, tuple):  # `a[simt.grid(2)]`: (x, y)
        values, items = list(pair), [idx_node] * len(pair)
    if len(values) == 1 and is_thread_index_2d(values[0]):
        if arr.type.shared is not None and write:
            check_store(lw, arr, name, values, loc)  # the grid pair is not a slot of the block
        t = values[0]
        assert isinstance(t, Value)
        em = lw.em
        return [em.emit(ops.ThreadIndexAxis(t, axis, loc)).result for axis in (0, 1)]
    if arr.type.disjoint and not (lw.ctx.witness_off or phased):
        raise _not_own_index(name, write, loc, "simt.thread.index_2d()", slot=slot)
    if arr.type.shared is not None and write:
        check_store(lw, arr, name, values, loc)
    if len(values) == 1 and arr.type.shared is not None and is_block_index_2d(values[0]):
        t = values[0]
        assert isinstance(t, Value)
        return [lw.em.emit(ops.ThreadIndexAxis(t, axis, loc)).result for axis in (0, 1)]
    if len(values) != 2:
        raise CompileError(
            f"`{name}` is a 2-D array: index it with two integers, `{name}[row, col]`",
            loc,
            label=f"{len(values)} ind{'ex' if len(values) == 1 else 'ices'}",
            help=f"write `{name}[r, c]`, or `{name}[t]` with `t = simt.thread.index_2d()`",
        )
    return [_int_index(lw, v, name, lw.loc(e)) for v, e in zip(values, items, strict=True)]


def _chunk_as_element(name: str, idx_node: ast.expr, loc: Location) -> CompileError:
    i = ast.unparse(idx_node)
    return CompileError(
        f"`{i}` is the first column of a chunk: it moves the whole chunk, not one element",
        loc,
        label="a chunk of columns",
        help=f"copy the chunk with a row of a 2-D local array, `v[k] = {name}[{i}]` or "
        f"`{name}[{i}] = v[k]`; {COPY_HELP.split('; ')[1]}",
    )


def _not_own_index(
    name: str,
    write: bool,
    loc: Location,
    witness: str,
    help: str | None = None,
    slot: bool = False,
) -> SafetyError:
    verb = "written" if write else "read"
    message = f"`{name}` is a DisjointSlice: it can only be {verb} at this thread's own index"
    if slot:
        message = (
            f"`{name}` is a DisjointSlice: `{name}.get_mut` takes only this thread's own index"
        )
    if help is None and slot:
        t = "t" if witness.endswith("index_2d()") else "i"
        help = (
            f"call `{name}.get_mut({t})` with `{t} = {witness}` itself; "
            "other elements belong to other threads (read shared inputs from a `Slice`)"
        )
    elif help is None and witness.endswith("index_2d()"):
        help = (
            f"index `{name}` with the 2-D ThreadIndex itself, `{name}[t]` where "
            f"`t = {witness}`; `t.row` and `t.col` are plain integers, and other elements "
            "belong to other threads (read shared inputs from a `Slice`)"
        )
    elif help is None:
        help = (
            f"index `{name}` with the value of `{witness}` itself; "
            "other elements belong to other threads (read shared inputs from a `Slice`)"
        )
    return SafetyError(
        message,
        loc,
        code="E0601",
        label="not this thread's index",
        help=help,
    )


def _int_index(lw: SsaLowerer, idx: Operand, name: str, loc: Location) -> Value:
    """One index as an i64: an int literal >= 0 or an integer value (a ThreadIndex too)."""
    em = lw.em
    if isinstance(idx, Weak):
        if isinstance(idx.value, bool) or not isinstance(idx.value, int):
            raise KernelTypeError("an array index must be an integer", loc)
        if idx.value < 0:
            raise CompileError(
                f"negative index `{idx.value}`: kernels do not count from the end",
                loc,
                help=f"write `len({name}) - {-idx.value}`",
            )
        return em.const(idx.value, dtypes.i64, loc)
    v = em.scalar(idx, loc, "index")
    assert isinstance(v, Value)
    if not v.dtype.is_int:
        raise KernelTypeError(
            f"an array index must be an integer, found {v.dtype.name}",
            loc,
            help="convert it with `int(x)`",
        )
    return em.cast(v, dtypes.i64, loc)


def shape(lw: SsaLowerer, node: ast.Subscript) -> Value | None:
    """`a.shape[k]` with a literal axis: the array's extent along k (i64); else None."""
    attr = node.value
    if not (isinstance(attr, ast.Attribute) and attr.attr == "shape"):
        return None
    base = lw.expr(attr.value)
    if not (isinstance(base, Value) and isinstance(base.type, ArrayType)):
        return None
    ndim = base.type.ndim
    k = node.slice
    if not (isinstance(k, ast.Constant) and type(k.value) is int and 0 <= k.value < ndim):
        name = base.name or ast.unparse(attr.value)
        axes = " or ".join(f"`{name}.shape[{a}]`" for a in range(ndim))
        raise CompileError(
            f"`{ast.unparse(node)}`: the axis must be a literal below {ndim}",
            lw.loc(k),
            label="not an axis of this array",
            help=f"write {axes}",
        )
    return lw.em.emit(ops.ArrayLen(base, lw.loc(node), axis=k.value)).result


def load(
    lw: SsaLowerer, node: ast.Subscript, loc: Location, at: tuple[Value, Operand] | None = None
) -> Operand:
    """`a[...]`: an element; `x[i]` with a chunk witness and `v[k]` of a 2-D local array are
    the two sides of a chunk copy (simt/chunks.py), which `store` completes. `at`: the array
    and the index already lowered (a slot's `s.get()`, slots.py; `node` gives the names)."""
    if at is None:
        extent = shape(lw, node)
        if extent is not None:
            return extent
    arr = _array(lw, node) if at is None else at[0]
    assert isinstance(arr.type, ArrayType)
    name = arr.name or ast.unparse(node.value)
    # After a grid sync, other threads' elements may be read (grid_check.py: when no write of
    # the array runs in the same grid phase).
    phased = (
        lw.ctx.grid_synced and not lw.ctx.witness_off and (arr.type.disjoint or arr.type.atomic)
    )
    if arr.type.atomic and not (lw.ctx.witness_off or phased):
        raise plain_atomic_access(name, False, loc, arr.type.dtype.name, arr.type.ndim)
    pre = None if at is None else at[1]
    if at is None and not isinstance(node.slice, ast.Tuple | ast.Slice):
        pre = lw.expr(node.slice)
        if width_of(pre) > 1 and arr.type.shared is None and arr.type.local is None:
            assert isinstance(pre, Value)
            return PyObj(Chunk(arr, pre, name), ast.unparse(node))
        local = arr.type.local
        if local is not None and len(local) == 2 and _is_int(pre):
            row = LocalRow(arr, _int_index(lw, pre, name, loc), name)
            return PyObj(row, ast.unparse(node))
    idx = element_indices(lw, arr, node, write=False, pre=pre, phased=phased)
    op = lw.em.emit(ops.Load(arr, idx, loc))
    own = pre is not None and (is_thread_index(pre) or is_thread_index_2d(pre))
    if phased and (arr.type.atomic or not own):
        lw.ctx.phased_loads.append(op)
    return op.result


def _is_int(x: Operand) -> bool:
    if isinstance(x, Weak):
        return type(x.value) is int
    return isinstance(x, Value) and isinstance(x.type, ScalarType) and x.dtype.is_int


def _copy(
    lw: SsaLowerer, node: ast.Subscript, arr: Value, name: str, src: object, loc: Location
) -> None:
    """`v[k] = x[i]` or `out[i] = v[k]`: a chunk copy (simt/chunks.py)."""
    assert isinstance(arr.type, ArrayType)
    single = not isinstance(node.slice, ast.Tuple | ast.Slice)
    target = lw.expr(node.slice) if single else None
    local = arr.type.local
    row_target = target is not None and _is_int(target)
    if isinstance(src, Chunk) and local is not None and len(local) == 2 and row_target:
        assert target is not None
        check_row(arr, src.width, name, loc)
        _same_dtype(src.array, arr, src.name, name, loc)
        emit_load(lw.em, src, arr, _int_index(lw, target, name, loc), loc)
        return
    if isinstance(src, LocalRow) and width_of(target) > 1 and arr.type.ndim == 2:
        assert isinstance(target, Value)
        if local is not None or arr.type.shared is not None:
            raise CompileError(
                f"a chunk is copied out of a local array into a 2-D array, not into `{name}`",
                loc,
                help=COPY_HELP,
            )
        check_row(src.array, width_of(target), src.name, loc)
        _same_dtype(src.array, arr, src.name, name, loc)
        emit_store(lw.em, src, arr, target, loc)
        return
    raise CompileError(
        f"{src!r} cannot be assigned to `{ast.unparse(node)}`",
        loc,
        label="not a chunk copy",
        help=COPY_HELP,
    )


def _same_dtype(a: Value, b: Value, a_name: str, b_name: str, loc: Location) -> None:
    ta, tb = a.type, b.type
    assert isinstance(ta, ArrayType) and isinstance(tb, ArrayType)
    if ta.dtype != tb.dtype:
        raise KernelTypeError(
            f"a chunk copy between `{a_name}` ({ta.dtype.name}) and `{b_name}` "
            f"({tb.dtype.name}) would convert its elements",
            loc,
            help="copy into a local array of the array's type, then convert element by "
            "element (`v[k, j]`)",
        )


def store(
    lw: SsaLowerer,
    node: ast.Subscript,
    value: Operand,
    loc: Location,
    at: tuple[Value, Operand] | None = None,
) -> None:
    """`a[...] = value`; `at` as for `load` (a slot's `s.set(v)`)."""
    arr = _array(lw, node) if at is None else at[0]
    assert isinstance(arr.type, ArrayType)
    name = arr.name or ast.unparse(node.value)
    if arr.type.atomic and not lw.ctx.witness_off:
        raise plain_atomic_access(name, True, loc, arr.type.dtype.name, arr.type.ndim)
    if not (arr.type.disjoint or arr.type.atomic or arr.type.static_shape is not None):
        raise read_only(arr, name, f"cannot assign to `{ast.unparse(node)}`", loc)
    if isinstance(value, PyObj) and isinstance(value.obj, Chunk | LocalRow):
        return _copy(lw, node, arr, name, value.obj, loc)
    idx = element_indices(lw, arr, node, write=True, pre=None if at is None else at[1])
    if is_thread_index(value) or is_thread_index_2d(value):
        raise SafetyError(
            "a ThreadIndex cannot be stored into an array",
            loc,
            code="E0602",
            help="store its plain value instead: `int(i)`"
            if is_thread_index(value)
            else "store one of its coordinates instead: `t.row` or `t.col`",
        )
    dt = arr.type.dtype
    em = lw.em
    v = em.scalar(value, loc, "value")
    adopted = em.is_weak(v) and isinstance(v, Value) and em.adopts(v, dt)
    if isinstance(v, Value) and v.type != ScalarType(dt) and not adopted:
        raise KernelTypeError(
            f"cannot store {v.dtype.name} into `{name}`, whose elements are {dt.name}",
            loc,
            label=f"expected {dt.name}",
            help=f"convert the value: `fl.{dt.name}(...)`",
        )
    val = em.as_value(v, loc, dt)
    em.emit(ops.Store(arr, idx, val, loc))


def read_only(arr: Value, name: str, what: str, loc: Location) -> SafetyError:
    """E0594: `what` (an assignment, a `get_mut`) would write `name`, a read-only `Slice`."""
    assert isinstance(arr.type, ArrayType)
    return SafetyError(
        f"{what}, as `{name}` is a read-only `Slice`",
        loc,
        code="E0594",
        label="cannot assign" if what.startswith("cannot assign") else "cannot borrow as mutable",
        help=f"declare `{name}` as `simt.DisjointSlice[fl.{arr.type.dtype.name}]` to write it",
    )


def plain_atomic_access(
    name: str, write: bool, loc: Location, dtype: str, ndim: int = 1
) -> SafetyError:
    """E0610: an `AtomicSlice` is touched only through `simt.atomic`."""
    what = "written" if write else "read"
    i = "i" if ndim == 1 else "(r, c)"  # a 2-D AtomicSlice takes a pair
    t = f"fl.{dtype}" if ndim == 1 else f"fl.{dtype}, 2"
    if write:
        help = (
            f"store with `simt.atomic.exch({name}, {i}, v)` or update with "
            f"`simt.atomic.add({name}, {i}, v)` (also sub, max, min, cas); declare it "
            f"`simt.DisjointSlice[{t}]` if each thread writes only its own element"
        )
    else:
        help = (
            f"update it with `simt.atomic.add({name}, {i}, v)` (also sub, max, min, exch, "
            f"cas), which returns the old value; declare it `simt.Slice[{t}]` if no thread "
            "of the launch writes it"
        )
    return SafetyError(
        f"`{name}` is an AtomicSlice: it can only be {what} through `simt.atomic`",
        loc,
        code="E0610",
        label="plain access of an AtomicSlice",
        notes=["other threads may update any element at any time during the launch"],
        help=help,
    )
